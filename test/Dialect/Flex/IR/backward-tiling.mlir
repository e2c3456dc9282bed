// RUN: flex-opt %s --transform-interpreter -split-input-file -verify-diagnostics | FileCheck %s
// RUN: flex-opt %s --transform-interpreter -split-input-file -verify-diagnostics \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --flex-to-loops | FileCheck %s --check-prefix=LOOPS

// Tiling flex.attention_backward over its (B, Hkv) domain: a tile takes
// the G = Hq / Hkv query heads of its kv heads (query-side operands at head
// hk * G), its own key/value/grad_key/grad_value slices and the whole
// capture gradient; it carries the global offsets (b, hk * G) and the GQA
// ratio so that the regions see global indices.

// CHECK-LABEL: func.func @tile_gqa
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x4x16x8xf32>, %[[K:[^:]+]]: tensor<2x2x16x8xf32>, %[[V:[^:]+]]: tensor<2x2x16x4xf32>, %[[O:[^:]+]]: tensor<2x4x16x4xf32>, %[[L:[^:]+]]: tensor<2x4x16xf32>, %[[DO:[^:]+]]: tensor<2x4x16x4xf32>, %[[BIAS:[^:]+]]: tensor<4x16xf32>, %[[DQ0:[^:]+]]: tensor<2x4x16x8xf32>, %[[DK0:[^:]+]]: tensor<2x2x16x8xf32>, %[[DV0:[^:]+]]: tensor<2x2x16x4xf32>, %[[DB0:[^:]+]]: tensor<4x16xf32>)
// CHECK: %[[R:.+]]:4 = scf.for %[[B:[^ ]+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[DQB:.+]] = %[[DQ0]], %[[DKB:.+]] = %[[DK0]], %[[DVB:.+]] = %[[DV0]], %[[DBB:.+]] = %[[DB0]])
// CHECK: scf.for %[[HK:[^ ]+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[DQH:.+]] = %[[DQB]], %[[DKH:.+]] = %[[DKB]], %[[DVH:.+]] = %[[DVB]], %[[DBH:.+]] = %[[DBB]])
// CHECK: %[[H:.+]] = arith.muli %[[HK]], %{{.+}} : index
// CHECK-DAG: %[[QS:.+]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], 0, 0] [1, 2, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[KS:.+]] = tensor.extract_slice %[[K]][%[[B]], %[[HK]], 0, 0] [1, 1, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[VS:.+]] = tensor.extract_slice %[[V]][%[[B]], %[[HK]], 0, 0] [1, 1, 16, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[OS:.+]] = tensor.extract_slice %[[O]][%[[B]], %[[H]], 0, 0] [1, 2, 16, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[LS:.+]] = tensor.extract_slice %[[L]][%[[B]], %[[H]], 0] [1, 2, 16] [1, 1, 1]
// CHECK-DAG: %[[DOS:.+]] = tensor.extract_slice %[[DO]][%[[B]], %[[H]], 0, 0] [1, 2, 16, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[DQS:.+]] = tensor.extract_slice %[[DQH]][%[[B]], %[[H]], 0, 0] [1, 2, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[DKS:.+]] = tensor.extract_slice %[[DKH]][%[[B]], %[[HK]], 0, 0] [1, 1, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[DVS:.+]] = tensor.extract_slice %[[DVH]][%[[B]], %[[HK]], 0, 0] [1, 1, 16, 4] [1, 1, 1, 1]
// CHECK: %[[T:.+]]:4 = flex.attention_backward ins(%[[QS]], %[[KS]], %[[VS]], %[[OS]], %[[LS]], %[[DOS]] : tensor<1x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16xf32>, tensor<1x2x16x4xf32>)
// CHECK-SAME: captures(%[[BIAS]] : tensor<4x16xf32>) offsets(%[[B]], %[[H]])
// CHECK-SAME: outs(%[[DQS]], %[[DKS]], %[[DVS]] : tensor<1x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x4xf32>)
// CHECK-SAME: capture_grads(%[[DBH]] : tensor<4x16xf32>) grad_captures [0] scale(0.353553385) {kv_group_size = 2 : i64} score_mod {
// CHECK: } joint {
// CHECK: } -> tensor<1x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x4xf32>, tensor<4x16xf32>
// CHECK-DAG: tensor.insert_slice %[[T]]#0 into %[[DQH]][%[[B]], %{{.+}}, 0, 0] [1, 2, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: tensor.insert_slice %[[T]]#1 into %[[DKH]][%[[B]], %[[HK]], 0, 0] [1, 1, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: tensor.insert_slice %[[T]]#2 into %[[DVH]][%[[B]], %[[HK]], 0, 0] [1, 1, 16, 4] [1, 1, 1, 1]
// CHECK-DAG: tensor.insert_slice %[[T]]#3 into %[[DBH]][0, 0] [4, 16] [1, 1]
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3

// The lowered tile: global query head = local head + tile offset, used by
// score_mod and the capture-gradient scatter.
// LOOPS-LABEL: func.func @tile_gqa
// LOOPS: scf.for %[[B:[^ ]+]] =
// LOOPS: scf.for %[[HK:[^ ]+]] =
// LOOPS: %[[H0:.+]] = arith.muli %[[HK]], %{{.+}} : index
// LOOPS: scf.for %[[TB:[^ ]+]] =
// LOOPS: scf.for %[[THK:[^ ]+]] =
// LOOPS: scf.for %[[G:[^ ]+]] =
// LOOPS: %[[TH0:.+]] = arith.muli %[[THK]], %{{.+}} : index
// LOOPS: %[[TH:.+]] = arith.addi %[[TH0]], %[[G]] : index
// LOOPS: %[[GH:.+]] = arith.addi %[[TH]], %[[H0]] : index
// LOOPS: memref.load %{{.+}}[%[[GH]], %{{.+}}] : memref<4x16xf32>
// LOOPS: memref.load %[[DB:.+]][%[[GH]], %{{.+}}] : memref<4x16xf32>
// LOOPS: memref.store %{{.+}}, %[[DB]][%[[GH]], %{{.+}}] : memref<4x16xf32>
// LOOPS-NOT: flex.attention_backward ins
func.func @tile_gqa(%q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>, %v: tensor<2x2x16x4xf32>, %o: tensor<2x4x16x4xf32>, %lse: tensor<2x4x16xf32>, %do: tensor<2x4x16x4xf32>, %bias: tensor<4x16xf32>, %dq0: tensor<2x4x16x8xf32>, %dk0: tensor<2x2x16x8xf32>, %dv0: tensor<2x2x16x4xf32>, %db0: tensor<4x16xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x4xf32>, tensor<4x16xf32>) {
  %r:4 = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x4xf32>, tensor<2x4x16x4xf32>, tensor<2x4x16xf32>, tensor<2x4x16x4xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x4xf32>)
      capture_grads(%db0 : tensor<4x16xf32>) grad_captures [0]
      scale(0.353553385)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h, %n] : tensor<4x16xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        flex.yield %g, %g, %h, %n : f32, f32, index, index
      } -> tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x4xf32>, tensor<4x16xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x4xf32>, tensor<4x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention_backward"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops:2 = transform.structured.tile_using_for %0 tile_sizes [1, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}
