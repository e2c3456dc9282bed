//===- OmpIfAwake.cpp - small parallel regions only with awake workers ----===//
//
// flex-omp-if-awake: omp.parallel ops located at the name
// flex.small_parallel get `if(flag != 0)`, the flag being the module's i8
// global _mlir_flex_threads_awake, which the caller sets before each call
// (Passes.td has the reasoning and an example).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXOMPIFAWAKE
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

static constexpr llvm::StringLiteral kAwakeFlag = "_mlir_flex_threads_awake";

static bool isSmallParallel(omp::ParallelOp op) {
  auto name = dyn_cast<NameLoc>(op.getLoc());
  return name && name.getName() == flex::kSmallParallelLoc;
}

/// The module's flag global, created (public: no visibility attribute; 0) on first use.
static memref::GlobalOp awakeFlag(ModuleOp module) {
  if (auto g = module.lookupSymbol<memref::GlobalOp>(kAwakeFlag))
    return g;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto type = MemRefType::get({}, b.getI8Type());
  return memref::GlobalOp::create(
      b, module.getLoc(), kAwakeFlag, /*sym_visibility=*/StringAttr(), type,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getI8Type()),
                             b.getI8IntegerAttr(0)),
      /*constant=*/false, /*alignment=*/nullptr);
}

namespace {
struct FlexOmpIfAwakePass
    : public flex::impl::FlexOmpIfAwakeBase<FlexOmpIfAwakePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<omp::ParallelOp> small;
    module.walk([&](omp::ParallelOp p) {
      if (isSmallParallel(p) && !p.getIfExpr())
        small.push_back(p);
    });
    if (small.empty())
      return;
    if (auto other = module.lookupSymbol(kAwakeFlag);
        other && !isa<memref::GlobalOp>(other)) {
      other->emitError() << "symbol '" << kAwakeFlag
                         << "' is reserved for flex-omp-if-awake";
      return signalPassFailure();
    }
    memref::GlobalOp flag = awakeFlag(module);
    for (omp::ParallelOp p : small) {
      OpBuilder b(p);
      Location loc = p.getLoc();
      Value g = memref::GetGlobalOp::create(b, loc, flag.getType(),
                                            flag.getSymName());
      Value v = memref::LoadOp::create(b, loc, g, ValueRange{});
      Value zero = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0));
      Value awake = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          v, zero);
      p.getIfExprMutable().assign(awake);
    }
  }
};
} // namespace
