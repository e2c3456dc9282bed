//===- DecomposeConcat.cpp - tensor.concat as inserts into one tensor -----===//
//
// flex-decompose-concat (Passes.td): each tensor.concat becomes a
// tensor.empty of the result's shape and one tensor.insert_slice per
// operand, so that eliminate-empty-tensors can give the concatenation the
// buffer its result is written to (a caller's out-param) and the ops
// producing its operands their slices of it.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXDECOMPOSECONCAT
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

struct DecomposeConcat
    : public flex::impl::FlexDecomposeConcatBase<DecomposeConcat> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    tensor::populateDecomposeTensorConcatPatterns(patterns);
    // Only the concat patterns: no folding of the ops around them.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled)
        .enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
