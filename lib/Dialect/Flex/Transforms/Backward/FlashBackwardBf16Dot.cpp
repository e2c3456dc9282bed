//===- FlashBackwardBf16Dot.cpp - a block's contractions on vdpbf16ps -----===//
//
// The five contractions of one (query block, key block) pair of the tiled
// backward for bf16 inputs with `bf16-dot`, on flex-to-flash's AVX512-BF16
// dot kernel (FlashBf16Kernel.cpp, f32 sums):
//   S  = scale Q.K^T, dP = dO.V^T       (buildBf16ScoreProducts: Q / dO
//                                        rows as they are, K^T / V^T in
//                                        pairs of E per key block)
//   dV_j += P^T.dO, dK_j += dS^T.Q      (buildBf16TransposedProductTile:
//                                        P / dS rounded to bf16 and packed
//                                        in pairs of query rows, dO / Q in
//                                        pairs of query rows)
//   dQ_i += dS.K                        (buildBf16RowProductTile: dS
//                                        rounded, K in pairs of keys)
// P and dS are rounded to bf16 before their products, as torch's flex
// backward does for bf16 inputs (FA2 implementations alike).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::flex;

static int64_t dimOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

std::pair<Value, Value>
mlir::flex::buildBf16ScoreProducts(OpBuilder &b, Location loc,
                                   AttentionBackwardOp op,
                                   const BackwardBlock &blk) {
  int64_t mt = blk.tileM, nt = blk.tileN, e = dimOf(blk.q, 1),
          ev = dimOf(blk.dout, 1);
  Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  BroadcastFmaTiles qk{blk.q, blk.keyT, blk.sScratch, Value(), mt, e, nt};
  qk.outScale = scale;
  Value s = buildBf16DotKernel(b, loc, qk);
  Value dp = buildBf16DotKernel(
      b, loc, {blk.dout, blk.valueT, blk.dpScratch, Value(), mt, ev, nt});
  return {s, dp};
}

Value mlir::flex::buildBf16TransposedProductTile(OpBuilder &b, Location loc,
                                                 Value lhs, Value rhs,
                                                 Value acc, Value scratch) {
  int64_t mt = dimOf(lhs, 0), nt = dimOf(lhs, 1), w = dimOf(acc, 1);
  BroadcastFmaTiles t{lhs, rhs, acc, Value(), nt, mt, w};
  t.accumulate = true;
  t.lhsTransposed = true;
  t.lhsScratch = scratch;
  return buildBf16DotKernel(b, loc, t);
}

Value mlir::flex::buildBf16RowProductTile(OpBuilder &b, Location loc, Value ds,
                                          Value k, Value acc, Value scratch) {
  int64_t mt = dimOf(ds, 0), nt = dimOf(ds, 1), e = dimOf(acc, 1);
  BroadcastFmaTiles t{ds, k, acc, Value(), mt, nt, e};
  t.accumulate = true;
  t.lhsScratch = scratch;
  return buildBf16DotKernel(b, loc, t);
}
