// RUN: flex-opt %s -split-input-file -flex-outline-loops | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-outline-loops=optnone-above=3 | FileCheck %s --check-prefix=OPTNONE

// Two loop nests of the same shape on different buffers: one function,
// called twice; the constants are cloned into it, the buffers passed.

// CHECK-LABEL: func.func private @main__loops0
// CHECK-SAME:      (%[[A:.*]]: memref<8xf32>, %[[O:.*]]: memref<8xf32>)
// CHECK-SAME:      attributes {flex.outlined, llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         scf.for %[[I:.*]] = %[[C0]] to %[[C8]]
// CHECK:           %[[X:.*]] = memref.load %[[A]][%[[I]]]
// CHECK:           %[[Y:.*]] = arith.mulf %[[X]], %[[TWO]]
// CHECK:           memref.store %[[Y]], %[[O]][%[[I]]]
// CHECK:         return
// CHECK-NOT:   func.func private @main__loops1
// CHECK-LABEL: func.func @main
// CHECK-SAME:      (%[[A:.*]]: memref<8xf32>, %[[O:.*]]: memref<8xf32>, %[[P:.*]]: memref<8xf32>)
// CHECK-NOT:     scf.for
// CHECK:         call @main__loops0(%[[A]], %[[O]])
// CHECK-NEXT:    call @main__loops0(%[[O]], %[[P]])
// CHECK-NEXT:    return

// Seven top-level ops are left in @main (constants, calls, return): above
// 3, optnone.
// OPTNONE-LABEL: func.func @main
// OPTNONE-SAME:    passthrough = ["noinline", "optnone"]
func.func @main(%a: memref<8xf32>, %o: memref<8xf32>, %p: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %two = arith.constant 2.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %o[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %o[%i] : memref<8xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %p[%i] : memref<8xf32>
  }
  return
}

// -----

// Different bodies stay apart; a loop with results returns them; a value
// computed in the function (not a constant) is passed; an scf.if is
// outlined too.

// CHECK-LABEL: func.func private @sum__loops0
// CHECK-SAME:      (%[[N:.*]]: index, %[[A:.*]]: memref<?xf32>) -> f32
// CHECK:         %[[S:.*]] = scf.for {{.*}} to %[[N]] {{.*}} iter_args
// CHECK:           memref.load %[[A]]
// CHECK:         return %[[S]] : f32
// CHECK-LABEL: func.func private @sum__loops1
// CHECK-SAME:      (%{{.*}}: i1, %{{.*}}: f32, %{{.*}}: memref<f32>)
// CHECK:         scf.if
// CHECK-LABEL: func.func @sum
// CHECK:         %[[N:.*]] = memref.dim
// CHECK:         %[[S:.*]] = call @sum__loops0(%[[N]], %{{.*}}) : (index, memref<?xf32>) -> f32
// CHECK:         %[[POS:.*]] = arith.cmpf
// CHECK:         call @sum__loops1(%[[POS]], %[[S]], %{{.*}})
// OPTNONE-LABEL: func.func @sum
// OPTNONE-SAME:    passthrough = ["noinline", "optnone"]
func.func @sum(%a: memref<?xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %a, %c0 : memref<?xf32>
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
    %x = memref.load %a[%i] : memref<?xf32>
    %r = arith.addf %acc, %x : f32
    scf.yield %r : f32
  }
  %pos = arith.cmpf ogt, %s, %zero : f32
  scf.if %pos {
    memref.store %s, %out[] : memref<f32>
  }
  return
}

// -----

// Already outlined functions and declarations are left alone; a function
// without loops gets no call and, below the threshold, no optnone.

// CHECK-LABEL: func.func private @done
// CHECK-NOT:     call
// CHECK:         scf.for
// CHECK-LABEL: func.func @small
// CHECK-NOT:     passthrough
// CHECK:         call @ext
// CHECK-NEXT:    return
// OPTNONE-LABEL: func.func @small
// OPTNONE-NOT:     passthrough
func.func private @ext(memref<4xf32>)
func.func private @done(%a: memref<4xf32>) attributes {flex.outlined} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    memref.store %x, %a[%i] : memref<4xf32>
  }
  return
}
func.func @small(%a: memref<4xf32>) {
  call @ext(%a) : (memref<4xf32>) -> ()
  return
}
