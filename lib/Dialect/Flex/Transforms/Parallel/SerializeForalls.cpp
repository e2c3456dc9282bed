//===- FlexToFlashCleanup.cpp - small post-bufferization helpers ----------===//
//
// flex-copies-to-linalg: memref.copy -> linalg.copy.
// flex-inline-alloca-scopes: inline alloca-free memref.alloca_scope ops.
// flex-serialize-foralls: bufferized scf.forall marked flex.serial -> scf.for
//   (or, with runtime-choice, tagged for flex-omp-if-awake).
// flex-omp-dynamic-schedule: schedule(dynamic) for omp.wsloop.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXCOPIESTOLINALG
#define GEN_PASS_DEF_FLEXINLINEALLOCASCOPES
#define GEN_PASS_DEF_FLEXSERIALIZEFORALLS
#define GEN_PASS_DEF_FLEXOMPDYNAMICSCHEDULE
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
      if (!srcTy || !dstTy || srcTy.getElementType() != dstTy.getElementType() ||
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
    getOperation().walk(
        [&](memref::AllocaScopeOp s) { scopes.push_back(s); });
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

struct FlexSerializeForallsPass
    : public flex::impl::FlexSerializeForallsBase<FlexSerializeForallsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<scf::ForallOp> marked;
    getOperation().walk([&](scf::ForallOp f) {
      if (f->hasAttr("flex.serial") && f.getOutputs().empty())
        marked.push_back(f);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ForallOp f : marked) {
      if (runtimeChoice) {
        f->setLoc(NameLoc::get(
            StringAttr::get(&getContext(), flex::kSmallParallelLoc),
            f.getLoc()));
        continue;
      }
      if (failed(scf::forallToForLoop(rewriter, f)))
        return signalPassFailure();
    }
  }
};

struct FlexOmpDynamicSchedulePass
    : public flex::impl::FlexOmpDynamicScheduleBase<
          FlexOmpDynamicSchedulePass> {
  void runOnOperation() override {
    getOperation().walk([&](omp::WsloopOp loop) {
      if (!loop.getScheduleKindAttr())
        loop.setScheduleKindAttr(omp::ClauseScheduleKindAttr::get(
            &getContext(), omp::ClauseScheduleKind::Dynamic));
    });
  }
};
} // namespace
