// RUN: flex-opt %s -split-input-file -flex-inline-alloca-scopes | FileCheck %s

// A scope without memref.alloca is inlined: its body (nested loops, which
// convert-scf-to-cf could not lower inside the scope's single block) moves
// in front of it and its results replace the scope's.
// CHECK-LABEL: func.func @no_alloca
// CHECK-NOT: memref.alloca_scope
// CHECK: scf.for
// CHECK: memref.store
// CHECK: %[[V:.*]] = memref.load
// CHECK: return %[[V]]
func.func @no_alloca(%m: memref<8xf32>, %x: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = memref.alloca_scope -> f32 {
    scf.for %i = %c0 to %c8 step %c1 {
      memref.store %x, %m[%i] : memref<8xf32>
    }
    %v = memref.load %m[%c0] : memref<8xf32>
    memref.alloca_scope.return %v : f32
  }
  return %r : f32
}

// -----
// A scope holding an alloca stays: its end frees the stack memory.
// CHECK-LABEL: func.func @with_alloca
// CHECK: memref.alloca_scope {
// CHECK: memref.alloca() : memref<4xf32>
func.func @with_alloca(%x: f32) {
  %c0 = arith.constant 0 : index
  memref.alloca_scope {
    %a = memref.alloca() : memref<4xf32>
    memref.store %x, %a[%c0] : memref<4xf32>
  }
  return
}
