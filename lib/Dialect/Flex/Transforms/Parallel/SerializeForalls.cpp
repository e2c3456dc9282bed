//===- SerializeForalls.cpp - which foralls run on the threads, and how ---===//
//
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
#define GEN_PASS_DEF_FLEXSERIALIZEFORALLS
#define GEN_PASS_DEF_FLEXOMPDYNAMICSCHEDULE
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {
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
