//===- FlexToLoops.cpp - flex.attention to scalar loops -------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXTOLOOPS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

namespace {
struct FlexToLoopsPass : public flex::impl::FlexToLoopsBase<FlexToLoopsPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (AttentionOp op : ops) {
      if (!op.hasBufferSemantics()) {
        op.emitOpError("flex-to-loops expects memref operands; run "
                       "one-shot-bufferize first");
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(op);
      Location loc = op.getLoc();
      SmallVector<Range> domain = op.getIterationDomain(rewriter);
      SmallVector<Value> ivs;
      for (int d = 0; d < 3; ++d) {
        Value lb = getValueOrCreateConstantIndexOp(rewriter, loc,
                                                   domain[d].offset);
        Value ub =
            getValueOrCreateConstantIndexOp(rewriter, loc, domain[d].size);
        Value step =
            getValueOrCreateConstantIndexOp(rewriter, loc, domain[d].stride);
        auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
        ivs.push_back(loop.getInductionVar());
        rewriter.setInsertionPoint(loop.getBody()->getTerminator());
      }
      if (failed(op.generateScalarImplementation(rewriter, loc, ivs)))
        return signalPassFailure();
      rewriter.eraseOp(op);
    }
  }
};
} // namespace
