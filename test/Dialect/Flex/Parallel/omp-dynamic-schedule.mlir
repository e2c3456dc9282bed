// RUN: flex-opt %s -split-input-file -flex-omp-dynamic-schedule | FileCheck %s

// An omp.wsloop without a schedule gets schedule(dynamic): row tiles of
// unequal work (causal masks skip blocks) are handed out as threads free up.
// CHECK-LABEL: func.func @unscheduled
// CHECK: omp.wsloop schedule(dynamic)
func.func @unscheduled(%m: memref<16xf32>, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c16) step (%c1) {
        memref.store %x, %m[%i] : memref<16xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----
// A schedule already chosen is kept.
// CHECK-LABEL: func.func @static
// CHECK: omp.wsloop schedule(static)
// CHECK-NOT: dynamic
func.func @static(%m: memref<16xf32>, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  omp.parallel {
    omp.wsloop schedule(static) {
      omp.loop_nest (%i) : index = (%c0) to (%c16) step (%c1) {
        memref.store %x, %m[%i] : memref<16xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}
