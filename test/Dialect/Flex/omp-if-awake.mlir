// RUN: flex-opt %s -split-input-file -flex-omp-if-awake -verify-diagnostics | FileCheck %s

// An omp.parallel located at the name flex.small_parallel gets if(flag != 0)
// on the module's public i8 global _mlir_flex_threads_awake (one global for
// all regions); other parallel regions are left alone.
// CHECK: memref.global @_mlir_flex_threads_awake : memref<i8> = dense<0>
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @small
// CHECK: %[[G:.*]] = memref.get_global @_mlir_flex_threads_awake : memref<i8>
// CHECK: %[[F:.*]] = memref.load %[[G]][] : memref<i8>
// CHECK: %[[C:.*]] = arith.cmpi ne, %[[F]], %{{.*}} : i8
// CHECK: omp.parallel if(%[[C]])
// CHECK: omp.parallel if(%{{.*}})
// CHECK-LABEL: func.func @large
// CHECK-NOT: memref.get_global
// CHECK: omp.parallel {
func.func @small(%m: memref<4xf32>, %x: f32) {
  omp.parallel {
    omp.terminator
  } loc(#small)
  omp.parallel {
    omp.terminator
  } loc(#small)
  return
}
func.func @large(%m: memref<4xf32>, %x: f32) {
  omp.parallel {
    omp.terminator
  }
  return
}
#small = loc("flex.small_parallel"("x.mlir":1:1))

// -----
// No tagged region: no global.
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @none
func.func @none() {
  omp.parallel {
    omp.terminator
  }
  return
}

// -----
// The flag's name is taken by something else: a diagnostic, nothing changed.
// expected-error @+1 {{symbol '_mlir_flex_threads_awake' is reserved for flex-omp-if-awake}}
func.func @_mlir_flex_threads_awake() {
  omp.parallel {
    omp.terminator
  } loc(#small2)
  return
}
#small2 = loc("flex.small_parallel"("x.mlir":2:1))
