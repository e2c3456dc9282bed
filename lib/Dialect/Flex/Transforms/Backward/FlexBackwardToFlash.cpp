//===- FlexBackwardToFlash.cpp - flex.attention_backward, flash-style -----===//
//
// The driver of the tiled backward (see FlashBackwardLowering.h for the
// stages): per flex.attention_backward on tensors, pick the tile sizes, run
// the row pre-pass and lay out K/V once, tile (B, Hkv) through the
// TilingInterface into an scf.forall and decompose each tile into the loop
// over key and query blocks. Ops it cannot handle are left for
// flex-to-loops with a remark. Also the tile stage as its own pass.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

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
  FailureOr<AttentionBackwardOp> tile =
      tileAttentionBackwardHeads(rewriter, op, &forall);
  if (failed(tile) || !forall ||
      failed(decomposeAttentionBackwardTile(rewriter, *tile, cfg, &stats,
                                            &layout)))
    return failure();
  forall->setAttr("flex.tiles",
                  rewriter.getDenseI64ArrayAttr({cfg.tileM, cfg.tileN}));
  forall->setAttr("flex.block_classification", rewriter.getStringAttr(kind));
  return success();
}

/// tanh (soft-capping score_mods and their joint) as a rational
/// approximation in plain arithmetic, which LLVM vectorizes.
static LogicalResult approximateTanh(MLIRContext *ctx,
                                     ArrayRef<Operation *> ops) {
  if (ops.empty())
    return success();
  RewritePatternSet patterns(ctx);
  populatePolynomialApproximateTanhPattern(patterns);
  return applyOpPatternsGreedily(ops, std::move(patterns));
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
    FlashConfig requested;
    requested.tileM = tileM;
    requested.tileN = tileN;
    requested.blockSparsity = blockSparsity;
    requested.denseClassify = denseClassify;
    requested.fastExp = fastExp;
    requested.vectorize = vectorize;
    SmallVector<AttentionBackwardOp> ops;
    getOperation().walk([&](AttentionBackwardOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> tanhOps;
    for (AttentionBackwardOp op : ops) {
      if (std::optional<std::string> why =
              flashBackwardUnsupportedReason(op)) {
        if (op.hasTensorSemantics())
          op.emitRemark("flex-backward-to-flash: ")
              << *why << "; left for flex-to-loops";
        continue;
      }
      std::optional<double> micros = estimateBackwardMicros(op);
      bool serial = serialBelowUs > 0 && micros && *micros < serialBelowUs;
      DenseSet<Operation *> before;
      if (serial)
        getOperation().walk([&](scf::ForallOp f) { before.insert(f); });
      scf::ForallOp forall;
      if (failed(lowerBackwardToFlash(rewriter, op, requested, forall)))
        return signalPassFailure();
      if (serial)
        getOperation().walk([&](scf::ForallOp f) {
          if (!before.contains(f))
            f->setAttr("flex.serial", rewriter.getUnitAttr());
        });
      if (fastExp)
        forall.walk([&](math::TanhOp t) { tanhOps.push_back(t); });
    }
    if (failed(approximateTanh(&getContext(), tanhOps)))
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
      FlashConfig cfg = chooseFlashBackwardConfig(op, requested);
      if (failed(decomposeAttentionBackwardTile(rewriter, op, cfg, nullptr,
                                                nullptr)))
        return signalPassFailure();
    }
  }
};
} // namespace
