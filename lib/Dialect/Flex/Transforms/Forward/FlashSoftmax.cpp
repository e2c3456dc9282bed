//===- FlashSoftmax.cpp - online-softmax update of one block --------------===//
//
// Per row of the score block S: bm = max S; mn = max(mx, bm); corr =
// exp(mx - mn) (1 while the row is all -inf); P = exp(S - mn) (0 while all
// -inf); l = l * corr + sum P. Max by compare+select (`ugt` keeps NaN;
// llvm.maximum would be a libcall the JIT cannot resolve). Vector form: one
// row at a time as a vector, tree reductions; else linalg.generic ops.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

static Value cF(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

static Value maxC(OpBuilder &b, Location loc, Value x, Value y) {
  Value gt = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT, x, y);
  return arith::SelectOp::create(b, loc, gt, x, y);
}

static Value expNonPositive(OpBuilder &b, Location loc, Value x,
                            bool fastExp) {
  return fastExp ? emitExpNonPositive(b, loc, x)
                 : math::ExpOp::create(b, loc, x).getResult();
}

/// corr = exp(mold - mn), 1 while mn is -inf.
static Value correction(OpBuilder &b, Location loc, Value mold, Value mn,
                        bool fastExp) {
  Value diff = arith::SubFOp::create(b, loc, mold, mn);
  Value corr = expNonPositive(b, loc, diff, fastExp);
  return arith::SelectOp::create(b, loc, emitIsNegInf(b, loc, mn),
                                 cF(b, loc, 1.0), corr);
}

static SoftmaxUpdate buildVectorSoftmax(OpBuilder &b, Location loc, Value s,
                                        Value mx, Value l, bool fastExp) {
  auto sTy = cast<RankedTensorType>(s.getType());
  int64_t mt = sTy.getDimSize(0), nt = sTy.getDimSize(1);
  auto rowTy = VectorType::get({nt}, b.getF32Type());
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value corrInit = tensor::EmptyOp::create(b, loc, {mt}, b.getF32Type());
  auto loop = scf::ForOp::create(
      b, loc, c0, arith::ConstantIndexOp::create(b, loc, mt), c1,
      ValueRange{s, mx, l, corrInit},
      [&](OpBuilder &nb, Location nl, Value m, ValueRange it) {
        Value row = readF32Row(nb, nl, it[0], m, c0, nt);
        auto maxF = [&](Value x, Value y) { return maxC(nb, nl, x, y); };
        auto addF = [&](Value x, Value y) -> Value {
          return arith::AddFOp::create(nb, nl, x, y);
        };
        Value mold = tensor::ExtractOp::create(nb, nl, it[1], ValueRange{m});
        Value lold = tensor::ExtractOp::create(nb, nl, it[2], ValueRange{m});
        Value mn = maxF(treeReduce(nb, nl, row, maxF), mold);
        Value corr = correction(nb, nl, mold, mn, fastExp);
        Value d = arith::SubFOp::create(
            nb, nl, row, vector::BroadcastOp::create(nb, nl, rowTy, mn));
        Value zero = arith::ConstantOp::create(
            nb, nl, DenseElementsAttr::get(rowTy, nb.getF32FloatAttr(0.0)));
        Value p = arith::SelectOp::create(nb, nl, emitIsNegInf(nb, nl, mn), zero,
                                          expNonPositive(nb, nl, d, fastExp));
        Value lnew = arith::AddFOp::create(
            nb, nl, arith::MulFOp::create(nb, nl, lold, corr),
            treeReduce(nb, nl, p, addF));
        Value pT = vector::TransferWriteOp::create(nb, nl, p, it[0],
                                                   ValueRange{m, c0},
                                                   ArrayRef<bool>{true})
                       .getResult();
        scf::YieldOp::create(
            nb, nl,
            ValueRange{pT, tensor::InsertOp::create(nb, nl, mn, it[1], m),
                       tensor::InsertOp::create(nb, nl, lnew, it[2], m),
                       tensor::InsertOp::create(nb, nl, corr, it[3], m)});
      });
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
          loop.getResult(3)};
}

/// A linalg.generic over [Mt] or [Mt, Nt] (`rank`) with the given operand
/// maps ("row" operands are indexed by the first dimension only).
static linalg::GenericOp
rowGeneric(OpBuilder &b, Location loc, ValueRange ins, ValueRange outs,
           ArrayRef<bool> isRow, int64_t rank, ArrayRef<IteratorType> iters,
           function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>
               fn) {
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap row = AffineMap::get(rank, 0, {getAffineDimExpr(0, ctx)}, ctx);
  SmallVector<AffineMap> maps;
  for (bool r : isRow)
    maps.push_back(r ? row : id);
  SmallVector<Type> types;
  for (Value o : outs)
    types.push_back(o.getType());
  return linalg::GenericOp::create(
      b, loc, types, ins, outs, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl, fn(nb, nl, args));
      });
}

static SoftmaxUpdate buildGenericSoftmax(OpBuilder &b, Location loc, Value s,
                                         Value mx, Value l, bool fastExp) {
  int64_t mt = cast<RankedTensorType>(s.getType()).getDimSize(0);
  Type f32 = b.getF32Type();
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;
  float negInf = -std::numeric_limits<float>::infinity();
  Value bm0 = linalg::FillOp::create(
                  b, loc, ValueRange{cF(b, loc, negInf)},
                  ValueRange{tensor::EmptyOp::create(b, loc, {mt}, f32)})
                  .getResult(0);
  // bm[m] = max_n S[m, n].
  Value bm = rowGeneric(b, loc, {s}, {bm0}, {false, true}, 2, {par, red},
                        [&](OpBuilder &nb, Location nl, ValueRange a) {
                          return SmallVector<Value>{maxC(nb, nl, a[0], a[1])};
                        })
                 .getResult(0);
  // mn = max(mx, bm); corr = exp(mx - mn); l *= corr.
  Value corr0 = tensor::EmptyOp::create(b, loc, {mt}, f32);
  auto stats = rowGeneric(
      b, loc, {bm}, {mx, l, corr0}, {false, false, false, false}, 1, {par},
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value mn = maxC(nb, nl, a[0], a[1]);
        Value corr = correction(nb, nl, a[1], mn, fastExp);
        return SmallVector<Value>{mn, arith::MulFOp::create(nb, nl, a[2], corr),
                                  corr};
      });
  Value mn = stats.getResult(0);
  // P = exp(S - mn) (0 while the row is all -inf), in place.
  Value p = rowGeneric(b, loc, {mn}, {s}, {true, false}, 2, {par, par},
                       [&](OpBuilder &nb, Location nl, ValueRange a) {
                         Value d = arith::SubFOp::create(nb, nl, a[1], a[0]);
                         Value e = expNonPositive(nb, nl, d, fastExp);
                         return SmallVector<Value>{arith::SelectOp::create(
                             nb, nl, emitIsNegInf(nb, nl, a[0]), cF(nb, nl, 0), e)};
                       })
                .getResult(0);
  // l += sum_n P.
  Value lNew = rowGeneric(b, loc, {p}, {stats.getResult(1)}, {false, true}, 2,
                          {par, red},
                          [&](OpBuilder &nb, Location nl, ValueRange a) {
                            return SmallVector<Value>{
                                arith::AddFOp::create(nb, nl, a[1], a[0])};
                          })
                   .getResult(0);
  return {p, mn, lNew, stats.getResult(2)};
}

SoftmaxUpdate mlir::flex::buildSoftmaxUpdate(OpBuilder &b, Location loc,
                                             Value s, Value max, Value sum,
                                             const FlashConfig &cfg) {
  if (cfg.vectorize)
    return buildVectorSoftmax(b, loc, s, max, sum, cfg.fastExp);
  return buildGenericSoftmax(b, loc, s, max, sum, cfg.fastExp);
}
