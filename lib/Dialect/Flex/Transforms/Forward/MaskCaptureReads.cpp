//===- MaskCaptureReads.cpp - bounds of a captured tensor over a box ------===//
//
// For the interval analysis of data-dependent masks (MaskIntervals.cpp): the
// value range of `tensor.extract %capture[i0, ..., ik]` when each index
// ranges over an interval. A nest of scf.for over the index box (clamped to
// the capture's extents) reduces the elements read: min / max for integers
// and floats (NaN propagates, so comparisons against it decide nothing),
// all / any for i1. An index that is a point costs one iteration, so
// `doc[q]` over a row tile costs Mt reads and `doc[b, kv]` Nt.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::flex;

/// Combines two elements' (lo, hi) summaries: (min, max), or for i1
/// (and, or).
static std::pair<Value, Value> combine(OpBuilder &b, Location loc,
                                       std::pair<Value, Value> x, Value y) {
  Type t = y.getType();
  if (t.isInteger(1))
    return {arith::AndIOp::create(b, loc, x.first, y),
            arith::OrIOp::create(b, loc, x.second, y)};
  if (isa<FloatType>(t))
    return {arith::MinimumFOp::create(b, loc, x.first, y),
            arith::MaximumFOp::create(b, loc, x.second, y)};
  return {arith::MinSIOp::create(b, loc, x.first, y),
          arith::MaxSIOp::create(b, loc, x.second, y)};
}

/// Index interval [lo, hi] clamped to [0, size - 1].
static std::pair<Value, Value> clampToDim(OpBuilder &b, Location loc,
                                          Value src, unsigned d,
                                          std::pair<Value, Value> r) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value last = arith::SubIOp::create(
      b, loc, b.createOrFold<tensor::DimOp>(loc, src, d),
      arith::ConstantIndexOp::create(b, loc, 1));
  auto clamp = [&](Value v) -> Value {
    return arith::MinSIOp::create(b, loc,
                                  arith::MaxSIOp::create(b, loc, v, zero),
                                  last);
  };
  Value lo = clamp(r.first);
  return {lo, r.first == r.second ? lo : clamp(r.second)};
}

std::pair<Value, Value>
mlir::flex::emitCaptureReadBounds(OpBuilder &b, Location loc, Value src,
                                  ArrayRef<std::pair<Value, Value>> indices) {
  SmallVector<std::pair<Value, Value>> box;
  for (auto [d, r] : llvm::enumerate(indices))
    box.push_back(clampToDim(b, loc, src, d, r));
  SmallVector<Value> first;
  for (auto &r : box)
    first.push_back(r.first);
  Value v0 = tensor::ExtractOp::create(b, loc, src, first);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  // Nested loops over the box, innermost last; each carries (lo, hi).
  std::function<std::pair<Value, Value>(OpBuilder &, unsigned,
                                        SmallVector<Value> &,
                                        std::pair<Value, Value>)>
      nest = [&](OpBuilder &nb, unsigned d, SmallVector<Value> &ivs,
                 std::pair<Value, Value> acc) -> std::pair<Value, Value> {
    if (d == box.size()) {
      Value v = tensor::ExtractOp::create(nb, loc, src, ivs);
      return combine(nb, loc, acc, v);
    }
    if (box[d].first == box[d].second) { // a point: no loop
      ivs.push_back(box[d].first);
      auto r = nest(nb, d + 1, ivs, acc);
      ivs.pop_back();
      return r;
    }
    Value ub = arith::AddIOp::create(nb, loc, box[d].second, one);
    auto loop = scf::ForOp::create(
        nb, loc, box[d].first, ub, one, ValueRange{acc.first, acc.second},
        [&](OpBuilder &lb, Location, Value iv, ValueRange it) {
          ivs.push_back(iv);
          auto r = nest(lb, d + 1, ivs, {it[0], it[1]});
          ivs.pop_back();
          scf::YieldOp::create(lb, loc, ValueRange{r.first, r.second});
        });
    return {loop.getResult(0), loop.getResult(1)};
  };
  SmallVector<Value> ivs;
  return nest(b, 0, ivs, {v0, v0});
}
