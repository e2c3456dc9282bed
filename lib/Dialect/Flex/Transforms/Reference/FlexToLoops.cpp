//===- FlexToLoops.cpp - flex ops to scalar loops -------------------------===//
//
// flex.attention: loops over (B, Hq, M); flex.attention_backward: loops
// over (B, Hkv). The bodies are the ops' generateScalarImplementation.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXTOLOOPS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

/// Replaces `op` by scf.for loops over the first `numLoops` dimensions of
/// its iteration domain around its scalar implementation.
static LogicalResult lowerToLoops(IRRewriter &rewriter, TilingInterface op,
                                  unsigned numLoops) {
  rewriter.setInsertionPoint(op);
  Location loc = op.getLoc();
  SmallVector<Range> domain = op.getIterationDomain(rewriter);
  SmallVector<Value> ivs;
  for (unsigned d = 0; d < numLoops; ++d) {
    Value lb =
        getValueOrCreateConstantIndexOp(rewriter, loc, domain[d].offset);
    Value ub = getValueOrCreateConstantIndexOp(rewriter, loc, domain[d].size);
    Value step =
        getValueOrCreateConstantIndexOp(rewriter, loc, domain[d].stride);
    auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
    ivs.push_back(loop.getInductionVar());
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  }
  if (failed(op.generateScalarImplementation(rewriter, loc, ivs)))
    return failure();
  rewriter.eraseOp(op);
  return success();
}

namespace {
struct FlexToLoopsPass : public flex::impl::FlexToLoopsBase<FlexToLoopsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionBackwardOp>(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      bool buffers = isa<AttentionOp>(op)
                         ? cast<AttentionOp>(op).hasBufferSemantics()
                         : cast<AttentionBackwardOp>(op).hasBufferSemantics();
      if (!buffers) {
        op->emitOpError("flex-to-loops expects memref operands; run "
                        "one-shot-bufferize first");
        return signalPassFailure();
      }
      unsigned numLoops = isa<AttentionOp>(op) ? 3 : 2;
      if (failed(lowerToLoops(rewriter, cast<TilingInterface>(op), numLoops)))
        return signalPassFailure();
    }
  }
};
} // namespace
