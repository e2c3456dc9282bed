//===- BufferCleanup.cpp - small post-bufferization clean-ups -------------===//
//
// flex-copies-to-linalg: memref.copy -> linalg.copy (a memref.copy of a
//   strided view would call the runtime library's memrefCopy, which the JIT
//   does not have).
// flex-inline-alloca-scopes: memref.alloca_scope ops without an alloca
//   inlined into their parent (left by convert-scf-to-openmp).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXCOPIESTOLINALG
#define GEN_PASS_DEF_FLEXINLINEALLOCASCOPES
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {
struct FlexCopiesToLinalgPass
    : public flex::impl::FlexCopiesToLinalgBase<FlexCopiesToLinalgPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp c) { copies.push_back(c); });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp c : copies) {
      auto srcTy = dyn_cast<MemRefType>(c.getSource().getType());
      auto dstTy = dyn_cast<MemRefType>(c.getTarget().getType());
      // Only ranked memrefs of equal element type (linalg.copy's contract).
      if (!srcTy || !dstTy ||
          srcTy.getElementType() != dstTy.getElementType() ||
          srcTy.getRank() != dstTy.getRank())
        continue;
      rewriter.setInsertionPoint(c);
      if (c.getSource() == c.getTarget()) {
        rewriter.eraseOp(c);
        continue;
      }
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(c, c.getSource(),
                                                  c.getTarget());
    }
  }
};

struct FlexInlineAllocaScopesPass
    : public flex::impl::FlexInlineAllocaScopesBase<
          FlexInlineAllocaScopesPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation().walk([&](memref::AllocaScopeOp s) { scopes.push_back(s); });
    IRRewriter rewriter(&getContext());
    for (memref::AllocaScopeOp scope : scopes) {
      bool hasAlloca = false;
      scope.getBodyRegion().walk([&](memref::AllocaOp) { hasAlloca = true; });
      if (hasAlloca || !scope.getBodyRegion().hasOneBlock())
        continue;
      Block &body = scope.getBodyRegion().front();
      auto ret = cast<memref::AllocaScopeReturnOp>(body.getTerminator());
      SmallVector<Value> results(ret.getResults());
      rewriter.inlineBlockBefore(&body, scope);
      rewriter.replaceOp(scope, results);
      rewriter.eraseOp(ret);
    }
  }
};
} // namespace
