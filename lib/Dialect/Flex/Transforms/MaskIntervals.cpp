//===- MaskIntervals.cpp - block classification by interval arithmetic ---===//
//
// Bounds a mask_mod over a box of indices: for index ranges of (b, h, q_idx,
// kv_idx) it emits two i1 values, "true on the whole box" and "false on the
// whole box", by interval arithmetic over the region's integer ops. The
// tiled lowering uses them to skip empty blocks and drop the mask on full
// ones without evaluating the mask per point.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::flex;

/// Is `region` (a mask_mod) made only of ops whose value range over a box
/// of indices we can bound? (integer arithmetic, cmpi, i1 logic).
static bool isAnalyzableMaskOps(Region &region) {
  Block &block = region.front();
  for (Operation &op : block.without_terminator()) {
    for (Value operand : op.getOperands()) {
      // Values from above must be integers (treated as exact points).
      if (!operand.getType().isIntOrIndex())
        return false;
    }
    for (Value res : op.getResults())
      if (!res.getType().isIntOrIndex())
        return false;
    if (isa<arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
            arith::MinSIOp, arith::MaxSIOp, arith::AndIOp, arith::OrIOp,
            arith::XOrIOp>(op))
      continue;
    if (auto cast = dyn_cast<arith::IndexCastOp>(op))
      continue;
    if (isa<arith::ExtSIOp>(op))
      continue;
    if (isa<arith::FloorDivSIOp, arith::DivSIOp>(op)) {
      APInt c;
      if (!matchPattern(op.getOperand(1), m_ConstantInt(&c)) ||
          !c.isStrictlyPositive())
        return false;
      continue;
    }
    if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      switch (cmp.getPredicate()) {
      case arith::CmpIPredicate::eq:
      case arith::CmpIPredicate::ne:
      case arith::CmpIPredicate::slt:
      case arith::CmpIPredicate::sle:
      case arith::CmpIPredicate::sgt:
      case arith::CmpIPredicate::sge:
        continue;
      default:
        return false;
      }
    }
    return false;
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  return yield && yield.getValues().size() == 1 &&
         yield.getValues()[0].getType().isInteger(1);
}

/// Emits IR computing, for the box `args[i] in [lo[i], hi[i]]`, two i1
/// values (mustTrue, mustFalse) for the mask's result. The region must
/// satisfy isIntervalAnalyzableMask.
std::pair<Value, Value>
mlir::flex::emitMaskBounds(OpBuilder &b, Location loc, Region &region,
               ArrayRef<std::pair<Value, Value>> argRanges) {
  // Integer values map to an interval [lo, hi]; i1 values to (t, f) where
  // t: true on the whole box, f: false on the whole box.
  DenseMap<Value, std::pair<Value, Value>> range;
  Block &block = region.front();
  for (auto [arg, r] : llvm::zip_equal(block.getArguments(), argRanges))
    range[arg] = r;
  Value trueV = arith::ConstantIntOp::create(b, loc, 1, 1);
  auto notV = [&](Value x) {
    return arith::XOrIOp::create(b, loc, x, trueV).getResult();
  };
  auto andV = [&](Value x, Value y) {
    return arith::AndIOp::create(b, loc, x, y).getResult();
  };
  auto orV = [&](Value x, Value y) {
    return arith::OrIOp::create(b, loc, x, y).getResult();
  };
  auto get = [&](Value v) -> std::pair<Value, Value> {
    auto it = range.find(v);
    if (it != range.end())
      return it->second;
    // Defined above the region: an exact value.
    if (v.getType().isInteger(1))
      return {v, notV(v)};
    return {v, v};
  };
  auto minV = [&](Value x, Value y) {
    return arith::MinSIOp::create(b, loc, x, y).getResult();
  };
  auto maxV = [&](Value x, Value y) {
    return arith::MaxSIOp::create(b, loc, x, y).getResult();
  };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y).getResult();
  };
  using P = arith::CmpIPredicate;

  for (Operation &op : block.without_terminator()) {
    Value res = op.getResult(0);
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      Value v = b.clone(op)->getResult(0);
      range[res] = res.getType().isInteger(1) ? std::pair{v, notV(v)}
                                              : std::pair{v, v};
      continue;
    }
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op) &&
        res.getType().isInteger(1)) {
      auto [at, af] = get(op.getOperand(0));
      auto [bt, bf] = get(op.getOperand(1));
      if (isa<arith::AndIOp>(op))
        range[res] = {andV(at, bt), orV(af, bf)};
      else if (isa<arith::OrIOp>(op))
        range[res] = {orV(at, bt), andV(af, bf)};
      else
        range[res] = {orV(andV(at, bf), andV(af, bt)),
                      orV(andV(at, bt), andV(af, bf))};
      continue;
    }
    if (auto c = dyn_cast<arith::CmpIOp>(op)) {
      auto [alo, ahi] = get(c.getLhs());
      auto [blo, bhi] = get(c.getRhs());
      Value t, f;
      switch (c.getPredicate()) {
      case P::slt: // a < b everywhere iff ahi < blo
        t = cmp(P::slt, ahi, blo);
        f = cmp(P::sge, alo, bhi);
        break;
      case P::sle:
        t = cmp(P::sle, ahi, blo);
        f = cmp(P::sgt, alo, bhi);
        break;
      case P::sgt:
        t = cmp(P::sgt, alo, bhi);
        f = cmp(P::sle, ahi, blo);
        break;
      case P::sge:
        t = cmp(P::sge, alo, bhi);
        f = cmp(P::slt, ahi, blo);
        break;
      case P::eq:
      case P::ne: {
        Value allEq = andV(andV(cmp(P::eq, alo, ahi), cmp(P::eq, blo, bhi)),
                           cmp(P::eq, alo, blo));
        Value disjoint = orV(cmp(P::slt, ahi, blo), cmp(P::slt, bhi, alo));
        t = c.getPredicate() == P::eq ? allEq : disjoint;
        f = c.getPredicate() == P::eq ? disjoint : allEq;
        break;
      }
      default:
        llvm_unreachable("filtered by isIntervalAnalyzableMask");
      }
      range[res] = {t, f};
      continue;
    }
    // Integer arithmetic on intervals.
    auto [alo, ahi] = get(op.getOperand(0));
    if (isa<arith::IndexCastOp, arith::ExtSIOp>(op)) {
      Type ty = res.getType();
      IRMapping m1, m2;
      m1.map(op.getOperand(0), alo);
      m2.map(op.getOperand(0), ahi);
      range[res] = {b.clone(op, m1)->getResult(0),
                    b.clone(op, m2)->getResult(0)};
      (void)ty;
      continue;
    }
    auto [blo, bhi] = get(op.getOperand(1));
    if (isa<arith::AddIOp>(op)) {
      range[res] = {arith::AddIOp::create(b, loc, alo, blo),
                    arith::AddIOp::create(b, loc, ahi, bhi)};
    } else if (isa<arith::SubIOp>(op)) {
      range[res] = {arith::SubIOp::create(b, loc, alo, bhi),
                    arith::SubIOp::create(b, loc, ahi, blo)};
    } else if (isa<arith::MulIOp>(op)) {
      Value p1 = arith::MulIOp::create(b, loc, alo, blo);
      Value p2 = arith::MulIOp::create(b, loc, alo, bhi);
      Value p3 = arith::MulIOp::create(b, loc, ahi, blo);
      Value p4 = arith::MulIOp::create(b, loc, ahi, bhi);
      range[res] = {minV(minV(p1, p2), minV(p3, p4)),
                    maxV(maxV(p1, p2), maxV(p3, p4))};
    } else if (isa<arith::MinSIOp>(op)) {
      range[res] = {minV(alo, blo), minV(ahi, bhi)};
    } else if (isa<arith::MaxSIOp>(op)) {
      range[res] = {maxV(alo, blo), maxV(ahi, bhi)};
    } else if (isa<arith::FloorDivSIOp, arith::DivSIOp>(op)) {
      // Monotone non-decreasing for a positive constant divisor.
      IRMapping m1, m2;
      m1.map(op.getOperand(0), alo);
      m2.map(op.getOperand(0), ahi);
      range[res] = {b.clone(op, m1)->getResult(0),
                    b.clone(op, m2)->getResult(0)};
    } else {
      // Integer (non-i1) and/or/xor: not monotone; filtered out earlier
      // only for i1, so be conservative: unknown over the full range is
      // not representable -> treat as exact only when the box is a point.
      llvm_unreachable("filtered by isIntervalAnalyzableMask");
    }
  }
  Value yielded = cast<YieldOp>(block.getTerminator()).getValues()[0];
  return get(yielded);
}

/// isAnalyzableMaskOps also accepts and/or/xor on wider integers, which are
/// not monotone: reject those.
bool mlir::flex::isIntervalAnalyzableMask(Region &region) {
  if (!isAnalyzableMaskOps(region))
    return false;
  for (Operation &op : region.front().without_terminator())
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op) &&
        !op.getResult(0).getType().isInteger(1))
      return false;
  return true;
}
