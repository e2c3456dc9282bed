//===- FlashStagePasses.cpp - the stages of flex-to-flash as passes -------===//
//
// flex-decompose-attention-tile and flex-decompose-online-attention run one
// stage of the tiled lowering each, so that every stage has its own lit
// test (tiling itself is upstream's transform.structured.tile_using_forall
// on flex.attention).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXDECOMPOSEATTENTIONTILE
#define GEN_PASS_DEF_FLEXDECOMPOSEONLINEATTENTION
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

namespace {
struct DecomposeAttentionTilePass
    : public flex::impl::FlexDecomposeAttentionTileBase<
          DecomposeAttentionTilePass> {
  using FlexDecomposeAttentionTileBase::FlexDecomposeAttentionTileBase;
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (AttentionOp op : ops) {
      FlashConfig requested;
      requested.tileM = tileM;
      requested.tileN = tileN;
      requested.blockSparsity = blockSparsity;
      requested.denseClassify = denseClassify;
      // A static M is the tile's row count; a dynamic one (partial tiles)
      // needs its upper bound.
      int64_t m = op.getQueryType().getDimSize(2);
      if (!ShapedType::isDynamic(m))
        requested.tileM = m;
      else if (tileM <= 0) {
        op.emitOpError("flex-decompose-attention-tile: the row tile has a "
                       "dynamic M; set tile-m to its upper bound");
        return signalPassFailure();
      }
      FlashConfig cfg = chooseFlashConfig(op, requested);
      if (failed(decomposeAttentionTile(rewriter, op, cfg, nullptr)))
        return signalPassFailure();
    }
  }
};

struct DecomposeOnlineAttentionPass
    : public flex::impl::FlexDecomposeOnlineAttentionBase<
          DecomposeOnlineAttentionPass> {
  using FlexDecomposeOnlineAttentionBase::FlexDecomposeOnlineAttentionBase;
  void runOnOperation() override {
    FlashConfig cfg;
    cfg.fastExp = fastExp;
    cfg.vectorize = vectorize;
    SmallVector<OnlineAttentionOp> ops;
    getOperation().walk([&](OnlineAttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (OnlineAttentionOp op : ops)
      if (failed(decomposeOnlineAttention(rewriter, op, cfg)))
        return signalPassFailure();
  }
};
} // namespace
