// RUN: flex-opt %s -split-input-file -flex-serialize-foralls | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-serialize-foralls='runtime-choice=1' \
// RUN:   -mlir-print-debuginfo | FileCheck %s --check-prefix=CHOICE

// A bufferized forall marked flex.serial becomes nested scf.for loops with
// the same bounds and body.
// CHECK-LABEL: func.func @marked
// CHECK-NOT: scf.forall
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %c4 step
// CHECK-NEXT: scf.for %[[J:.*]] = %{{.*}} to %c8 step
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]]
// CHECK-NOT: scf.forall
// With runtime-choice the forall stays and its location gets the name
// flex.small_parallel around the old one.
// CHOICE-LABEL: func.func @marked
// CHOICE-NOT: scf.for
// CHOICE: scf.forall (%{{.*}}, %{{.*}}) in (4, 8)
// CHOICE: } {flex.serial} loc(#[[TAG:.*]])
// CHOICE: #[[TAG]] = loc("flex.small_parallel"(#{{.*}}))
func.func @marked(%m: memref<4x8xf32>, %x: f32) {
  scf.forall (%i, %j) in (4, 8) {
    memref.store %x, %m[%i, %j] : memref<4x8xf32>
  } {flex.serial}
  return
}

// -----
// Without the mark the forall stays (scf-forall-to-parallel takes it).
// CHECK-LABEL: func.func @unmarked
// CHECK: scf.forall (%{{.*}}) in (4)
// CHECK-NOT: scf.for
// CHOICE-LABEL: func.func @unmarked
// CHOICE-NOT: flex.small_parallel
func.func @unmarked(%m: memref<4xf32>, %x: f32) {
  scf.forall (%i) in (4) {
    memref.store %x, %m[%i] : memref<4xf32>
  }
  return
}

// -----
// A marked forall that still has shared outputs (not bufferized) is left
// alone: scf.for cannot hold its parallel inserts.
// CHECK-LABEL: func.func @tensor_outputs
// CHECK: scf.forall (%{{.*}}) in (4) shared_outs
// CHECK: } {flex.serial}
func.func @tensor_outputs(%t: tensor<4xf32>, %x: tensor<1xf32>) -> tensor<4xf32> {
  %r = scf.forall (%i) in (4) shared_outs(%o = %t) -> (tensor<4xf32>) {
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %x into %o[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
    }
  } {flex.serial}
  return %r : tensor<4xf32>
}
