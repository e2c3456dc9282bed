// RUN: flex-opt %s -split-input-file -flex-omp-spread-workers -verify-diagnostics | FileCheck %s

// Before every outermost omp.parallel the opening thread stores its CPU
// and pthread_self(); in the region another thread on that CPU calls
// @_mlir_flex_leave_cpu. The nested region gets nothing.
// CHECK-DAG: memref.global "private" @_mlir_flex_master_cpu : memref<i32> = dense<-1>
// CHECK-DAG: memref.global "private" @_mlir_flex_master_thread : memref<i64> = dense<-1>
// CHECK-DAG: func.func private @sched_getcpu() -> i32
// CHECK-DAG: func.func private @pthread_self() -> i64
// CHECK-DAG: func.func private @sched_getaffinity(i32, i64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @sched_setaffinity(i32, i64, !llvm.ptr) -> i32
// @_mlir_flex_leave_cpu: the mask (1024 bits) without the CPU's bit, set,
// then the old mask set back; only when it was read and the CPU is in
// [0, 1024).
// CHECK-LABEL: func.func private @_mlir_flex_leave_cpu
// CHECK-SAME: (%[[CPU:.*]]: i32)
// CHECK: %[[SET:.*]] = memref.alloca() : memref<16xi64>
// CHECK: %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[SET]]
// CHECK: %[[P:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[GOT:.*]] = call @sched_getaffinity(%{{.*}}, %{{.*}}, %[[P]])
// CHECK: scf.if
// CHECK: %[[C:.*]] = arith.extui %[[CPU]] : i32 to i64
// CHECK: %[[W:.*]] = arith.shrui %[[C]], %{{.*}} : i64
// CHECK: %[[OLD:.*]] = memref.load %[[SET]]
// CHECK: %[[CLEARED:.*]] = arith.andi %[[OLD]], %{{.*}} : i64
// CHECK: memref.store %[[CLEARED]], %[[SET]]
// CHECK: call @sched_setaffinity(%{{.*}}, %{{.*}}, %[[P]])
// CHECK: memref.store %[[OLD]], %[[SET]]
// CHECK: call @sched_setaffinity(%{{.*}}, %{{.*}}, %[[P]])
// CHECK-LABEL: func.func @two_regions
// CHECK: %[[M:.*]] = call @sched_getcpu() : () -> i32
// CHECK: memref.store %[[M]], %{{.*}}[] : memref<i32>
// CHECK: %[[T:.*]] = call @pthread_self() : () -> i64
// CHECK: memref.store %[[T]], %{{.*}}[] : memref<i64>
// CHECK: omp.parallel {
// CHECK: %[[ME:.*]] = func.call @pthread_self() : () -> i64
// CHECK: %[[MINE:.*]] = func.call @sched_getcpu() : () -> i32
// CHECK: %[[MASTER:.*]] = memref.load %{{.*}}[] : memref<i64>
// CHECK: %[[MCPU:.*]] = memref.load %{{.*}}[] : memref<i32>
// CHECK: %[[WORKER:.*]] = arith.cmpi ne, %[[ME]], %[[MASTER]] : i64
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[MINE]], %[[MCPU]] : i32
// CHECK: %[[SHARED:.*]] = arith.andi %[[WORKER]], %[[SAME]] : i1
// CHECK: scf.if %[[SHARED]] {
// CHECK: func.call @_mlir_flex_leave_cpu(%[[MCPU]]) : (i32) -> ()
// CHECK: omp.parallel {
// CHECK-NOT: sched_getcpu
// CHECK: omp.terminator
// CHECK: omp.terminator
// CHECK: call @sched_getcpu() : () -> i32
// CHECK: omp.parallel {
// CHECK: call @_mlir_flex_leave_cpu
// CHECK: return
func.func @two_regions() {
  omp.parallel {
    omp.parallel {
      omp.terminator
    }
    omp.terminator
  }
  omp.parallel {
    omp.terminator
  }
  return
}

// -----
// No omp.parallel: nothing changes, no symbols.
// CHECK-NOT: memref.global
// CHECK-NOT: sched_getcpu
// CHECK-LABEL: func.func @none
func.func @none() {
  return
}

// -----
// A name the pass needs is taken by another kind of symbol: a diagnostic.
// expected-error @+1 {{symbol 'sched_getcpu' is reserved for flex-omp-spread-workers}}
memref.global @sched_getcpu : memref<i32> = dense<0>
func.func @taken() {
  omp.parallel {
    omp.terminator
  }
  return
}
