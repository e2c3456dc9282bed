//===- OmpSpreadWorkers.cpp - workers leave the calling thread's CPU -----===//
//
// flex-omp-spread-workers: a worker thread that starts an omp.parallel
// region on the CPU of the thread that opened it moves to another CPU of
// its affinity mask and keeps that mask (Passes.td has the reasoning).
// Module symbols:
//   _mlir_flex_master_cpu (i32 global), _mlir_flex_master_thread (i64
//     global): sched_getcpu() and pthread_self() of the opening thread,
//     stored before every outermost region (pthread_self, not
//     omp_get_thread_num: a process with torch also has libgomp loaded,
//     whose omp_get_thread_num the JIT may bind and which answers 0 in
//     every thread of another runtime);
//   _mlir_flex_leave_cpu(i32): the calling thread's affinity mask without
//     that CPU is set (which migrates it), then the mask is restored.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXOMPSPREADWORKERS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

static constexpr llvm::StringLiteral kMasterCpu = "_mlir_flex_master_cpu";
static constexpr llvm::StringLiteral kMasterThread = "_mlir_flex_master_thread";
static constexpr llvm::StringLiteral kLeaveCpu = "_mlir_flex_leave_cpu";
/// cpu_set_t of glibc: 1024 bits.
static constexpr int64_t kMaskWords = 16;

namespace {
/// The module-level symbols, created on first use.
struct SpreadSymbols {
  ModuleOp module;
  memref::GlobalOp masterCpu, masterThread;
  func::FuncOp getCpu, self, leaveCpu;

  /// A private external function; an existing symbol of another kind or
  /// type is an error.
  FailureOr<func::FuncOp> external(OpBuilder &b, StringRef name,
                                   FunctionType type) {
    Operation *other = module.lookupSymbol(name);
    if (auto f = dyn_cast_or_null<func::FuncOp>(other);
        f && f.getFunctionType() == type)
      return f;
    if (other)
      return other->emitError()
             << "symbol '" << name << "' is reserved for flex-omp-spread-workers";
    auto f = func::FuncOp::create(b, module.getLoc(), name, type);
    f.setPrivate();
    return f;
  }

  /// A private scalar global of `type` (initially -1); an existing symbol
  /// of another kind is an error.
  FailureOr<memref::GlobalOp> global(OpBuilder &b, StringRef name,
                                     Type type) {
    if (Operation *other = module.lookupSymbol(name)) {
      if (auto g = dyn_cast<memref::GlobalOp>(other))
        return g;
      return other->emitError()
             << "symbol '" << name << "' is reserved for flex-omp-spread-workers";
    }
    return memref::GlobalOp::create(
        b, module.getLoc(), name, b.getStringAttr("private"),
        MemRefType::get({}, type),
        DenseElementsAttr::get(RankedTensorType::get({}, type),
                               b.getIntegerAttr(type, -1)),
        /*constant=*/false, /*alignment=*/nullptr);
  }

  LogicalResult init() {
    MLIRContext *ctx = module.getContext();
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    auto mask = b.getFunctionType({i32, i64, ptr}, {i32});
    FailureOr<func::FuncOp> g = external(b, "sched_getcpu", b.getFunctionType({}, {i32}));
    FailureOr<func::FuncOp> t =
        external(b, "pthread_self", b.getFunctionType({}, {i64}));
    FailureOr<func::FuncOp> ga = external(b, "sched_getaffinity", mask);
    FailureOr<func::FuncOp> sa = external(b, "sched_setaffinity", mask);
    if (failed(g) || failed(t) || failed(ga) || failed(sa))
      return failure();
    getCpu = *g;
    self = *t;
    FailureOr<memref::GlobalOp> cpu = global(b, kMasterCpu, i32);
    FailureOr<memref::GlobalOp> thread = global(b, kMasterThread, i64);
    if (failed(cpu) || failed(thread))
      return failure();
    masterCpu = *cpu;
    masterThread = *thread;
    if (Operation *other = module.lookupSymbol(kLeaveCpu)) {
      leaveCpu = dyn_cast<func::FuncOp>(other);
      if (!leaveCpu)
        return other->emitError()
               << "symbol '" << kLeaveCpu << "' is reserved for flex-omp-spread-workers";
      return success();
    }
    leaveCpu = buildLeaveCpu(b, *ga, *sa);
    return success();
  }

  /// func.func private @_mlir_flex_leave_cpu(%cpu: i32): get the mask;
  /// when %cpu is in it, set it without %cpu, then set it back.
  func::FuncOp buildLeaveCpu(OpBuilder &b, func::FuncOp getAff,
                             func::FuncOp setAff) {
    Location loc = module.getLoc();
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    auto f = func::FuncOp::create(b, loc, kLeaveCpu, b.getFunctionType({i32}, {}));
    f.setPrivate();
    OpBuilder fb = OpBuilder::atBlockBegin(f.addEntryBlock());
    Value cpu = f.getArgument(0);
    auto set = memref::AllocaOp::create(fb, loc, MemRefType::get({kMaskWords}, i64));
    Value addr = memref::ExtractAlignedPointerAsIndexOp::create(fb, loc, set);
    addr = arith::IndexCastOp::create(fb, loc, i64, addr);
    Value ptr = LLVM::IntToPtrOp::create(
        fb, loc, LLVM::LLVMPointerType::get(b.getContext()), addr);
    auto c32 = [&](int64_t v) {
      return arith::ConstantIntOp::create(fb, loc, i32, v).getResult();
    };
    auto c64 = [&](int64_t v) {
      return arith::ConstantIntOp::create(fb, loc, i64, v).getResult();
    };
    SmallVector<Value> args = {c32(0), c64(kMaskWords * 8), ptr};
    auto affinity = [&](OpBuilder &ob, func::FuncOp fn) {
      return func::CallOp::create(ob, loc, fn, args).getResult(0);
    };
    Value got = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::eq,
                                      affinity(fb, getAff), c32(0));
    Value nonNeg =
        arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::sge, cpu, c32(0));
    Value below = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::slt, cpu,
                                        c32(kMaskWords * 64));
    Value inRange = arith::AndIOp::create(fb, loc, nonNeg, below);
    Value ok = arith::AndIOp::create(fb, loc, got, inRange);
    scf::IfOp::create(fb, loc, ok, [&](OpBuilder &ib, Location l) {
      Value c = arith::ExtUIOp::create(ib, l, i64, cpu);
      Value word = arith::IndexCastOp::create(
          ib, l, ib.getIndexType(), arith::ShRUIOp::create(ib, l, c, c64(6)));
      Value low = arith::AndIOp::create(ib, l, c, c64(63));
      Value bit = arith::ShLIOp::create(ib, l, c64(1), low);
      Value old = memref::LoadOp::create(ib, l, set, ValueRange{word});
      Value others = arith::XOrIOp::create(ib, l, bit, c64(-1));
      Value cleared = arith::AndIOp::create(ib, l, old, others);
      memref::StoreOp::create(ib, l, cleared, set, ValueRange{word});
      affinity(ib, setAff);
      memref::StoreOp::create(ib, l, old, set, ValueRange{word});
      affinity(ib, setAff);
      scf::YieldOp::create(ib, l);
    });
    func::ReturnOp::create(fb, loc);
    return f;
  }

  Value ref(OpBuilder &b, Location loc, memref::GlobalOp g) {
    return memref::GetGlobalOp::create(b, loc, g.getType(), g.getSymName());
  }

  /// Before the region: the opening thread's CPU and thread.
  void noteMaster(OpBuilder &b, Location loc) {
    Value cpu = func::CallOp::create(b, loc, getCpu).getResult(0);
    memref::StoreOp::create(b, loc, cpu, ref(b, loc, masterCpu), ValueRange{});
    Value me = func::CallOp::create(b, loc, self).getResult(0);
    memref::StoreOp::create(b, loc, me, ref(b, loc, masterThread),
                            ValueRange{});
  }

  /// At the start of the region: another thread on the master's CPU
  /// leaves it.
  void leaveIfShared(OpBuilder &b, Location loc) {
    Value me = func::CallOp::create(b, loc, self).getResult(0);
    Value cpu = func::CallOp::create(b, loc, getCpu).getResult(0);
    Value master =
        memref::LoadOp::create(b, loc, ref(b, loc, masterThread), ValueRange{});
    Value masterCpuNow =
        memref::LoadOp::create(b, loc, ref(b, loc, masterCpu), ValueRange{});
    Value worker =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, me, master);
    Value same = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, cpu,
                                       masterCpuNow);
    Value shared = arith::AndIOp::create(b, loc, worker, same);
    scf::IfOp::create(b, loc, shared, [&](OpBuilder &ib, Location l) {
      func::CallOp::create(ib, l, leaveCpu, ValueRange{masterCpuNow});
      scf::YieldOp::create(ib, l);
    });
  }
};

struct FlexOmpSpreadWorkersPass
    : public flex::impl::FlexOmpSpreadWorkersBase<FlexOmpSpreadWorkersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<omp::ParallelOp> regions;
    module.walk([&](omp::ParallelOp p) {
      if (!p->getParentOfType<omp::ParallelOp>())
        regions.push_back(p);
    });
    if (regions.empty())
      return;
    SpreadSymbols sym{module, {}, {}, {}, {}, {}};
    if (failed(sym.init()))
      return signalPassFailure();
    for (omp::ParallelOp p : regions) {
      OpBuilder b(p);
      sym.noteMaster(b, p.getLoc());
      b.setInsertionPointToStart(&p.getRegion().front());
      sym.leaveIfShared(b, p.getLoc());
    }
  }
};
} // namespace
