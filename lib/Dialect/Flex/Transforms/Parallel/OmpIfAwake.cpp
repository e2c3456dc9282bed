//===- OmpIfAwake.cpp - small parallel regions only with awake workers ----===//
//
// flex-omp-if-awake: omp.parallel ops located at the name
// flex.small_parallel run on the threads only while the OpenMP workers
// can still be spinning after the module's last parallel region (Passes.td
// has the reasoning and an example). Two module globals carry the state:
//   _mlir_flex_last_parallel_end (f64): omp_get_wtime() when the last
//     region ended (on the threads or not), stored after every region;
//   _mlir_flex_spin_seconds (f64): how long workers spin (KMP_BLOCKTIME),
//     0 until the caller sets it, which keeps small regions on one thread.
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

static constexpr llvm::StringLiteral kLastEnd = "_mlir_flex_last_parallel_end";
static constexpr llvm::StringLiteral kSpin = "_mlir_flex_spin_seconds";
static constexpr llvm::StringLiteral kWtime = "omp_get_wtime";

static bool isSmallParallel(omp::ParallelOp op) {
  auto name = dyn_cast<NameLoc>(op.getLoc());
  return name && name.getName() == flex::kSmallParallelLoc;
}

namespace {
/// The module-level symbols the guards use, created on first use.
struct AwakeState {
  memref::GlobalOp lastEnd, spin;
  func::FuncOp wtime;

  static FailureOr<AwakeState> get(ModuleOp module) {
    for (StringRef name : {kLastEnd, kSpin, kWtime}) {
      Operation *other = module.lookupSymbol(name);
      bool fits = name == kWtime ? isa_and_present<func::FuncOp>(other)
                                 : isa_and_present<memref::GlobalOp>(other);
      if (other && !fits)
        return other->emitError()
               << "symbol '" << name << "' is reserved for flex-omp-if-awake";
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    AwakeState s;
    s.lastEnd = global(b, module, kLastEnd, -1e30);
    s.spin = global(b, module, kSpin, 0.0);
    s.wtime = module.lookupSymbol<func::FuncOp>(kWtime);
    if (!s.wtime) {
      s.wtime = func::FuncOp::create(b, module.getLoc(), kWtime,
                                     b.getFunctionType({}, b.getF64Type()));
      s.wtime.setPrivate();
    }
    return s;
  }

  /// A public (no visibility attribute) f64 global with initial value `v`.
  static memref::GlobalOp global(OpBuilder &b, ModuleOp module, StringRef name,
                                 double v) {
    if (auto g = module.lookupSymbol<memref::GlobalOp>(name))
      return g;
    auto type = MemRefType::get({}, b.getF64Type());
    return memref::GlobalOp::create(
        b, module.getLoc(), name, /*sym_visibility=*/StringAttr(), type,
        DenseElementsAttr::get(RankedTensorType::get({}, b.getF64Type()),
                               b.getF64FloatAttr(v)),
        /*constant=*/false, /*alignment=*/nullptr);
  }

  Value ref(OpBuilder &b, Location loc, memref::GlobalOp g) {
    return memref::GetGlobalOp::create(b, loc, g.getType(), g.getSymName());
  }

  Value load(OpBuilder &b, Location loc, memref::GlobalOp g) {
    return memref::LoadOp::create(b, loc, ref(b, loc, g), ValueRange{});
  }

  Value now(OpBuilder &b, Location loc) {
    return func::CallOp::create(b, loc, wtime).getResult(0);
  }

  /// Before a small region: now - lastEnd < spin.
  Value awake(OpBuilder &b, Location loc) {
    Value idle = arith::SubFOp::create(b, loc, now(b, loc), load(b, loc, lastEnd));
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, idle,
                                 load(b, loc, spin));
  }

  /// After a region: lastEnd = now.
  void ended(OpBuilder &b, Location loc) {
    Value t = now(b, loc);
    memref::StoreOp::create(b, loc, t, ref(b, loc, lastEnd), ValueRange{});
  }
};

struct FlexOmpIfAwakePass
    : public flex::impl::FlexOmpIfAwakeBase<FlexOmpIfAwakePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<omp::ParallelOp> regions;
    bool anySmall = false;
    module.walk([&](omp::ParallelOp p) {
      // Outermost regions only; a small one already guarded is done.
      if (p->getParentOfType<omp::ParallelOp>() ||
          (isSmallParallel(p) && p.getIfExpr()))
        return;
      regions.push_back(p);
      anySmall |= isSmallParallel(p);
    });
    if (!anySmall)
      return;
    FailureOr<AwakeState> state = AwakeState::get(module);
    if (failed(state))
      return signalPassFailure();
    for (omp::ParallelOp p : regions) {
      OpBuilder b(p);
      Location loc = p.getLoc();
      if (isSmallParallel(p))
        p.getIfExprMutable().assign(state->awake(b, loc));
      b.setInsertionPointAfter(p);
      state->ended(b, loc);
    }
  }
};
} // namespace
