// RUN: flex-opt %s -split-input-file -verify-diagnostics -flex-in-place-results | FileCheck %s

// The cache was updated where it stands: the result is dropped, no copy.
// CHECK-LABEL: func.func @updated_in_place(
// CHECK-SAME: %[[CACHE:.*]]: memref<4x8xf32>, %[[X:.*]]: memref<1x8xf32>) {
// CHECK: memref.copy %[[X]]
// CHECK-NOT: memref.copy
// CHECK: return{{$}}
func.func @updated_in_place(%cache: memref<4x8xf32>, %x: memref<1x8xf32>)
    -> (memref<4x8xf32> {flex.in_place = 0 : i64}) {
  %sub = memref.subview %cache[1, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<1x8xf32, strided<[8, 1], offset: 8>>
  memref.copy %x, %sub : memref<1x8xf32> to memref<1x8xf32, strided<[8, 1], offset: 8>>
  return %cache : memref<4x8xf32>
}

// -----

// Through the scf.for of a scatter loop (its result is its init buffer).
// CHECK-LABEL: func.func @through_loop(
// CHECK-SAME: %[[CACHE:.*]]: memref<4x8xf32>, %{{.*}}: memref<8xf32>) {
// CHECK: scf.for
// CHECK-NOT: memref.copy
// CHECK: return{{$}}
func.func @through_loop(%cache: memref<4x8xf32>, %x: memref<8xf32>)
    -> (memref<4x8xf32> {flex.in_place = 0 : i64}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%t = %cache) -> memref<4x8xf32> {
    %e = memref.load %x[%i] : memref<8xf32>
    memref.store %e, %t[%c1, %i] : memref<4x8xf32>
    scf.yield %t : memref<4x8xf32>
  }
  %c = memref.cast %r : memref<4x8xf32> to memref<4x8xf32>
  return %c : memref<4x8xf32>
}

// -----

// Updated out of place (the old value was read after the update): copied
// into the argument before the return. Unmarked results stay, in order.
// CHECK-LABEL: func.func @copied_back(
// CHECK-SAME: %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>) -> memref<2xf32> {
// CHECK: %[[NEW:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[M:.*]] = memref.alloc() : memref<2xf32>
// CHECK: memref.copy %[[NEW]], %[[B]]
// CHECK-NEXT: return %[[M]] : memref<2xf32>
func.func @copied_back(%a: memref<4xf32>, %b: memref<4xf32>)
    -> (memref<4xf32> {flex.in_place = 1 : i64}, memref<2xf32>) {
  %new = memref.alloc() : memref<4xf32>
  %m = memref.alloc() : memref<2xf32>
  return %new, %m : memref<4xf32>, memref<2xf32>
}

// -----

// A loop that yields another buffer is not its init: copied.
// CHECK-LABEL: func.func @loop_yields_other(
// CHECK: %[[R:.*]] = scf.for
// CHECK: memref.copy %[[R]], %{{.*}}
// CHECK-NEXT: return{{$}}
func.func @loop_yields_other(%cache: memref<4xf32>, %other: memref<4xf32>)
    -> (memref<4xf32> {flex.in_place = 0 : i64}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%t = %cache) -> memref<4xf32> {
    scf.yield %other : memref<4xf32>
  }
  return %r : memref<4xf32>
}

// -----

// Every return of a function with several blocks.
// CHECK-LABEL: func.func @branches(
// CHECK-SAME: %{{.*}}: i1, %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>) {
// CHECK: return{{$}}
// CHECK: memref.copy %[[B]], %[[A]]
// CHECK-NEXT: return{{$}}
func.func @branches(%c: i1, %a: memref<4xf32>, %b: memref<4xf32>)
    -> (memref<4xf32> {flex.in_place = 1 : i64}) {
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  return %a : memref<4xf32>
^bb2:
  return %b : memref<4xf32>
}

// -----

// Unmarked results are left alone, even when they are an argument.
// CHECK-LABEL: func.func @unmarked(
// CHECK-SAME: -> memref<4xf32>
// CHECK: return %{{.*}} : memref<4xf32>
func.func @unmarked(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}

// -----

// expected-error @+1 {{result 0 is marked flex.in_place = 2, but the function has 1 arguments}}
func.func @no_such_argument(%a: memref<4xf32>) -> (memref<4xf32> {flex.in_place = 2 : i64}) {
  return %a : memref<4xf32>
}

// -----

// expected-error @+1 {{result 0 ('memref<4xf32>') is marked flex.in_place = 0, an argument of another type ('memref<8xf32>')}}
func.func @other_type(%a: memref<8xf32>) -> (memref<4xf32> {flex.in_place = 0 : i64}) {
  %n = memref.alloc() : memref<4xf32>
  return %n : memref<4xf32>
}

// -----

// expected-error @+1 {{has results marked flex.in_place but is called in the module}}
func.func private @callee(%a: memref<4xf32>) -> (memref<4xf32> {flex.in_place = 0 : i64}) {
  return %a : memref<4xf32>
}
func.func @caller(%a: memref<4xf32>) {
  %r = call @callee(%a) : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

// expected-error @+1 {{results marked flex.in_place must be memrefs (run after bufferization)}}
func.func @tensors(%a: tensor<4xf32>) -> (tensor<4xf32> {flex.in_place = 0 : i64}) {
  return %a : tensor<4xf32>
}
