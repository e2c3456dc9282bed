// RUN: flex-opt %s -split-input-file -flex-copies-to-linalg | FileCheck %s

// A memref.copy between ranked memrefs of one element type becomes a
// linalg.copy with the same source and target (strided views included).
// CHECK-LABEL: func.func @strided
// CHECK-SAME: (%[[SRC:.*]]: memref<4x8xf32, strided<[16, 1]>>, %[[DST:.*]]: memref<4x8xf32>)
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%[[SRC]] : memref<4x8xf32, strided<[16, 1]>>) outs(%[[DST]] : memref<4x8xf32>)
func.func @strided(%src: memref<4x8xf32, strided<[16, 1]>>, %dst: memref<4x8xf32>) {
  memref.copy %src, %dst : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
  return
}

// -----
// A copy of a buffer onto itself is dropped.
// CHECK-LABEL: func.func @self
// CHECK-NOT: memref.copy
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @self(%m: memref<?xi32>) {
  memref.copy %m, %m : memref<?xi32> to memref<?xi32>
  return
}

// -----
// Unranked memrefs stay memref.copy (linalg.copy takes ranked ones only).
// CHECK-LABEL: func.func @unranked
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<*xf32> to memref<*xf32>
// CHECK-NOT: linalg.copy
func.func @unranked(%a: memref<*xf32>, %b: memref<*xf32>) {
  memref.copy %a, %b : memref<*xf32> to memref<*xf32>
  return
}
