//===- MaskIntervals.cpp - block classification by interval arithmetic ---===//
//
// Bounds a mask_mod over a box of indices: for index ranges of (b, h, q_idx,
// kv_idx) it emits two i1 values, "true on the whole box" and "false on the
// whole box", by interval arithmetic over the region's ops. The tiled
// lowering uses them to skip empty blocks and drop the mask on full ones
// without evaluating the mask per point.
//
// Values are intervals: integers and index [lo, hi] (signed), floats
// [lo, hi] (NaN in the data makes both NaN, so that no ordered comparison
// decides anything), i1 values a pair (t, f) = (true on the whole box,
// false on the whole box). Reads of captured tensors (document ids,
// lengths, bool or float per-position tables) are bounded by the min / max
// of the elements under the index box (MaskCaptureReads.cpp).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flex;
using P = arith::CmpIPredicate;
using PF = arith::CmpFPredicate;

static bool isScalar(Type t) { return t.isIntOrIndexOrFloat(); }
static bool isBool(Type t) { return t.isInteger(1); }
static bool isWideInt(Type t) { return t.isIntOrIndex() && !isBool(t); }

/// Can the interval emitter bound `op` (inside mask_mod `region`)?
static bool isAnalyzableOp(Operation &op, Region &region) {
  Type res = op.getNumResults() == 1 ? op.getResult(0).getType() : Type();
  if (!res || !isScalar(res))
    return false;
  if (auto read = dyn_cast<tensor::ExtractOp>(op))
    return !region.isAncestor(read.getTensor().getParentRegion());
  for (Value operand : op.getOperands())
    if (!isScalar(operand.getType()))
      return false;
  if (isa<arith::ConstantOp, arith::SelectOp>(op))
    return true;
  if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op))
    return isBool(res);
  if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::MinSIOp,
          arith::MaxSIOp, math::AbsIOp>(op))
    return isWideInt(res);
  if (isa<arith::IndexCastOp, arith::ExtSIOp, arith::TruncIOp>(op))
    return isWideInt(res) && isWideInt(op.getOperand(0).getType());
  if (isa<arith::ExtUIOp>(op)) { // from i1, or from a narrower signed range
    Type in = op.getOperand(0).getType();
    return isWideInt(res) && (isBool(in) || in.getIntOrFloatBitWidth() < 63);
  }
  if (isa<arith::SIToFPOp>(op))
    return isa<FloatType>(res) && isWideInt(op.getOperand(0).getType());
  if (isa<arith::ExtFOp, math::FloorOp, math::CeilOp, arith::DivFOp>(op))
    return isa<FloatType>(res);
  if (isa<arith::FPToSIOp>(op))
    return isWideInt(res);
  if (isa<arith::FloorDivSIOp, arith::DivSIOp, arith::RemSIOp,
          arith::RemUIOp>(op)) {
    if (!isWideInt(res))
      return false;
    APInt c;
    return matchPattern(op.getOperand(1), m_ConstantInt(&c)) &&
           c.isStrictlyPositive();
  }
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    P p = cmp.getPredicate();
    if (isBool(cmp.getLhs().getType()))
      return p == P::eq || p == P::ne;
    return p == P::eq || p == P::ne || p == P::slt || p == P::sle ||
           p == P::sgt || p == P::sge;
  }
  if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
    PF p = cmp.getPredicate();
    return p == PF::OEQ || p == PF::ONE || p == PF::OLT || p == PF::OLE ||
           p == PF::OGT || p == PF::OGE;
  }
  return false;
}

bool mlir::flex::isIntervalAnalyzableMask(Region &region) {
  Block &block = region.front();
  for (Operation &op : block.without_terminator())
    if (!isAnalyzableOp(op, region))
      return false;
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  return yield && yield.getValues().size() == 1 &&
         isBool(yield.getValues()[0].getType());
}

namespace {
using Interval = std::pair<Value, Value>;

/// Emits the interval IR for one mask region.
struct IntervalEmitter {
  OpBuilder &b;
  Location loc;
  DenseMap<Value, Interval> range;
  Value trueV;

  IntervalEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {
    trueV = arith::ConstantIntOp::create(b, loc, 1, 1);
  }

  Value notV(Value x) { return arith::XOrIOp::create(b, loc, x, trueV); }
  Value andV(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value orV(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value sel(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value cmp(P p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value cmpf(PF p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value minV(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::MinimumFOp::create(b, loc, x, y);
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value maxV(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::MaximumFOp::create(b, loc, x, y);
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value constInt(Type t, int64_t v) {
    if (t.isIndex())
      return arith::ConstantIndexOp::create(b, loc, v);
    return arith::ConstantIntOp::create(b, loc, t, v);
  }

  /// A value of the region, or one from above (an exact point).
  Interval get(Value v) {
    auto it = range.find(v);
    if (it != range.end())
      return it->second;
    if (isBool(v.getType()))
      return {v, notV(v)};
    return {v, v};
  }

  /// (t, f) of comparing two intervals (see its definition).
  Interval compare(bool isFloat, P rel, Interval a, Interval c);

  Interval bitLogic(Operation &op);
  Interval cmpI(arith::CmpIOp op);
  Interval cmpF(arith::CmpFOp op);
  Interval select(arith::SelectOp op);
  Interval narrow(Operation &op, Interval a);
  Interval extUI(arith::ExtUIOp op);
  Interval arithmetic(Operation &op);
  Interval remainder(Operation &op);
  Interval floats(Operation &op);
  Interval visit(Operation &op);
};
} // namespace

Interval IntervalEmitter::bitLogic(Operation &op) {
  auto [at, af] = get(op.getOperand(0));
  auto [bt, bf] = get(op.getOperand(1));
  if (isa<arith::AndIOp>(op))
    return {andV(at, bt), orV(af, bf)};
  if (isa<arith::OrIOp>(op))
    return {orV(at, bt), andV(af, bf)};
  return {orV(andV(at, bf), andV(af, bt)), orV(andV(at, bt), andV(af, bf))};
}

/// x <rel> y on x in [alo, ahi], y in [blo, bhi], as (t, f): x < y
/// everywhere iff ahi < blo, nowhere iff alo >= bhi (likewise <=, >, >=);
/// x == y everywhere iff both are the same point, nowhere iff disjoint.
/// Floats use the ordered predicates, false on NaN.
Interval IntervalEmitter::compare(bool isFloat, P rel, Interval a,
                                  Interval c) {
  auto [alo, ahi] = a;
  auto [blo, bhi] = c;
  auto r = [&](P p, Value x, Value y) {
    if (!isFloat)
      return cmp(p, x, y);
    PF pf = p == P::slt   ? PF::OLT
            : p == P::sle ? PF::OLE
            : p == P::sgt ? PF::OGT
            : p == P::sge ? PF::OGE
                          : PF::OEQ;
    return cmpf(pf, x, y);
  };
  switch (rel) {
  case P::slt:
    return {r(P::slt, ahi, blo), r(P::sge, alo, bhi)};
  case P::sle:
    return {r(P::sle, ahi, blo), r(P::sgt, alo, bhi)};
  case P::sgt:
    return {r(P::sgt, alo, bhi), r(P::sle, ahi, blo)};
  case P::sge:
    return {r(P::sge, alo, bhi), r(P::slt, ahi, blo)};
  default: {
    Value allEq = andV(andV(r(P::eq, alo, ahi), r(P::eq, blo, bhi)),
                       r(P::eq, alo, blo));
    Value disjoint = orV(r(P::slt, ahi, blo), r(P::slt, bhi, alo));
    return rel == P::eq ? Interval{allEq, disjoint}
                        : Interval{disjoint, allEq};
  }
  }
}

Interval IntervalEmitter::cmpI(arith::CmpIOp op) {
  P p = op.getPredicate();
  if (isBool(op.getLhs().getType())) { // eq = not xor, ne = xor
    auto [at, af] = get(op.getLhs());
    auto [bt, bf] = get(op.getRhs());
    Interval x = {orV(andV(at, bf), andV(af, bt)),
                  orV(andV(at, bt), andV(af, bf))};
    return p == P::ne ? x : Interval{x.second, x.first};
  }
  return compare(false, p, get(op.getLhs()), get(op.getRhs()));
}

/// Ordered predicates only: a NaN interval (any NaN element read) gives
/// (false, false) for both the predicate and its negation.
Interval IntervalEmitter::cmpF(arith::CmpFOp op) {
  PF pf = op.getPredicate();
  P p = pf == PF::OLT   ? P::slt
        : pf == PF::OLE ? P::sle
        : pf == PF::OGT ? P::sgt
        : pf == PF::OGE ? P::sge
        : pf == PF::OEQ ? P::eq
                        : P::ne;
  return compare(true, p, get(op.getLhs()), get(op.getRhs()));
}

/// select(c, x, y): x's interval where c is true on the box, y's where it
/// is false, else their hull.
Interval IntervalEmitter::select(arith::SelectOp op) {
  auto [ct, cf] = get(op.getCondition());
  Interval x = get(op.getTrueValue()), y = get(op.getFalseValue());
  if (isBool(op.getType())) {
    // true everywhere: (c & x) | (!c & y) with both branches' guarantees.
    Value t = orV(orV(andV(ct, x.first), andV(cf, y.first)),
                  andV(x.first, y.first));
    Value f = orV(orV(andV(ct, x.second), andV(cf, y.second)),
                  andV(x.second, y.second));
    return {t, f};
  }
  Value lo = sel(ct, x.first, sel(cf, y.first, minV(x.first, y.first)));
  Value hi = sel(ct, x.second, sel(cf, y.second, maxV(x.second, y.second)));
  return {lo, hi};
}

/// A cast (index_cast, extsi, trunci) of a wide integer: monotone when
/// widening; when narrowing only if [lo, hi] fits the narrow signed type,
/// else the narrow type's whole range.
Interval IntervalEmitter::narrow(Operation &op, Interval a) {
  Type from = op.getOperand(0).getType(), to = op.getResult(0).getType();
  auto width = [](Type t) {
    return t.isIndex() ? 64u : t.getIntOrFloatBitWidth();
  };
  auto cast = [&](Value v) {
    IRMapping m;
    m.map(op.getOperand(0), v);
    return b.clone(op, m)->getResult(0);
  };
  unsigned wt = width(to);
  if (wt >= width(from))
    return {cast(a.first), cast(a.second)};
  int64_t smin = -(int64_t(1) << (wt - 1)), smax = (int64_t(1) << (wt - 1)) - 1;
  Value fits = andV(cmp(P::sge, a.first, constInt(from, smin)),
                    cmp(P::sle, a.second, constInt(from, smax)));
  return {sel(fits, cast(a.first), constInt(to, smin)),
          sel(fits, cast(a.second), constInt(to, smax))};
}

/// extui: of an i1 (t, f) -> [t ? 1 : 0, f ? 0 : 1]; of a non-negative
/// interval, the same interval; else [0, 2^w - 1].
Interval IntervalEmitter::extUI(arith::ExtUIOp op) {
  Type to = op.getType();
  Value zero = constInt(to, 0), one = constInt(to, 1);
  if (isBool(op.getIn().getType())) {
    auto [t, f] = get(op.getIn());
    return {sel(t, one, zero), sel(f, zero, one)};
  }
  auto [lo, hi] = get(op.getIn());
  unsigned w = op.getIn().getType().getIntOrFloatBitWidth();
  Value umax = constInt(to, int64_t((uint64_t(1) << w) - 1));
  Value nonNeg = cmp(P::sge, lo, constInt(lo.getType(), 0));
  return {sel(nonNeg, arith::ExtUIOp::create(b, loc, to, lo), zero),
          sel(nonNeg, arith::ExtUIOp::create(b, loc, to, hi), umax)};
}

/// abs, add, sub, mul, min, max and division by a positive constant.
Interval IntervalEmitter::arithmetic(Operation &op) {
  auto [alo, ahi] = get(op.getOperand(0));
  if (isa<math::AbsIOp>(op)) { // [lo, hi], [-hi, -lo] or [0, max(-lo, hi)]
    Type t = alo.getType();
    Value zero = constInt(t, 0);
    Value nlo = arith::SubIOp::create(b, loc, zero, alo);
    Value nhi = arith::SubIOp::create(b, loc, zero, ahi);
    Value pos = cmp(P::sge, alo, zero), neg = cmp(P::sle, ahi, zero);
    return {sel(pos, alo, sel(neg, nhi, zero)),
            sel(pos, ahi, sel(neg, nlo, maxV(nlo, ahi)))};
  }
  if (isa<arith::FloorDivSIOp, arith::DivSIOp>(op)) { // monotone
    // The divisor is a constant, possibly defined in the region: its copy.
    Value d = get(op.getOperand(1)).first;
    IRMapping m1, m2;
    m1.map(op.getOperand(0), alo);
    m1.map(op.getOperand(1), d);
    m2.map(op.getOperand(0), ahi);
    m2.map(op.getOperand(1), d);
    return {b.clone(op, m1)->getResult(0), b.clone(op, m2)->getResult(0)};
  }
  auto [blo, bhi] = get(op.getOperand(1));
  if (isa<arith::AddIOp>(op))
    return {arith::AddIOp::create(b, loc, alo, blo),
            arith::AddIOp::create(b, loc, ahi, bhi)};
  if (isa<arith::SubIOp>(op))
    return {arith::SubIOp::create(b, loc, alo, bhi),
            arith::SubIOp::create(b, loc, ahi, blo)};
  if (isa<arith::MinSIOp>(op))
    return {minV(alo, blo), minV(ahi, bhi)};
  if (isa<arith::MaxSIOp>(op))
    return {maxV(alo, blo), maxV(ahi, bhi)};
  Value p1 = arith::MulIOp::create(b, loc, alo, blo);
  Value p2 = arith::MulIOp::create(b, loc, alo, bhi);
  Value p3 = arith::MulIOp::create(b, loc, ahi, blo);
  Value p4 = arith::MulIOp::create(b, loc, ahi, bhi);
  return {minV(minV(p1, p2), minV(p3, p4)), maxV(maxV(p1, p2), maxV(p3, p4))};
}

/// x rem c (c > 0 constant): [lo rem c, hi rem c] when lo >= 0 and lo, hi
/// are in the same period; else [0, c - 1] when lo >= 0 or for remui,
/// else [-(c - 1), c - 1].
Interval IntervalEmitter::remainder(Operation &op) {
  auto [lo, hi] = get(op.getOperand(0));
  Type t = lo.getType();
  APInt cv;
  matchPattern(op.getOperand(1), m_ConstantInt(&cv));
  int64_t c = cv.getSExtValue();
  Value zero = constInt(t, 0), top = constInt(t, c - 1);
  Value cC = constInt(t, c);
  Value nonNeg = cmp(P::sge, lo, zero);
  Value samePeriod = cmp(P::eq, arith::DivSIOp::create(b, loc, lo, cC),
                         arith::DivSIOp::create(b, loc, hi, cC));
  Value exact = andV(nonNeg, samePeriod);
  Value lowAll = isa<arith::RemUIOp>(op) ? zero : sel(nonNeg, zero,
                                                       constInt(t, 1 - c));
  return {sel(exact, arith::RemSIOp::create(b, loc, lo, cC), lowAll),
          sel(exact, arith::RemSIOp::create(b, loc, hi, cC), top)};
}

/// Monotone float steps (sitofp, extf, floor, ceil), x / d for d > 0 on
/// the whole box (else NaN: unknown), fptosi of a range that fits well
/// inside the integer type (else the type's whole range).
Interval IntervalEmitter::floats(Operation &op) {
  auto [lo, hi] = get(op.getOperand(0));
  auto mono = [&](Value v) {
    IRMapping m;
    m.map(op.getOperand(0), v);
    return b.clone(op, m)->getResult(0);
  };
  if (isa<arith::SIToFPOp, arith::ExtFOp, math::FloorOp, math::CeilOp>(op))
    return {mono(lo), mono(hi)};
  if (auto div = dyn_cast<arith::DivFOp>(op)) {
    auto [dlo, dhi] = get(div.getRhs());
    Type ft = lo.getType();
    Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(ft, 0.0));
    Value nan = arith::ConstantOp::create(
        b, loc, b.getFloatAttr(ft, std::numeric_limits<double>::quiet_NaN()));
    auto q = [&](Value x, Value y) {
      return arith::DivFOp::create(b, loc, x, y).getResult();
    };
    Value pos = cmpf(PF::OGT, dlo, zero);
    return {sel(pos, minV(q(lo, dlo), q(lo, dhi)), nan),
            sel(pos, maxV(q(hi, dlo), q(hi, dhi)), nan)};
  }
  auto toInt = cast<arith::FPToSIOp>(op);
  Type it = toInt.getType(), ft = lo.getType();
  unsigned w = it.isIndex() ? 64 : it.getIntOrFloatBitWidth();
  double lim = std::ldexp(1.0, int(w) - 2);
  Value fits =
      andV(cmpf(PF::OGE, lo,
                arith::ConstantOp::create(b, loc, b.getFloatAttr(ft, -lim))),
           cmpf(PF::OLE, hi,
                arith::ConstantOp::create(b, loc, b.getFloatAttr(ft, lim))));
  int64_t smin = w == 64 ? std::numeric_limits<int64_t>::min()
                         : -(int64_t(1) << (w - 1));
  int64_t smax = w == 64 ? std::numeric_limits<int64_t>::max()
                         : (int64_t(1) << (w - 1)) - 1;
  return {sel(fits, mono(lo), constInt(it, smin)),
          sel(fits, mono(hi), constInt(it, smax))};
}

Interval IntervalEmitter::visit(Operation &op) {
  Value res = op.getResult(0);
  if (isa<arith::ConstantOp>(op)) {
    Value v = b.clone(op)->getResult(0);
    return isBool(res.getType()) ? Interval{v, notV(v)} : Interval{v, v};
  }
  if (auto read = dyn_cast<tensor::ExtractOp>(op)) {
    SmallVector<Interval> idx;
    for (Value i : read.getIndices())
      idx.push_back(get(i));
    Interval r = emitCaptureReadBounds(b, loc, read.getTensor(), idx);
    // i1 elements come back as (all, any).
    return isBool(res.getType()) ? Interval{r.first, notV(r.second)} : r;
  }
  if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op))
    return bitLogic(op);
  if (auto c = dyn_cast<arith::CmpIOp>(op))
    return cmpI(c);
  if (auto c = dyn_cast<arith::CmpFOp>(op))
    return cmpF(c);
  if (auto s = dyn_cast<arith::SelectOp>(op))
    return select(s);
  if (auto e = dyn_cast<arith::ExtUIOp>(op))
    return extUI(e);
  if (isa<arith::IndexCastOp, arith::ExtSIOp, arith::TruncIOp>(op))
    return narrow(op, get(op.getOperand(0)));
  if (isa<arith::RemSIOp, arith::RemUIOp>(op))
    return remainder(op);
  if (isa<arith::SIToFPOp, arith::ExtFOp, math::FloorOp, math::CeilOp,
          arith::DivFOp, arith::FPToSIOp>(op))
    return floats(op);
  return arithmetic(op);
}

std::pair<Value, Value>
mlir::flex::emitMaskBounds(OpBuilder &b, Location loc, Region &region,
                           ArrayRef<std::pair<Value, Value>> argRanges) {
  IntervalEmitter em(b, loc);
  Block &block = region.front();
  for (auto [arg, r] : llvm::zip_equal(block.getArguments(), argRanges))
    em.range[arg] = r;
  for (Operation &op : block.without_terminator())
    em.range[op.getResult(0)] = em.visit(op);
  return em.get(cast<YieldOp>(block.getTerminator()).getValues()[0]);
}
