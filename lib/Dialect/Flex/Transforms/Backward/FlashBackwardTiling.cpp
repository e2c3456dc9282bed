//===- FlashBackwardTiling.cpp - what is shared by the backward's tiles ---===//
//
// What flex-backward-to-flash accepts, its tile sizes, the per-row pre-pass
// (delta and the natural-log lse), K/V laid out per key block, and the
// (B, Hkv) tiling through flex.attention_backward's TilingInterface.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

std::optional<std::string>
mlir::flex::flashBackwardUnsupportedReason(AttentionBackwardOp op) {
  if (!op.hasTensorSemantics())
    return std::string("operands are memrefs");
  ShapedType q = op.getQueryType(), k = op.getKeyType(), v = op.getValueType();
  if (q.isDynamicDim(3) || v.isDynamicDim(3))
    return std::string("dynamic head dimension E/Ev");
  if (!op.getKvGroupSize() && (q.isDynamicDim(1) || k.isDynamicDim(1)))
    return std::string("dynamic head counts without kv_group_size");
  // Tiles would scatter into shared capture gradients: the scalar
  // reference keeps them (per-tile partial buffers are a later step).
  if (!op.getCaptureGrads().empty())
    return std::string("capture gradients");
  return std::nullopt;
}

FlashConfig mlir::flex::chooseFlashBackwardConfig(AttentionBackwardOp op,
                                                  FlashConfig requested) {
  FlashConfig cfg = requested;
  int64_t m = op.getQueryType().getDimSize(2);
  int64_t n = op.getKeyType().getDimSize(2);
  cfg.tileM = requested.tileM > 0 ? requested.tileM : 64;
  cfg.tileN = requested.tileN > 0 ? requested.tileN : 64;
  if (!ShapedType::isDynamic(m) && m > 0 && m < cfg.tileM)
    cfg.tileM = m;
  if (!ShapedType::isDynamic(n) && n > 0 && n < cfg.tileN)
    cfg.tileN = n;
  if (std::optional<ArrayRef<int64_t>> bs = op.getBlockSizes()) {
    cfg.tileM = largestDivisorAtMost((*bs)[0], cfg.tileM);
    cfg.tileN = largestDivisorAtMost((*bs)[1], cfg.tileN);
  }
  cfg.headsPerTile = 1;
  cfg.keyRows = cfg.pairedKey = cfg.pairedValue = cfg.bf16Dot = false;
  cfg.keyChunks = 1;
  return cfg;
}

std::optional<double>
mlir::flex::estimateBackwardMicros(AttentionBackwardOp op) {
  ShapedType q = op.getQueryType(), k = op.getKeyType(), v = op.getValueType();
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape())
    return std::nullopt;
  double flops = 2.5 * 2.0 * q.getDimSize(0) * q.getDimSize(1) *
                 q.getDimSize(2) * k.getDimSize(2) *
                 (q.getDimSize(3) + v.getDimSize(3));
  return flops / 150e3;
}

static Value cF(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

static Value toF32(OpBuilder &b, Location loc, Value x) {
  if (x.getType().isF32())
    return x;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), x);
}

BackwardRowStats mlir::flex::buildBackwardRowStats(OpBuilder &b, Location loc,
                                                   AttentionBackwardOp op) {
  MLIRContext *ctx = b.getContext();
  Value out = op.getOut(), dout = op.getGradOut(), lse = op.getLogsumexp();
  auto lseTy = cast<RankedTensorType>(lse.getType());
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < 3; ++d)
    if (lseTy.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(b, loc, lse, d));
  auto rowsTy = RankedTensorType::get(lseTy.getShape(), b.getF32Type());
  auto empty = [&]() {
    return tensor::EmptyOp::create(b, loc, rowsTy.getShape(), b.getF32Type(),
                                   dyn)
        .getResult();
  };
  Value dot = linalg::FillOp::create(b, loc, ValueRange{cF(b, loc, 0.0)},
                                     ValueRange{empty()})
                  .getResult(0);
  AffineMap id4 = AffineMap::getMultiDimIdentityMap(4, ctx);
  AffineMap rows4 = AffineMap::get(
      4, 0,
      {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx),
       getAffineDimExpr(2, ctx)},
      ctx);
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;
  dot = linalg::GenericOp::create(
            b, loc, TypeRange{rowsTy}, ValueRange{dout, out}, ValueRange{dot},
            ArrayRef<AffineMap>{id4, id4, rows4},
            ArrayRef<IteratorType>{par, par, par, red},
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value p = arith::MulFOp::create(nb, l, toF32(nb, l, a[0]),
                                              toF32(nb, l, a[1]));
              linalg::YieldOp::create(
                  nb, l, ValueRange{arith::AddFOp::create(nb, l, a[2], p)});
            })
            .getResult(0);
  AffineMap id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
  SmallVector<Value> ins = {dot, lse};
  if (Value gl = op.getGradLogsumexp())
    ins.push_back(gl);
  SmallVector<AffineMap> maps(ins.size() + 2, id3);
  bool withGl = static_cast<bool>(op.getGradLogsumexp());
  auto gen = linalg::GenericOp::create(
      b, loc, TypeRange{rowsTy, rowsTy}, ins, ValueRange{empty(), empty()},
      maps, ArrayRef<IteratorType>{par, par, par},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value delta = a[0];
        if (withGl)
          delta = arith::SubFOp::create(
              nb, l, delta,
              arith::MulFOp::create(nb, l, a[2], cF(nb, l, 1.0 / std::log(2.0))));
        Value lseN = arith::MulFOp::create(nb, l, a[1], cF(nb, l, std::log(2.0)));
        linalg::YieldOp::create(nb, l, ValueRange{delta, lseN});
      });
  return {gen.getResult(0), gen.getResult(1), op.getQuery()};
}

BackwardKeyValueLayout
mlir::flex::buildBackwardKeyValueLayout(OpBuilder &b, Location loc, Value key,
                                        Value value, const FlashConfig &cfg) {
  FlashConfig c = cfg;
  c.keyRows = c.pairedKey = c.pairedValue = false;
  // K^T per block with V rows padded alongside (unused), then V^T per
  // block with K rows padded: the forward's layout, no peeled tails.
  KeyValueLayout kLay = buildKeyValueLayout(b, loc, key, value, c, false);
  KeyValueLayout vLay = buildKeyValueLayout(b, loc, value, key, c, false);
  // K^T and V^T are written into tensor.empty destinations of one shape
  // when E == Ev, which CSE merges; empty-tensor elimination then let both
  // transposes write one buffer (dV was wrong for MQA). Distinct
  // allocations instead (alloc_tensor is not merged).
  for (Value laid : {kLay.keys, vLay.keys}) {
    auto forall = laid.getDefiningOp<scf::ForallOp>();
    if (!forall)
      continue;
    OpOperand &out = forall.getOutputsMutable()[0];
    auto empty = out.get().getDefiningOp<tensor::EmptyOp>();
    if (!empty)
      continue;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(empty);
    out.set(bufferization::AllocTensorOp::create(
        b, loc, empty.getType(), empty.getDynamicSizes()));
  }
  BackwardKeyValueLayout lay;
  lay.sourceKey = key;
  lay.keysT = kLay.keys;
  lay.valuesT = vLay.keys;
  lay.keyRows = vLay.values;
  lay.kvLen = kLay.kvLen;
  lay.numBlocks = kLay.numBlocks;
  return lay;
}

FailureOr<AttentionBackwardOp>
mlir::flex::tileAttentionBackwardHeads(RewriterBase &rewriter,
                                       AttentionBackwardOp op,
                                       scf::ForallOp *forall) {
  SmallVector<IteratorType> iters = op.getLoopIteratorTypes();
  if (iters[1] != IteratorType::parallel)
    return op.emitOpError("flex-backward-to-flash: the kv head dimension is "
                          "not parallel (capture gradients)");
  scf::SCFTilingOptions options;
  options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
  Builder b(op.getContext());
  int64_t bTile = iters[0] == IteratorType::parallel ? 1 : 0;
  options.setTileSizes({b.getIndexAttr(bTile), b.getIndexAttr(1)});
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
      rewriter, cast<TilingInterface>(op.getOperation()), options);
  if (failed(tiled))
    return op.emitOpError("flex-backward-to-flash: tiling (B, Hkv) failed");
  if (tiled->tiledOps.size() != 1 || tiled->loops.size() != 1)
    return op.emitOpError(
        "flex-backward-to-flash: expected one tiled op in one loop");
  auto tile = dyn_cast<AttentionBackwardOp>(tiled->tiledOps.front());
  if (!tile)
    return op.emitOpError(
        "flex-backward-to-flash: tiling produced no flex.attention_backward");
  if (forall)
    *forall = dyn_cast<scf::ForallOp>(tiled->loops.front().getOperation());
  rewriter.replaceOp(op, tiled->replacements);
  return tile;
}
