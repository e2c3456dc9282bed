//===- FlexBackwardToFlash.cpp - flex.attention_backward, flash-style -----===//
//
// The driver of the tiled backward (see FlashBackwardLowering.h for the
// stages): per flex.attention_backward on tensors, pick the tile sizes, run
// the row pre-pass and lay out K/V once, tile (B, Hkv) through the
// TilingInterface into an scf.forall and decompose each tile into the loop
// over key and query blocks (with capture gradients: per-tile partial
// buffers reduced after the forall). Ops it cannot handle are left for
// flex-to-loops with a remark. Also the tile stage as its own pass.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashDriver.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXBACKWARDTOFLASH
#define GEN_PASS_DEF_FLEXDECOMPOSEATTENTIONBACKWARDTILE
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

/// Lowers one op; the forall it became is returned in `forall`.
static LogicalResult lowerBackwardToFlash(RewriterBase &rewriter,
                                          AttentionBackwardOp op,
                                          FlashConfig requested,
                                          scf::ForallOp &forall) {
  FlashConfig cfg = chooseFlashBackwardConfig(op, requested);
  StringRef kind = blockClassificationKind(op.getMaskMod(), cfg);
  rewriter.setInsertionPoint(op);
  Location loc = op.getLoc();
  BackwardRowStats stats = buildBackwardRowStats(rewriter, loc, op);
  BackwardKeyValueLayout layout = buildBackwardKeyValueLayout(
      rewriter, loc, op.getKey(), op.getValue(), cfg);
  if (!op.getCaptureGrads().empty()) {
    // Capture gradients: per-tile partial buffers reduced after the forall.
    if (failed(lowerBackwardWithCapturePartials(rewriter, op, cfg, stats,
                                                layout, forall)))
      return failure();
  } else {
    FailureOr<AttentionBackwardOp> tile =
        tileAttentionBackwardHeads(rewriter, op, &forall);
    if (failed(tile) || !forall ||
        failed(decomposeAttentionBackwardTile(rewriter, *tile, cfg, &stats,
                                              &layout)))
      return failure();
  }
  forall->setAttr("flex.tiles",
                  rewriter.getDenseI64ArrayAttr({cfg.tileM, cfg.tileN}));
  forall->setAttr("flex.block_classification", rewriter.getStringAttr(kind));
  return success();
}

namespace {
struct FlexBackwardToFlashPass
    : public flex::impl::FlexBackwardToFlashBase<FlexBackwardToFlashPass> {
  using FlexBackwardToFlashBase::FlexBackwardToFlashBase;
  void runOnOperation() override {
    if (tileM < 0 || tileN < 0 || serialBelowUs < 0) {
      getOperation().emitError("flex-backward-to-flash: tile sizes and "
                               "serial-below-us must be >= 0");
      return signalPassFailure();
    }
    FlashConfig requested = requestedFlashConfig(
        tileM, tileN, blockSparsity, denseClassify, fastExp, vectorize);
    if (failed(setKernelOptions(requested, getOperation(),
                                "flex-backward-to-flash", bf16Dot, amx,
                                vectorBits)))
      return signalPassFailure();
    SmallVector<AttentionBackwardOp> ops;
    getOperation().walk([&](AttentionBackwardOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    FlashDriver driver(getOperation(), "flex-backward-to-flash",
                       serialBelowUs, fastExp);
    for (AttentionBackwardOp op : ops) {
      if (!driver.accepts(op, op.hasTensorSemantics(),
                          flashBackwardUnsupportedReason(op)))
        continue;
      if (failed(driver.lower(estimateBackwardMicros(op),
                              [&](scf::ForallOp &forall) {
                                return lowerBackwardToFlash(rewriter, op,
                                                            requested, forall);
                              })))
        return signalPassFailure();
    }
    if (failed(driver.finish()))
      signalPassFailure();
  }
};

struct DecomposeAttentionBackwardTilePass
    : public flex::impl::FlexDecomposeAttentionBackwardTileBase<
          DecomposeAttentionBackwardTilePass> {
  using FlexDecomposeAttentionBackwardTileBase::
      FlexDecomposeAttentionBackwardTileBase;
  void runOnOperation() override {
    if (tileM < 0 || tileN < 0) {
      getOperation().emitError("flex-decompose-attention-backward-tile: tile "
                               "sizes must be >= 0");
      return signalPassFailure();
    }
    SmallVector<AttentionBackwardOp> ops;
    getOperation().walk([&](AttentionBackwardOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (AttentionBackwardOp op : ops) {
      FlashConfig requested;
      requested.tileM = tileM;
      requested.tileN = tileN;
      requested.vectorize = vectorize;
      requested.bf16Dot = bf16Dot;
      requested.amx = amx;
      FlashConfig cfg = chooseFlashBackwardConfig(op, requested);
      if (failed(decomposeAttentionBackwardTile(rewriter, op, cfg, nullptr,
                                                nullptr)))
        return signalPassFailure();
    }
  }
};
} // namespace
