// RUN: flex-opt %s -flex-widen-i1-memrefs -split-input-file | FileCheck %s

// Memrefs of i1 are stored as memrefs of i8: loads truncate, stores extend.

// CHECK-LABEL: func.func @load_store
// CHECK-SAME: (%[[M:.+]]: memref<4xi8>, %[[I:.+]]: index) -> memref<4xi8>
// CHECK: %[[W:.+]] = memref.load %[[M]][%[[I]]] : memref<4xi8>
// CHECK: %[[X:.+]] = arith.trunci %[[W]] : i8 to i1
// CHECK: %[[N:.+]] = arith.xori %[[X]], %[[X]] : i1
// CHECK: %[[E:.+]] = arith.extui %[[N]] : i1 to i8
// CHECK: memref.store %[[E]], %[[M]][%[[I]]] : memref<4xi8>
// CHECK: return %[[M]] : memref<4xi8>
func.func @load_store(%m: memref<4xi1>, %i: index) -> memref<4xi1> {
  %x = memref.load %m[%i] : memref<4xi1>
  %n = arith.xori %x, %x : i1
  memref.store %n, %m[%i] : memref<4xi1>
  return %m : memref<4xi1>
}

// -----

// Declarations and call sites follow.

// CHECK-LABEL: func.func private @ext(memref<?xi8>) -> memref<?xi8>
// CHECK-LABEL: func.func @calls
// CHECK-SAME: (%[[M:.+]]: memref<?xi8>) -> memref<?xi8>
// CHECK: %[[R:.+]] = call @ext(%[[M]]) : (memref<?xi8>) -> memref<?xi8>
// CHECK: return %[[R]] : memref<?xi8>
func.func private @ext(memref<?xi1>) -> memref<?xi1>
func.func @calls(%m: memref<?xi1>) -> memref<?xi1> {
  %r = call @ext(%m) : (memref<?xi1>) -> memref<?xi1>
  return %r : memref<?xi1>
}

// -----

// Allocations, views, casts and copies only change their element type.

// CHECK-LABEL: func.func @alloc_views
// CHECK: %[[A:.+]] = memref.alloc(%{{.+}}) : memref<?x8xi8>
// CHECK: %[[S:.+]] = memref.alloca() : memref<2x8xi8>
// CHECK: memref.subview %[[A]][0, 2] [2, 4] [1, 1] : memref<?x8xi8> to memref<2x4xi8, strided<[8, 1], offset: 2>>
// CHECK: %[[C:.+]] = memref.cast %[[A]] : memref<?x8xi8> to memref<?x?xi8>
// CHECK: %[[RC:.+]] = memref.reinterpret_cast %[[S]] to offset: [0], sizes: [16], strides: [1] : memref<2x8xi8> to memref<16xi8>
// CHECK: %[[COL:.+]] = memref.collapse_shape %[[S]] {{\[}}[0, 1]] : memref<2x8xi8> into memref<16xi8>
// CHECK: memref.expand_shape %[[COL]] {{\[}}[0, 1]] output_shape [4, 4] : memref<16xi8> into memref<4x4xi8>
// CHECK: memref.dim %[[C]], %{{.+}} : memref<?x?xi8>
// CHECK: memref.copy %[[RC]], %[[COL]] : memref<16xi8> to memref<16xi8>
// CHECK: memref.dealloc %[[A]] : memref<?x8xi8>
// CHECK-NOT: xi1
func.func @alloc_views(%n: index) -> index {
  %a = memref.alloc(%n) : memref<?x8xi1>
  %s = memref.alloca() : memref<2x8xi1>
  %c0 = arith.constant 0 : index
  %sv = memref.subview %a[0, 2] [2, 4] [1, 1] : memref<?x8xi1> to memref<2x4xi1, strided<[8, 1], offset: 2>>
  %c = memref.cast %a : memref<?x8xi1> to memref<?x?xi1>
  %rc = memref.reinterpret_cast %s to offset: [0], sizes: [16], strides: [1] : memref<2x8xi1> to memref<16xi1>
  %col = memref.collapse_shape %s [[0, 1]] : memref<2x8xi1> into memref<16xi1>
  %ex = memref.expand_shape %col [[0, 1]] output_shape [4, 4] : memref<16xi1> into memref<4x4xi1>
  %d = memref.dim %c, %c0 : memref<?x?xi1>
  memref.copy %rc, %col : memref<16xi1> to memref<16xi1>
  memref.dealloc %a : memref<?x8xi1>
  return %d : index
}

// -----

// Globals: dense and splat i1 initial values become i8 0/1.

// CHECK: memref.global "private" constant @g : memref<4xi8> = dense<[1, 0, 1, 1]>
// CHECK: memref.global "private" constant @splat : memref<2x2xi8> = dense<1>
// CHECK: memref.global "private" @uninit : memref<3xi8> = uninitialized
// CHECK-LABEL: func.func @globals() -> (memref<4xi8>, memref<2x2xi8>, memref<3xi8>)
// CHECK: memref.get_global @g : memref<4xi8>
// CHECK: memref.get_global @splat : memref<2x2xi8>
// CHECK: memref.get_global @uninit : memref<3xi8>
memref.global "private" constant @g : memref<4xi1> = dense<[true, false, true, true]>
memref.global "private" constant @splat : memref<2x2xi1> = dense<true>
memref.global "private" @uninit : memref<3xi1> = uninitialized
func.func @globals() -> (memref<4xi1>, memref<2x2xi1>, memref<3xi1>) {
  %0 = memref.get_global @g : memref<4xi1>
  %1 = memref.get_global @splat : memref<2x2xi1>
  %2 = memref.get_global @uninit : memref<3xi1>
  return %0, %1, %2 : memref<4xi1>, memref<2x2xi1>, memref<3xi1>
}

// -----

// A dense_resource i1 global (one byte per bool) becomes a dense i8 one.

// CHECK: memref.global "private" constant @res : memref<4xi8> = dense<[1, 0, 0, 1]>
// CHECK-LABEL: func.func @resource_global
// CHECK: memref.get_global @res : memref<4xi8>
memref.global "private" constant @res : memref<4xi1> = dense_resource<bools> 
func.func @resource_global() -> memref<4xi1> {
  %0 = memref.get_global @res : memref<4xi1>
  return %0 : memref<4xi1>
}
{-#
  dialect_resources: {
    builtin: {
      bools: "0x0100000001000001"
    }
  }
#-}

// -----

// scf iter_args, results and yields carry the widened memrefs.

// CHECK-LABEL: func.func @scf_loops
// CHECK-SAME: (%[[M:.+]]: memref<4xi8>, %[[P:.+]]: memref<4xi8>, %{{.+}}: i1) -> memref<4xi8>
// CHECK: %[[R:.+]] = scf.for %[[IV:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[IT:.+]] = %[[M]]) -> (memref<4xi8>)
// CHECK: %[[W:.+]] = memref.load %[[IT]][%[[IV]]] : memref<4xi8>
// CHECK: %[[X:.+]] = arith.trunci %[[W]] : i8 to i1
// CHECK: %[[E:.+]] = arith.extui %[[X]] : i1 to i8
// CHECK: memref.store %[[E]], %[[P]][%[[IV]]] : memref<4xi8>
// CHECK: scf.yield %[[P]] : memref<4xi8>
// CHECK: %[[S:.+]] = scf.if %{{.+}} -> (memref<4xi8>)
// CHECK: scf.yield %[[R]] : memref<4xi8>
// CHECK: scf.yield %[[M]] : memref<4xi8>
// CHECK: return %[[S]] : memref<4xi8>
func.func @scf_loops(%m: memref<4xi1>, %p: memref<4xi1>, %c: i1) -> memref<4xi1> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %m) -> (memref<4xi1>) {
    %v = memref.load %it[%i] : memref<4xi1>
    memref.store %v, %p[%i] : memref<4xi1>
    scf.yield %p : memref<4xi1>
  }
  %s = scf.if %c -> (memref<4xi1>) {
    scf.yield %r : memref<4xi1>
  } else {
    scf.yield %m : memref<4xi1>
  }
  return %s : memref<4xi1>
}

// -----

// cf successor operands, block arguments, affine loads/stores.

// CHECK-LABEL: func.func @cf_and_affine
// CHECK: cf.cond_br %{{.+}}, ^[[BB1:.+]](%{{.+}} : memref<4xi8>), ^{{.+}}
// CHECK: ^[[BB1]](%[[A:.+]]: memref<4xi8>):
// CHECK: %[[W:.+]] = affine.load %[[A]][2] : memref<4xi8>
// CHECK: %[[X:.+]] = arith.trunci %[[W]] : i8 to i1
// CHECK: %[[E:.+]] = arith.extui %[[X]] : i1 to i8
// CHECK: affine.store %[[E]], %[[A]][1] : memref<4xi8>
func.func @cf_and_affine(%m: memref<4xi1>, %c: i1) -> i1 {
  cf.cond_br %c, ^bb1(%m : memref<4xi1>), ^bb2
^bb1(%a: memref<4xi1>):
  %v = affine.load %a[2] : memref<4xi1>
  affine.store %v, %a[1] : memref<4xi1>
  cf.br ^bb2
^bb2:
  return %c : i1
}

// -----

// linalg.generic on memrefs: i8 payload arguments, truncated on use; values
// yielded into widened inits are extended.

// CHECK-LABEL: func.func @linalg_generic
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.+}}, %{{.+}} : memref<4xi8>, memref<4xf32>) outs(%{{.+}} : memref<4xi8>)
// CHECK: ^bb0(%[[IN:.+]]: i8, %[[F:.+]]: f32, %{{.+}}: i8):
// CHECK: %[[X:.+]] = arith.trunci %[[IN]] : i8 to i1
// CHECK: %[[G:.+]] = arith.cmpf ogt, %[[F]], %{{.+}} : f32
// CHECK: %[[R:.+]] = arith.andi %[[X]], %[[G]] : i1
// CHECK: %[[E:.+]] = arith.extui %[[R]] : i1 to i8
// CHECK: linalg.yield %[[E]] : i8
#map = affine_map<(d0) -> (d0)>
func.func @linalg_generic(%a: memref<4xi1>, %f: memref<4xf32>, %o: memref<4xi1>) {
  linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%a, %f : memref<4xi1>, memref<4xf32>) outs(%o : memref<4xi1>) {
  ^bb0(%x: i1, %y: f32, %out: i1):
    %z = arith.constant 0.0 : f32
    %g = arith.cmpf ogt, %y, %z : f32
    %r = arith.andi %x, %g : i1
    linalg.yield %r : i1
  }
  return
}

// -----

// Named linalg ops: linalg.fill gets an extended value.

// CHECK-LABEL: func.func @linalg_named
// CHECK-SAME: (%[[A:.+]]: memref<4xi8>, %[[O:.+]]: memref<4xi8>, %[[C:.+]]: i1)
// CHECK: linalg.copy ins(%[[A]] : memref<4xi8>) outs(%[[O]] : memref<4xi8>)
// CHECK: %[[E:.+]] = arith.extui %[[C]] : i1 to i8
// CHECK: linalg.fill ins(%[[E]] : i8) outs(%[[O]] : memref<4xi8>)
func.func @linalg_named(%a: memref<4xi1>, %o: memref<4xi1>, %c: i1) {
  linalg.copy ins(%a : memref<4xi1>) outs(%o : memref<4xi1>)
  linalg.fill ins(%c : i1) outs(%o : memref<4xi1>)
  return
}

// -----

// Bufferization leftovers: the tensor side keeps i1 via tensor trunci/extui.

// CHECK-LABEL: func.func @to_tensor_buffer
// CHECK-SAME: (%[[M:.+]]: memref<4xi8>, %[[T:.+]]: tensor<4xi1>) -> (tensor<4xi1>, memref<4xi8>)
// CHECK: %[[T8:.+]] = bufferization.to_tensor %[[M]] : memref<4xi8> to tensor<4xi8>
// CHECK: %[[T1:.+]] = arith.trunci %[[T8]] : tensor<4xi8> to tensor<4xi1>
// CHECK: %[[E:.+]] = arith.extui %[[T]] : tensor<4xi1> to tensor<4xi8>
// CHECK: %[[B:.+]] = bufferization.to_buffer %[[E]] : tensor<4xi8> to memref<4xi8>
// CHECK: return %[[T1]], %[[B]] : tensor<4xi1>, memref<4xi8>
func.func @to_tensor_buffer(%m: memref<4xi1>, %t: tensor<4xi1>) -> (tensor<4xi1>, memref<4xi1>) {
  %0 = bufferization.to_tensor %m : memref<4xi1> to tensor<4xi1>
  %1 = bufferization.to_buffer %t : tensor<4xi1> to memref<4xi1>
  return %0, %1 : tensor<4xi1>, memref<4xi1>
}

// -----

// Unranked memrefs.

// CHECK-LABEL: func.func @unranked
// CHECK-SAME: (%[[M:.+]]: memref<4xi8>) -> memref<*xi8>
// CHECK: %[[U:.+]] = memref.cast %[[M]] : memref<4xi8> to memref<*xi8>
// CHECK: return %[[U]] : memref<*xi8>
func.func @unranked(%m: memref<4xi1>) -> memref<*xi1> {
  %u = memref.cast %m : memref<4xi1> to memref<*xi1>
  return %u : memref<*xi1>
}

// -----

// A reshape by a shape memref (dynamic tensor.reshape) keeps its i64 shape.

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[M:.+]]: memref<?xi8>, %[[S:.+]]: memref<2xi64>) -> memref<?x?xi8>
// CHECK: %[[R:.+]] = memref.reshape %[[M]](%[[S]]) : (memref<?xi8>, memref<2xi64>) -> memref<?x?xi8>
// CHECK: return %[[R]] : memref<?x?xi8>
func.func @reshape(%m: memref<?xi1>, %s: memref<2xi64>) -> memref<?x?xi1> {
  %r = memref.reshape %m(%s) : (memref<?xi1>, memref<2xi64>) -> memref<?x?xi1>
  return %r : memref<?x?xi1>
}

// -----

// Nothing else changes: i1 tensors and scalars, memrefs of other types.

// CHECK-LABEL: func.func @untouched
// CHECK-SAME: (%{{.+}}: memref<4xi8>, %{{.+}}: tensor<4xi1>, %{{.+}}: index, %{{.+}}: i1) -> i8
// CHECK-NOT: arith.trunci
// CHECK-NOT: arith.extui
func.func @untouched(%m: memref<4xi8>, %t: tensor<4xi1>, %i: index, %c: i1) -> i8 {
  %x = memref.load %m[%i] : memref<4xi8>
  return %x : i8
}
