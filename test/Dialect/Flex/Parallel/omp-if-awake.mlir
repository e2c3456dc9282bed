// RUN: flex-opt %s -split-input-file -flex-omp-if-awake -verify-diagnostics | FileCheck %s

// An omp.parallel located at the name flex.small_parallel runs on the
// threads only when omp_get_wtime() - last_end < spin; after every
// outermost region (on the threads or not) last_end becomes the time.
// CHECK-DAG: memref.global @_mlir_flex_last_parallel_end : memref<f64> = dense<-1.000000e+30>
// CHECK-DAG: memref.global @_mlir_flex_spin_seconds : memref<f64> = dense<0.000000e+00>
// CHECK-DAG: func.func private @omp_get_wtime() -> f64
// CHECK-LABEL: func.func @small
// CHECK-DAG: %[[LAST:.*]] = memref.load %{{.*}}[] : memref<f64>
// CHECK-DAG: %[[NOW:.*]] = call @omp_get_wtime() : () -> f64
// CHECK: %[[IDLE:.*]] = arith.subf %[[NOW]], %[[LAST]] : f64
// CHECK: %[[SPIN:.*]] = memref.load %{{.*}}[] : memref<f64>
// CHECK: %[[AWAKE:.*]] = arith.cmpf olt, %[[IDLE]], %[[SPIN]] : f64
// CHECK: omp.parallel if(%[[AWAKE]])
// CHECK: %[[END:.*]] = call @omp_get_wtime() : () -> f64
// CHECK: %[[G:.*]] = memref.get_global @_mlir_flex_last_parallel_end
// CHECK: memref.store %[[END]], %[[G]][] : memref<f64>
// CHECK: return
// A region not tagged keeps no condition and stores its end time too; the
// nested one is left alone.
// CHECK-LABEL: func.func @large
// CHECK: omp.parallel {
// CHECK: omp.parallel {
// CHECK-NOT: omp_get_wtime
// CHECK: omp.terminator
// CHECK: %[[T:.*]] = call @omp_get_wtime() : () -> f64
// CHECK: memref.store %[[T]], %{{.*}}[] : memref<f64>
func.func @small(%m: memref<4xf32>, %x: f32) {
  omp.parallel {
    omp.terminator
  } loc(#small)
  return
}
func.func @large(%m: memref<4xf32>, %x: f32) {
  omp.parallel {
    omp.parallel {
      omp.terminator
    }
    omp.terminator
  }
  return
}
#small = loc("flex.small_parallel"("x.mlir":1:1))

// -----
// No tagged region: nothing changes, no globals.
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @none
// CHECK-NOT: omp_get_wtime
// CHECK: omp.parallel {
func.func @none() {
  omp.parallel {
    omp.terminator
  }
  return
}

// -----
// A name the pass needs is taken by another kind of symbol: a diagnostic.
// expected-error @+1 {{symbol '_mlir_flex_spin_seconds' is reserved for flex-omp-if-awake}}
llvm.mlir.global external @_mlir_flex_spin_seconds(0.0 : f64) : f64
func.func @taken() {
  omp.parallel {
    omp.terminator
  } loc(#small2)
  return
}
#small2 = loc("flex.small_parallel"("x.mlir":2:1))
