// RUN: flex-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(flex-free-after-last-use))' | FileCheck %s

// flex-free-after-last-use: a temporary's dealloc moves from the end of its
// block to just after the last use of the buffer or of a value derived
// from it.

// Two layers' temporaries: %a is freed before %b is allocated.
// CHECK-LABEL: func.func @chain
// CHECK:         %[[A:.*]] = memref.alloc() : memref<128xf32>
// CHECK-NEXT:    linalg.fill {{.*}} outs(%[[A]] : memref<128xf32>)
// CHECK-NEXT:    linalg.copy ins(%[[A]] : memref<128xf32>)
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    %[[B:.*]] = memref.alloc() : memref<128xf32>
// CHECK-NEXT:    linalg.fill {{.*}} outs(%[[B]] : memref<128xf32>)
// CHECK-NEXT:    linalg.copy ins(%[[B]] : memref<128xf32>)
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    return
func.func @chain(%out: memref<128xf32>) {
  %c0 = arith.constant 0.0 : f32
  %c1 = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<128xf32>
  linalg.fill ins(%c0 : f32) outs(%a : memref<128xf32>)
  linalg.copy ins(%a : memref<128xf32>) outs(%out : memref<128xf32>)
  %b = memref.alloc() : memref<128xf32>
  linalg.fill ins(%c1 : f32) outs(%b : memref<128xf32>)
  linalg.copy ins(%b : memref<128xf32>) outs(%out : memref<128xf32>)
  memref.dealloc %a : memref<128xf32>
  memref.dealloc %b : memref<128xf32>
  return
}

// -----

// A view's use and a library call on the aligned pointer (flex_gemm) keep
// the buffer alive: the dealloc follows the call, not the view.
// CHECK-LABEL: func.func @views_and_pointers
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4x32xf32>
// CHECK:         memref.collapse_shape %[[A]]
// CHECK:         %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK:         %[[Q:.*]] = arith.addi %[[P]]
// CHECK:         linalg.fill
// CHECK-NEXT:    call @gemm(%[[Q]])
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    linalg.fill
// CHECK-NEXT:    return
func.func private @gemm(index)
func.func @views_and_pointers(%out: memref<128xf32>) {
  %c0 = arith.constant 0.0 : f32
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<4x32xf32>
  %v = memref.collapse_shape %a [[0, 1]] : memref<4x32xf32> into memref<128xf32>
  linalg.copy ins(%v : memref<128xf32>) outs(%out : memref<128xf32>)
  %p = memref.extract_aligned_pointer_as_index %a : memref<4x32xf32> -> index
  %q = arith.addi %p, %c4 : index
  linalg.fill ins(%c0 : f32) outs(%out : memref<128xf32>)
  call @gemm(%q) : (index) -> ()
  linalg.fill ins(%c0 : f32) outs(%out : memref<128xf32>)
  memref.dealloc %a : memref<4x32xf32>
  return
}

// -----

// Uses inside a loop count at the loop; a buffer the loop yields lives on
// through the loop's result.
// CHECK-LABEL: func.func @loops
// CHECK:         %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         %[[R:.*]] = scf.for
// CHECK:         }
// CHECK-NEXT:    linalg.copy ins(%[[R]] : memref<8xf32>)
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    linalg.fill
// CHECK-NEXT:    return
func.func @loops(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<8xf32>
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%it = %a) -> (memref<8xf32>) {
    memref.store %z, %it[%i] : memref<8xf32>
    scf.yield %it : memref<8xf32>
  }
  linalg.copy ins(%r : memref<8xf32>) outs(%out : memref<8xf32>)
  linalg.fill ins(%z : f32) outs(%out : memref<8xf32>)
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

// Stays: a derived pointer is stored to memory (it may be read back later),
// and an unused buffer is freed right after its allocation.
// CHECK-LABEL: func.func @escapes
// CHECK:         %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         %[[U:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    memref.dealloc %[[U]]
// CHECK:         memref.store
// CHECK:         linalg.fill
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    return
func.func @escapes(%slot: memref<1xindex>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<8xf32>
  %u = memref.alloc() : memref<8xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
  memref.store %p, %slot[%c0] : memref<1xindex>
  linalg.fill ins(%z : f32) outs(%out : memref<8xf32>)
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %u : memref<8xf32>
  return
}

// -----

// A dealloc in another block than its allocation (a conditional free) is
// left alone.
// CHECK-LABEL: func.func @other_block
// CHECK:         scf.if
// CHECK-NEXT:      memref.dealloc
func.func @other_block(%c: i1, %out: memref<8xf32>) {
  %z = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<8xf32>
  linalg.fill ins(%z : f32) outs(%a : memref<8xf32>)
  linalg.fill ins(%z : f32) outs(%out : memref<8xf32>)
  scf.if %c {
    memref.dealloc %a : memref<8xf32>
  }
  return
}
