//===- ReassociateSums.cpp - float sum reductions LLVM may vectorize ------===//
//
// flex-reassociate-sums (Passes.td): the `arith.addf` that accumulates a
// linalg.generic reduction into its init (a norm's mean of squares, a
// softmax's or log_softmax's sum of exponentials, a cross-entropy
// backward's row sum) gets the `reassoc` fast-math flag. Lowered to loops,
// such a sum is one chain of dependent additions in source order, which
// LLVM must keep (strict IEEE order): one addition per 3-4 cycles, and an
// exponential or a square computed in the same loop stays scalar too. With
// `reassoc` LLVM's loop vectorizer keeps several vector partial sums and
// adds them at the end, as eager PyTorch's reductions do.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXREASSOCIATESUMS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// The additions of `g` (a generic with a reduction loop) that accumulate
/// into one of its inits: yielded for that init, and one operand is the
/// init's block argument, read by nothing else.
SmallVector<arith::AddFOp> accumulations(linalg::GenericOp g) {
  SmallVector<arith::AddFOp> adds;
  if (g.getNumReductionLoops() == 0)
    return adds;
  Block &body = g.getRegion().front();
  Operation *yield = body.getTerminator();
  for (OpOperand &init : g.getDpsInitsMutable()) {
    BlockArgument acc = g.getMatchingBlockArgument(&init);
    unsigned idx = init.getOperandNumber() - g.getNumDpsInputs();
    auto add = yield->getOperand(idx).getDefiningOp<arith::AddFOp>();
    if (!add || add->getBlock() != &body || !acc.hasOneUse() ||
        (add.getLhs() != acc && add.getRhs() != acc))
      continue;
    adds.push_back(add);
  }
  return adds;
}

struct FlexReassociateSumsPass
    : public flex::impl::FlexReassociateSumsBase<FlexReassociateSumsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Only ops directly in the function body: flex-to-flash's tile ops
    // (inside its loops) keep the order of their own kernels.
    for (Operation &op : func.getBody().getOps()) {
      auto g = dyn_cast<linalg::GenericOp>(&op);
      if (!g)
        continue;
      for (arith::AddFOp add : accumulations(g))
        add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
    }
  }
};

} // namespace
