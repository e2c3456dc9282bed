//===- FlexToFlash.cpp - flex.attention to a flash-style tiled loop nest --===//
//
// The driver of the tiled lowering (see FlashLowering.h for the stages):
// per flex.attention on tensors, pick the tile sizes, lay out K/V once,
// tile (B, Hq, M) through the TilingInterface into an scf.forall,
// decompose the row tile into the loop over key blocks (or, for decode with
// few (b, h) pairs, split the keys into chunks across threads) and each
// flex.online_attention block into its tile builders. Ops it cannot handle
// are left for flex-to-loops with a remark.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashDriver.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXTOFLASH
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

/// Lowers one op; the forall it became is returned in `forall`.
static LogicalResult lowerToFlash(RewriterBase &rewriter, AttentionOp op,
                                  FlashConfig requested,
                                  scf::ForallOp &forall) {
  FlashConfig cfg = chooseFlashConfig(op, requested);
  StringRef kind = blockClassificationKind(op, cfg);
  rewriter.setInsertionPoint(op);
  // Key chunks take ranges of whole blocks: no peeled tail for them.
  int64_t chunks = cfg.keyChunks;
  KeyValueLayout layout = buildKeyValueLayout(
      rewriter, op.getLoc(), op.getKey(), op.getValue(), cfg, chunks <= 1);
  if (chunks > 1) {
    if (failed(splitKeysAttention(rewriter, op, cfg, layout, chunks, forall)))
      return failure();
    forall->setAttr("flex.key_chunks", rewriter.getI64IntegerAttr(chunks));
  } else {
    FailureOr<AttentionOp> tile =
        tileAttentionRows(rewriter, op, cfg.tileM, &forall, cfg.headsPerTile);
    if (failed(tile) || !forall ||
        failed(decomposeAttentionTile(rewriter, *tile, cfg, &layout)))
      return failure();
  }
  // What was chosen, for torch_mlir_flex's logging (discardable).
  forall->setAttr("flex.tiles",
                  rewriter.getDenseI64ArrayAttr({cfg.tileM, cfg.tileN}));
  forall->setAttr("flex.block_classification", rewriter.getStringAttr(kind));
  SmallVector<OnlineAttentionOp> blocks;
  forall.walk([&](OnlineAttentionOp b) { blocks.push_back(b); });
  for (OnlineAttentionOp b : blocks)
    if (failed(decomposeOnlineAttention(rewriter, b, cfg)))
      return failure();
  return success();
}

namespace {
struct FlexToFlashPass : public flex::impl::FlexToFlashBase<FlexToFlashPass> {
  using FlexToFlashBase::FlexToFlashBase;
  void runOnOperation() override {
    if (tileM < 0 || tileN < 0 || splitKeysTasks < 0 || serialBelowUs < 0) {
      getOperation().emitError("flex-to-flash: tile sizes, split-keys-tasks "
                               "and serial-below-us must be >= 0");
      return signalPassFailure();
    }
    FlashConfig requested = requestedFlashConfig(
        tileM, tileN, blockSparsity, denseClassify, fastExp, vectorize);
    if (failed(setKernelOptions(requested, getOperation(), "flex-to-flash",
                                bf16Dot, amx, vectorBits)))
      return signalPassFailure();
    requested.parallelTasks = splitKeysTasks;
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    FlashDriver driver(getOperation(), "flex-to-flash", serialBelowUs,
                       fastExp);
    for (AttentionOp op : ops) {
      if (!driver.accepts(op, op.hasTensorSemantics(),
                          flashUnsupportedReason(op)))
        continue;
      if (failed(driver.lower(estimateOneThreadMicros(op),
                              [&](scf::ForallOp &forall) {
                                return lowerToFlash(rewriter, op, requested,
                                                    forall);
                              })))
        return signalPassFailure();
    }
    if (failed(driver.finish()))
      signalPassFailure();
  }
};
} // namespace
