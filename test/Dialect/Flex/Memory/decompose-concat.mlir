// RUN: flex-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(flex-decompose-concat))' | FileCheck %s
// RUN: flex-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(flex-decompose-concat),eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},cse,canonicalize)' | FileCheck %s --check-prefix=BUF

// flex-decompose-concat: a tensor.concat becomes a tensor.empty of its
// result's shape and one tensor.insert_slice per operand.

// A KV cache grown by one position (dynamic length) and returned: the
// concatenation's empty is the out-param after eliminate-empty-tensors, so
// the past and the new entry are copied once each, straight into it, and
// nothing is copied after.
// CHECK-LABEL: func.func @grow_cache
// CHECK-SAME:      (%[[PAST:.*]]: tensor<4x2x?x32xf32>, %[[NEW:.*]]: tensor<4x2x1x32xf32>
// CHECK:         %[[D:.*]] = tensor.dim %[[PAST]], %c2
// CHECK:         %[[N:.*]] = affine.apply #{{.*}}()[%[[D]]]
// CHECK:         %[[E:.*]] = tensor.empty(%[[N]]) : tensor<4x2x?x32xf32>
// CHECK:         %[[A:.*]] = tensor.insert_slice %[[PAST]] into %[[E]][0, 0, 0, 0] [4, 2, %[[D]], 32] [1, 1, 1, 1]
// CHECK:         %[[B:.*]] = tensor.insert_slice %[[NEW]] into %[[A]][0, 0, %[[D]], 0] [4, 2, 1, 32] [1, 1, 1, 1]
// CHECK:         bufferization.materialize_in_destination %[[B]] in
// CHECK-NOT:     tensor.concat
// BUF-LABEL: func.func @grow_cache
// BUF-SAME:      (%[[PAST:.*]]: memref<4x2x?x32xf32>, %[[NEW:.*]]: memref<4x2x1x32xf32>, %[[OUT:.*]]: memref<4x2x?x32xf32>)
// BUF-NOT:       memref.alloc
// BUF:           %[[S0:.*]] = memref.subview %[[OUT]][0, 0, 0, 0]
// BUF:           memref.copy %[[PAST]], %[[S0]]
// BUF:           %[[S1:.*]] = memref.subview %[[OUT]][0, 0, %{{.*}}, 0] [4, 2, 1, 32]
// BUF:           memref.copy %[[NEW]], %[[S1]]
// BUF-NEXT:      return
func.func @grow_cache(%past: tensor<4x2x?x32xf32>, %new: tensor<4x2x1x32xf32>, %out: memref<4x2x?x32xf32>) {
  %c = tensor.concat dim(2) %past, %new : (tensor<4x2x?x32xf32>, tensor<4x2x1x32xf32>) -> tensor<4x2x?x32xf32>
  bufferization.materialize_in_destination %c in restrict writable %out : (tensor<4x2x?x32xf32>, memref<4x2x?x32xf32>) -> ()
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// An operand computed by an elementwise op into its own empty: after
// eliminate-empty-tensors the op writes its slice of the result in place.
// CHECK-LABEL: func.func @producer_writes_its_slice
// CHECK:         tensor.empty() : tensor<5x8xf32>
// CHECK:         tensor.insert_slice %arg0 into %{{.*}}[0, 0] [3, 8] [1, 1]
// CHECK:         tensor.insert_slice %{{.*}} into %{{.*}}[3, 0] [2, 8] [1, 1]
// BUF-LABEL: func.func @producer_writes_its_slice
// BUF-SAME:      %[[OUT:[^:]*]]: memref<5x8xf32>)
// BUF-NOT:       memref.alloc
// BUF:           %[[S:.*]] = memref.subview %[[OUT]][3, 0] [2, 8] [1, 1]
// BUF:           linalg.generic {{.*}} outs(%[[S]] :
// BUF-NOT:       memref.copy
// BUF:           return
func.func @producer_writes_its_slice(%a: tensor<3x8xf32>, %b: tensor<2x8xf32>, %out: memref<5x8xf32>) {
  %e = tensor.empty() : tensor<2x8xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<2x8xf32>
  %c = tensor.concat dim(0) %a, %neg : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<5x8xf32>
  bufferization.materialize_in_destination %c in restrict writable %out : (tensor<5x8xf32>, memref<5x8xf32>) -> ()
  return
}

// -----

// A concatenation read again (the attention reads the grown cache): the
// inserts still go into the out-param, and the reader reads it there.
// BUF-LABEL: func.func @read_after
// BUF-SAME:      %[[OUT:[^:]*]]: memref<2x4xf32>, %[[SUM:[^:]*]]: memref<2x4xf32>)
// BUF-NOT:       memref.alloc
// BUF:           linalg.add ins(%[[OUT]], %[[OUT]] : {{.*}}) outs(%[[SUM]] :
func.func @read_after(%a: tensor<1x4xf32>, %b: tensor<1x4xf32>, %out: memref<2x4xf32>, %sum: memref<2x4xf32>) {
  %c = tensor.concat dim(0) %a, %b : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %s = linalg.add ins(%c, %c : tensor<2x4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  bufferization.materialize_in_destination %c in restrict writable %out : (tensor<2x4xf32>, memref<2x4xf32>) -> ()
  bufferization.materialize_in_destination %s in restrict writable %sum : (tensor<2x4xf32>, memref<2x4xf32>) -> ()
  return
}
