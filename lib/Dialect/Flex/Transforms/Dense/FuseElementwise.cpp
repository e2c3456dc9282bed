//===- FuseElementwise.cpp - elementwise chains fused into consumers ------===//
//
// flex-fuse-elementwise (Passes.td): MLIR's elementwise fusion of
// linalg.generic ops on tensors, limited to ops in the function body,
// producers used once and read element for element, and consumers that are
// not contractions (those stay for the BLAS).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXFUSEELEMENTWISE
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

bool inFunctionBody(Operation *op) { return isa<func::FuncOp>(op->getParentOp()); }

/// Whether the generic producing `operand` may be fused into its owner.
bool shouldFuse(OpOperand *operand) {
  auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
  auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
  if (!producer || !consumer || !inFunctionBody(producer) ||
      !inFunctionBody(consumer) || !producer->hasOneUse())
    return false;
  if (producer.getNumParallelLoops() != producer.getNumLoops())
    return false;
  if (consumer.getNumReductionLoops() > 0 && consumer.getNumDpsInputs() > 1)
    return false;  // a contraction (or a reduction of several inputs)
  return consumer.getMatchingIndexingMap(operand).isPermutation();
}

struct FuseElementwise
    : public flex::impl::FlexFuseElementwiseBase<FuseElementwise> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
