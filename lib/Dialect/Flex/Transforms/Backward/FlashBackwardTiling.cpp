//===- FlashBackwardTiling.cpp - what is shared by the backward's tiles ---===//
//
// What flex-backward-to-flash accepts, its tile sizes, the per-row pre-pass
// (delta and the natural-log lse), K/V laid out per key block, and the
// (B, Hkv) tiling through flex.attention_backward's TilingInterface (with
// capture gradients: the forall with per-tile partial buffers, reduced
// after it).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/TilingInterface.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

std::optional<std::string>
mlir::flex::flashBackwardUnsupportedReason(AttentionBackwardOp op) {
  if (std::optional<std::string> why = flashOperandsUnsupportedReason(
          op.hasTensorSemantics(), op.getQueryType(), op.getKeyType(),
          op.getValueType(), op.getKvGroupSize().has_value()))
    return why;
  // Capture gradients: per-tile partial buffers, bounded.
  std::string why;
  if (!op.getCaptureGrads().empty() && failed(planCapturePartials(op, &why)))
    return why;
  return std::nullopt;
}

FailureOr<CapturePartialPlan>
mlir::flex::planCapturePartials(AttentionBackwardOp op, std::string *why) {
  auto fail = [&](const Twine &msg) -> FailureOr<CapturePartialPlan> {
    if (why)
      *why = msg.str();
    return failure();
  };
  CapturePartialPlan plan;
  int64_t perTile = 0;
  for (Value g : op.getCaptureGrads()) {
    auto t = cast<ShapedType>(g.getType());
    if (!t.hasStaticShape())
      return fail("capture gradients of dynamic shape");
    plan.elements.push_back(t.getNumElements());
    perTile += (t.getNumElements() + 1) * 4;
  }
  int64_t bq = op.getQueryType().getDimSize(0);
  int64_t bkv = op.getKeyType().getDimSize(0);
  int64_t hkv = op.getKeyType().getDimSize(1);
  if (ShapedType::isDynamic(hkv))
    return fail("capture gradients with a dynamic kv head count");
  // Tiles over (B, Hkv) when the batch is owned and the partials fit, else
  // over Hkv.
  if (!ShapedType::isDynamic(bq) && bq == bkv && bq > 1 &&
      bq * hkv * perTile <= kCapturePartialLimitBytes) {
    plan.tileBatch = true;
    plan.numTiles = bq * hkv;
    return plan;
  }
  plan.numTiles = std::max<int64_t>(hkv, 1);
  if (plan.numTiles * perTile > kCapturePartialLimitBytes)
    return fail("capture gradients: per-tile partial buffers of " +
                Twine(plan.numTiles * perTile) + " bytes exceed " +
                Twine(kCapturePartialLimitBytes) + " bytes");
  return plan;
}

FlashConfig mlir::flex::chooseFlashBackwardConfig(AttentionBackwardOp op,
                                                  FlashConfig requested) {
  FlashConfig cfg = requested;
  chooseTileSizes(cfg, op.getQueryType().getDimSize(2),
                  op.getKeyType().getDimSize(2), op.getBlockSizes());
  cfg.headsPerTile = 1;
  cfg.keyRows = false;
  cfg.keyChunks = 1;
  cfg.amx = requested.amx && cfg.vectorize &&
            backwardCanUseAmx(op, cfg.tileM, cfg.tileN);
  cfg.pairedKey = cfg.pairedValue =
      cfg.amx || (requested.bf16Dot && cfg.vectorize &&
                  backwardCanUseBf16Dot(op, cfg.tileM, cfg.tileN));
  return cfg;
}

bool mlir::flex::backwardCanUseAmx(AttentionBackwardOp op, int64_t tileM,
                                   int64_t tileN) {
  if (!backwardCanUseBf16Dot(op, tileM, tileN))
    return false;
  int64_t e = op.getQueryType().getDimSize(3),
          ev = op.getValueType().getDimSize(3);
  return e % 32 == 0 && ev % 32 == 0 && tileM % 32 == 0 && tileN % 32 == 0;
}

bool mlir::flex::backwardCanUseBf16Dot(AttentionBackwardOp op, int64_t tileM,
                                       int64_t tileN) {
  for (Value v : {op.getQuery(), op.getKey(), op.getValue(), op.getGradOut()})
    if (!cast<ShapedType>(v.getType()).getElementType().isBF16())
      return false;
  int64_t e = op.getQueryType().getDimSize(3),
          ev = op.getValueType().getDimSize(3);
  if (ShapedType::isDynamic(e) || ShapedType::isDynamic(ev))
    return false;
  // S and dP (reductions E, Ev over rows of Nt), dV and dK (Mt over Ev,
  // E), dQ (Nt over E).
  return canUseBf16Dot(e, tileN) && canUseBf16Dot(ev, tileN) &&
         canUseBf16Dot(tileM, ev) && canUseBf16Dot(tileM, e) &&
         canUseBf16Dot(tileN, e);
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
  bool paired = cfg.pairedKey && cfg.pairedValue;
  c.keyRows = false;
  c.pairedKey = paired;
  c.pairedValue = false;
  // K^T per block with V rows padded alongside (unused), then V^T per
  // block with K rows padded: the forward's layout, no peeled tails.
  // Paired: K^T, V^T in pairs of E, K rows in pairs of keys.
  KeyValueLayout kLay = buildKeyValueLayout(b, loc, key, value, c, false);
  c.pairedValue = paired;
  KeyValueLayout vLay = buildKeyValueLayout(b, loc, value, key, c, false);
  // K^T and V^T are written into tensor.empty destinations of one shape
  // when E == Ev, which CSE merges; empty-tensor elimination then let both
  // transposes write one buffer (dV was wrong for MQA). Distinct
  // allocations instead (alloc_tensor is not merged); the paired K rows
  // too (their shape is K^T's pairs' when E == Nt).
  for (Value laid : {kLay.keys, vLay.keys, vLay.values}) {
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
  lay.paired = paired;
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
  Builder b(op.getContext());
  int64_t bTile = iters[0] == IteratorType::parallel ? 1 : 0;
  FailureOr<Operation *> tile = tileIntoForall(
      rewriter, op, {b.getIndexAttr(bTile), b.getIndexAttr(1)},
      "flex-backward-to-flash", "(B, Hkv)", forall);
  if (failed(tile))
    return failure();
  return cast<AttentionBackwardOp>(*tile);
}

LogicalResult mlir::flex::lowerBackwardWithCapturePartials(
    RewriterBase &rewriter, AttentionBackwardOp op, const FlashConfig &cfg,
    const BackwardRowStats &stats, const BackwardKeyValueLayout &layout,
    scf::ForallOp &forall) {
  std::string why;
  FailureOr<CapturePartialPlan> plan = planCapturePartials(op, &why);
  if (failed(plan))
    return op.emitOpError("flex-backward-to-flash: ") << why;
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  OpBuilder &b = rewriter;
  size_t numCaptures = op.getCaptureGrads().size();

  // One zero-filled row of partials per tile and capture gradient: fresh
  // allocations (alloc_tensor is not merged by CSE, so no two partials, nor
  // a partial and another init, share a buffer).
  Value f0 = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  SmallVector<Value> outs = {op.getGradQuery(), op.getGradKey(),
                             op.getGradValue()};
  for (int64_t c : plan->elements) {
    auto ty = RankedTensorType::get({plan->numTiles, c + 1}, b.getF32Type());
    Value buf = bufferization::AllocTensorOp::create(b, loc, ty, ValueRange{});
    outs.push_back(
        linalg::FillOp::create(b, loc, ValueRange{f0}, ValueRange{buf})
            .getResult(0));
  }
  int64_t hkv = op.getKeyType().getDimSize(1);
  SmallVector<OpFoldResult> ubs;
  if (plan->tileBatch)
    ubs.push_back(b.getIndexAttr(op.getQueryType().getDimSize(0)));
  ubs.push_back(b.getIndexAttr(hkv));
  forall = scf::ForallOp::create(b, loc, ubs, outs, std::nullopt);

  // The tile: the op on the shared outs, tiled through its interface.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(forall.getTerminator());
    ValueRange ivs = forall.getInductionVars();
    ArrayRef<BlockArgument> args = forall.getRegionIterArgs();
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    Value ib = plan->tileBatch ? ivs[0] : Value();
    Value ih = ivs.back();
    SmallVector<OpFoldResult> offsets = {ib ? OpFoldResult(ib) : zero, ih};
    int64_t bq = op.getQueryType().getDimSize(0);
    OpFoldResult wholeB =
        ShapedType::isDynamic(bq)
            ? OpFoldResult(
                  tensor::DimOp::create(b, loc, op.getQuery(), 0).getResult())
            : OpFoldResult(b.getIndexAttr(bq));
    SmallVector<OpFoldResult> sizes = {ib ? one : wholeB, one};
    // The tile's row t = ib * Hkv + ih of each partial buffer.
    Value t = ih;
    if (ib)
      t = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, ib,
                                arith::ConstantIndexOp::create(b, loc, hkv)),
          ih);
    SmallVector<Value> rows;
    SmallVector<SmallVector<OpFoldResult>> rowOffs, rowSizes;
    for (auto [c, arg] :
         llvm::zip(plan->elements, args.drop_front(3))) {
      rowOffs.push_back({t, zero});
      rowSizes.push_back({one, b.getIndexAttr(c + 1)});
      rows.push_back(tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({c + 1}, b.getF32Type()), arg,
          rowOffs.back(), rowSizes.back(),
          ArrayRef<OpFoldResult>{one, one}));
    }
    auto clone = cast<AttentionBackwardOp>(b.clone(*op));
    for (int i = 0; i < 3; ++i)
      clone.getDpsInitsMutable()[i].set(args[i]);
    FailureOr<TilingResult> tiled =
        clone.getTiledImplementation(b, offsets, sizes);
    SmallVector<SmallVector<OpFoldResult>> resOffs(3), resSizes(3);
    bool positioned = succeeded(tiled);
    for (unsigned r = 0; positioned && r < 3; ++r)
      positioned = succeeded(clone.getResultTilePosition(
          b, r, offsets, sizes, resOffs[r], resSizes[r]));
    rewriter.eraseOp(clone);
    if (!positioned || tiled->tiledOps.size() != 1)
      return op.emitOpError("flex-backward-to-flash: tiling (B, Hkv) failed");
    auto tile = dyn_cast<AttentionBackwardOp>(tiled->tiledOps.front());
    if (!tile)
      return op.emitOpError(
          "flex-backward-to-flash: tiling produced no flex.attention_backward");

    // In-parallel inserts of dQ, dK, dV (the tile's results: the
    // decomposition replaces them) and of the partial rows.
    auto insert = [&](Value src, Value dest, ArrayRef<OpFoldResult> offs,
                      ArrayRef<OpFoldResult> szs) {
      OpBuilder::InsertionGuard ig(b);
      b.setInsertionPointToEnd(forall.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(
          b, loc, src, dest, offs, szs,
          SmallVector<OpFoldResult>(offs.size(), one));
    };
    for (unsigned r = 0; r < 3; ++r)
      insert(tile->getResult(r), args[r], resOffs[r], resSizes[r]);
    SmallVector<Value> newRows;
    if (failed(decomposeAttentionBackwardTile(rewriter, tile, cfg, &stats,
                                              &layout, rows, &newRows)))
      return failure();
    for (size_t c = 0; c < numCaptures; ++c)
      insert(newRows[c], args[3 + c], rowOffs[c], rowSizes[c]);
  }

  // After the forall: each capture gradient = init + the sum of its rows.
  rewriter.setInsertionPointAfter(forall);
  SmallVector<Value> replacements(forall.getResults().take_front(3));
  for (size_t c = 0; c < numCaptures; ++c)
    replacements.push_back(reduceCapturePartials(
        b, loc, op.getCaptureGrads()[c], forall.getResult(3 + c)));
  rewriter.replaceOp(op, replacements);
  return success();
}
