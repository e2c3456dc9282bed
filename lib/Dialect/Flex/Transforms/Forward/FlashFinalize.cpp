//===- FlashFinalize.cpp - normalization of a row tile --------------------===//
//
// After the last key block: out = acc / l, 0 for rows whose max stayed -inf
// (fully masked); logsumexp and max in log2 units, like the flex_attention
// higher-order op.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flex;

/// dest[i...] = body(ins[i...]) over the rows (and columns) of dest.
static Value rowwise(OpBuilder &b, Location loc, ValueRange ins, Value dest,
                     function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = cast<RankedTensorType>(dest.getType()).getRank();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  // Inputs of lower rank (rows) follow the leading dims of dest.
  SmallVector<AffineMap> maps;
  for (Value in : ins)
    maps.push_back(id.getMajorSubMap(
        cast<RankedTensorType>(in.getType()).getRank()));
  maps.push_back(id);
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{dest.getType()}, ins, ValueRange{dest}, maps,
             iters,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(nb, l, fn(nb, l, args.drop_back()));
             })
      .getResult(0);
}

FinalTiles mlir::flex::buildFinalization(OpBuilder &b, Location loc, Value mx,
                                         Value l, Value acc, Value outDest,
                                         bool withLse, bool withMax) {
  Type outElt = cast<RankedTensorType>(outDest.getType()).getElementType();
  Type f32 = b.getF32Type();
  FinalTiles r;
  r.out = rowwise(b, loc, {acc, l, mx}, outDest,
                  [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                    Value v = arith::DivFOp::create(nb, nl, a[0], a[1]);
                    Value z = arith::ConstantOp::create(nb, nl,
                                                        nb.getF32FloatAttr(0));
                    v = arith::SelectOp::create(nb, nl, emitIsNegInf(nb, nl, a[2]),
                                                z, v);
                    if (outElt != f32)
                      v = arith::TruncFOp::create(nb, nl, outElt, v);
                    return v;
                  });
  ArrayRef<int64_t> rows = cast<RankedTensorType>(mx.getType()).getShape();
  auto invLn2 = [](OpBuilder &nb, Location nl) -> Value {
    return arith::ConstantOp::create(nb, nl,
                                     nb.getF32FloatAttr(1.0 / std::log(2.0)));
  };
  if (withLse)
    r.lse = rowwise(
        b, loc, {mx, l}, tensor::EmptyOp::create(b, loc, rows, f32),
        [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
          Value v = arith::AddFOp::create(nb, nl, a[0],
                                          math::LogOp::create(nb, nl, a[1]));
          v = arith::MulFOp::create(nb, nl, v, invLn2(nb, nl));
          // -inf for fully masked rows (log 0 alone would be -inf too, but
          // -inf + -inf keeps it; the select makes it explicit).
          return arith::SelectOp::create(nb, nl, emitIsNegInf(nb, nl, a[0]), a[0],
                                         v);
        });
  if (withMax)
    r.max = rowwise(b, loc, {mx}, tensor::EmptyOp::create(b, loc, rows, f32),
                    [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                      return arith::MulFOp::create(nb, nl, a[0],
                                                   invLn2(nb, nl));
                    });
  return r;
}
