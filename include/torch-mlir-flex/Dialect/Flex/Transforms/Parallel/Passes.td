//===- Parallel/Passes.td - OpenMP: which loops run in parallel and how ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Parallel/ (tests: test/Dialect/Flex/Parallel/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PARALLEL_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PARALLEL_PASSES

include "mlir/Pass/PassBase.td"

def FlexSerializeForalls : Pass<"flex-serialize-foralls", "func::FuncOp"> {
  let summary = "Turn bufferized scf.forall ops marked flex.serial into scf.for";
  let description = [{
    flex-to-flash marks the loops of ops too small to gain from threads
    (its `serial-below-us`): on this kind of machine an OpenMP parallel
    region whose workers sleep (idle past KMP_BLOCKTIME) costs about 100 us to
    start and join, more than a decode step over 1024 keys takes on one
    core. Runs after bufferization, before scf-forall-to-parallel; foralls
    that still have shared outputs are left alone.

    With `runtime-choice`, marked foralls stay parallel loops and are tagged
    instead (their location becomes the name `flex.small_parallel` around
    the old one, which scf-forall-to-parallel and convert-scf-to-openmp
    carry to the omp.parallel they build); flex-omp-if-awake then lets the
    code choose threads or one thread each time the region is reached.
  }];
  let options = [
    Option<"runtimeChoice", "runtime-choice", "bool", /*default=*/"false",
           "Tag marked foralls for flex-omp-if-awake instead of making them "
           "scf.for">,
  ];
}

def FlexOmpIfAwake : Pass<"flex-omp-if-awake", "ModuleOp"> {
  let summary = "Run tagged omp.parallel regions on the threads only while "
                "the workers still spin";
  let description = [{
    OpenMP workers spin for KMP_BLOCKTIME after a parallel region, then
    sleep; waking them costs about 100 us here, more than a small op (a
    decode step) takes on one thread, while awake workers make it faster.
    An omp.parallel whose location is the name `flex.small_parallel`
    (flex-serialize-foralls with `runtime-choice`) gets the clause
    `if(omp_get_wtime() - last_end < spin)`: with false the runtime runs the
    region on the calling thread and wakes nobody. After every outermost
    omp.parallel of the module, `last_end` becomes omp_get_wtime(), whether
    the region ran on the threads or not: in a loop of back-to-back calls
    the second call wakes the workers once and later ones find them
    spinning; regions further apart than the spin time (a pause, or other
    work between the layers of a model) stay on one thread. Both are
    public f64 globals of the module:
    `_mlir_flex_last_parallel_end` (initially -1e30) and
    `_mlir_flex_spin_seconds` (initially 0, i.e. small regions on one
    thread, until the caller stores the runtime's spin time; the `_mlir_`
    prefix lets ExecutionEngine's packed lookup find them as
    `flex_last_parallel_end` / `flex_spin_seconds`). Modules without a
    tagged region are left alone.

    ```mlir
    omp.parallel { ... } loc(#small)   // #small = loc("flex.small_parallel"(...))
    ==>
    %now = func.call @omp_get_wtime() : () -> f64
    %idle = arith.subf %now, %last_end : f64
    %awake = arith.cmpf olt, %idle, %spin : f64
    omp.parallel if(%awake) { ... }
    %t = func.call @omp_get_wtime() : () -> f64
    memref.store %t, %last_end_global[] : memref<f64>
    ```
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
}

def FlexOmpSpreadWorkers : Pass<"flex-omp-spread-workers", "ModuleOp"> {
  let summary = "OpenMP workers move off the CPU of the thread that opened "
                "the region";
  let description = [{
    After a pause (the workers asleep past KMP_BLOCKTIME), Linux often
    wakes an OpenMP worker on the CPU of the thread that wakes it. There
    both spin and take turns: on two cores a decode step that runs in 45 us
    with the threads on two CPUs took 150 us, steadily, until the next
    pause (measured: the main thread and the worker both on CPU 0 in every
    slow block, on different CPUs in every fast one).

    Before every outermost omp.parallel the opening thread stores
    sched_getcpu() and pthread_self() in the private globals
    `_mlir_flex_master_cpu` (i32) and `_mlir_flex_master_thread` (i64).
    At the start of the region every other thread compares its own CPU
    with it; on a match it calls `_mlir_flex_leave_cpu`, which sets the
    thread's affinity mask (sched_getaffinity) without that CPU, which
    moves the thread, and then sets the old mask back, so no thread stays
    pinned. A mask holding only that CPU is left as it is. (The threads are
    told apart by pthread_self, not omp_get_thread_num: with torch in the
    process libgomp is loaded too, the JIT may bind its
    omp_get_thread_num, and that answers 0 in threads of another runtime.)
    Modules without omp.parallel are left alone.

    ```mlir
    omp.parallel { ... }
    ==>
    %c = func.call @sched_getcpu() : () -> i32
    memref.store %c, %master_cpu[] : memref<i32>
    %t = func.call @pthread_self() : () -> i64
    memref.store %t, %master_thread[] : memref<i64>
    omp.parallel {
      %me = func.call @pthread_self() : () -> i64
      %cpu = func.call @sched_getcpu() : () -> i32
      %shared = (%me != master_thread) and (%cpu == master_cpu)
      scf.if %shared { func.call @_mlir_flex_leave_cpu(%m) : (i32) -> () }
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def FlexOmpDynamicSchedule : Pass<"flex-omp-dynamic-schedule", "func::FuncOp"> {
  let summary = "Give omp.wsloop ops without a schedule schedule(dynamic)";
  let description = [{
    convert-scf-to-openmp emits worksharing loops with the runtime's default
    (static) schedule: on a loaded machine, or with uneven iterations
    (causal attention tiles), one slow thread then holds up the region.
    With schedule(dynamic) idle threads take the remaining iterations.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PARALLEL_PASSES
