//===- UnshareInits.cpp - one tensor.empty / zero fill per destination ----===//
//
// flex-unshare-inits (Passes.td): an init value CSE merged across a whole
// model (a tensor.empty, or a linalg.fill of one) is cloned right before
// each destination-style op that takes it as an `outs` operand, so
// bufferization allocates each buffer where it is needed instead of once
// at the top of the function, kept alive until the last layer.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXUNSHAREINITS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// The `outs` operands that read `v` in its own block (a clone inside a
/// loop would allocate per iteration), when `v` has more than one use.
SmallVector<OpOperand *> sharedInitUses(Value v) {
  SmallVector<OpOperand *> uses;
  if (v.hasOneUse())
    return uses;
  for (OpOperand &use : v.getUses()) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
    if (dps && dps.isDpsInit(&use) &&
        use.getOwner()->getBlock() == v.getParentBlock())
      uses.push_back(&use);
  }
  return uses;
}

/// Clones `op` (and, for a fill, the tensor.empty it fills) right before
/// each destination-style user of its result; erases it once unused.
void unshare(Operation *op) {
  for (OpOperand *use : sharedInitUses(op->getResult(0))) {
    OpBuilder b(use->getOwner());
    IRMapping map;
    if (auto fill = dyn_cast<linalg::FillOp>(op)) {
      Operation *empty = fill.getDpsInits()[0].getDefiningOp();
      map.map(empty->getResult(0), b.clone(*empty)->getResult(0));
    }
    use->set(b.clone(*op, map)->getResult(0));
  }
  if (op->use_empty())
    op->erase();
}

bool isFillOfEmpty(linalg::FillOp fill) {
  return fill.hasPureTensorSemantics() &&
         fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
}

struct UnshareInits : public flex::impl::FlexUnshareInitsBase<UnshareInits> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp f) {
      if (isFillOfEmpty(f))
        fills.push_back(f);
    });
    for (linalg::FillOp f : fills) {
      Operation *empty = f.getDpsInits()[0].getDefiningOp();
      unshare(f);
      if (empty->use_empty())
        empty->erase();
    }
    SmallVector<tensor::EmptyOp> empties;
    getOperation().walk([&](tensor::EmptyOp e) { empties.push_back(e); });
    for (tensor::EmptyOp e : empties)
      unshare(e);
  }
};

} // namespace
