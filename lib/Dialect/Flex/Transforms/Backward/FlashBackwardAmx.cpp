//===- FlashBackwardAmx.cpp - a block's contractions for AMX tiles --------===//
//
// The five contractions of one (query block, key block) pair of the tiled
// backward with `amx` (bf16 inputs): each a linalg.generic marked
// `flex.amx` over (m, k, n) with lhs bf16 row-major at (m, k) and rhs the
// pair-packed bf16 at (k floordiv 2, 2 n + k mod 2), f32 dest, which
// flex-amx-contractions turns into AMX tile loops after bufferization
// (tdpbf16ps: 16 x 16 f32 += 16 x 32 bf16 . 32 x 16 bf16):
// (buildAmxProduct, FlashBf16Kernel.cpp):
//   S = Q.K^T, dP = dO.V^T              (buildAmxScoreProducts: K^T / V^T
//                                        in pairs of E; S unscaled, the
//                                        score tile scales it)
//   dV_j^T += dO^T.P, dK_j^T += Q^T.dS  (buildAmxGradientProducts: P, dS
//                                        rounded to bf16 and packed in
//                                        pairs of query rows as the rhs,
//                                        the tile's Q^T / dO^T as the lhs;
//                                        dK_j, dV_j kept transposed)
//   dQ_i += dS.K                        (dS rounded, K in pairs of keys)
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

std::pair<Value, Value>
mlir::flex::buildAmxScoreProducts(OpBuilder &b, Location loc,
                                  const BackwardBlock &blk) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  auto zeroed = [&](Value t) {
    return linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{t})
        .getResult(0);
  };
  Value s = buildAmxProduct(b, loc, blk.q, blk.keyT, zeroed(blk.sScratch));
  Value dp =
      buildAmxProduct(b, loc, blk.dout, blk.valueT, zeroed(blk.dpScratch));
  return {s, dp};
}

SmallVector<Value> mlir::flex::buildAmxGradientProducts(
    OpBuilder &b, Location loc, const BackwardBlock &blk, Value p, Value ds,
    Value dq, Value dkT, Value dvT) {
  Value pPairs = packRowPairs(b, loc, p, blk.pPairsScratch);
  Value dsPairs = packRowPairs(b, loc, ds, blk.dsPairsScratch);
  Value dsRows = roundRowsToBf16(b, loc, ds, blk.dsBf16Scratch);
  dvT = buildAmxProduct(b, loc, blk.doutT, pPairs, dvT);
  dkT = buildAmxProduct(b, loc, blk.qT, dsPairs, dkT);
  dq = buildAmxProduct(b, loc, dsRows, blk.keyRows, dq);
  return {dq, dkT, dvT};
}
