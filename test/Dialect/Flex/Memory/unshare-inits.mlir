// RUN: flex-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(flex-unshare-inits))' | FileCheck %s

// flex-unshare-inits: a zero fill or tensor.empty shared by several
// destination-style ops is cloned right before each of them.

// Two products share one zero-filled init: each gets its own empty + fill
// just before it, and the shared ones are gone.
// CHECK-LABEL: func.func @shared_fill
// CHECK-NEXT:    %[[C:.*]] = arith.constant 0.0
// CHECK-NEXT:    %[[E0:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT:    %[[Z0:.*]] = linalg.fill ins(%[[C]] : f32) outs(%[[E0]] : tensor<4x4xf32>)
// CHECK-NEXT:    %[[A:.*]] = linalg.matmul ins(%arg0, %arg1 : {{.*}}) outs(%[[Z0]] : tensor<4x4xf32>)
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT:    %[[Z1:.*]] = linalg.fill ins(%[[C]] : f32) outs(%[[E1]] : tensor<4x4xf32>)
// CHECK-NEXT:    %[[B:.*]] = linalg.matmul ins(%[[A]], %arg1 : {{.*}}) outs(%[[Z1]] : tensor<4x4xf32>)
// CHECK-NEXT:    return %[[B]]
func.func @shared_fill(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = linalg.matmul ins(%a, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// A tensor.empty shared by two elementwise ops: one clone before each. A
// fill used once (and its empty) stays where it is.
// CHECK-LABEL: func.func @shared_empty
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill {{.*}} outs(%[[E]] : tensor<8xf32>)
// CHECK-NEXT:    %[[E0:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    %[[G:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8xf32>) outs(%[[E0]] : tensor<8xf32>)
// CHECK:         %[[E1:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[G]], %[[F]] : tensor<8xf32>, tensor<8xf32>) outs(%[[E1]] : tensor<8xf32>)
func.func @shared_empty(%x: tensor<8xf32>) -> tensor<8xf32> {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %ones = linalg.fill ins(%one : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.negf %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %ones : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %h : tensor<8xf32>
}

// -----

// An init shared with an op inside a loop body is not cloned into the loop
// (that would allocate per iteration); the use in the function body still
// gets its own.
// CHECK-LABEL: func.func @loop_user
// CHECK:         %[[Z:.*]] = linalg.fill
// CHECK:         scf.for
// CHECK:           linalg.matmul {{.*}} outs(%[[Z]] : tensor<4x4xf32>)
// CHECK:         }
// CHECK-NEXT:    tensor.empty
// CHECK-NEXT:    %[[Z1:.*]] = linalg.fill
// CHECK-NEXT:    linalg.matmul {{.*}} outs(%[[Z1]] : tensor<4x4xf32>)
func.func @loop_user(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %n: index) -> tensor<4x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%f0 : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<4x4xf32>) {
    %m = linalg.matmul ins(%acc, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
    scf.yield %m : tensor<4x4xf32>
  }
  %b = linalg.matmul ins(%r, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}
