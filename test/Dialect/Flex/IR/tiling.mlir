// RUN: flex-opt %s --transform-interpreter -split-input-file -verify-diagnostics | FileCheck %s
// RUN: flex-opt %s --transform-interpreter -split-input-file -verify-diagnostics \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --flex-to-loops | FileCheck %s --check-prefix=LOOPS

// Tiling flex.attention through its TilingInterface with the upstream
// transform ops. Tiles of (B, Hq, M) slice q/out/lse/max; K and V keep all
// heads (GQA maps a global query head h to h / G) and their whole N and E;
// the tiled op carries the tile offsets and the GQA ratio. The LOOPS run
// bufferizes the tiled IR and lowers it with flex-to-loops.

// LOOPS-LABEL: func.func @tile_bhm_gqa
// LOOPS-SAME: (%[[Q:[^:]+]]: memref<2x8x16x8xf32>, %[[K:[^:]+]]: memref<2x2x32x8xf32>
// LOOPS: scf.for %[[B:[^ ]+]] =
// LOOPS: scf.for %[[H:[^ ]+]] =
// LOOPS: scf.for %[[M:[^ ]+]] =
// LOOPS-DAG: %[[QS:.+]] = memref.subview %[[Q]][%[[B]], %[[H]], %[[M]], 0] [1, 2, 8, 8]
// LOOPS-DAG: %[[KS:.+]] = memref.subview %[[K]][%[[B]], 0, 0, 0] [1, 2, 32, 8]
// LOOPS: scf.for %[[TB:[^ ]+]] =
// LOOPS: scf.for %[[TH:[^ ]+]] =
// LOOPS: scf.for %[[TM:[^ ]+]] =
// LOOPS: %[[GH:.+]] = arith.addi %[[TH]], %[[H]] : index
// LOOPS-NEXT: %[[G:.+]] = arith.constant 4 : index
// LOOPS-NEXT: %[[KH:.+]] = arith.divui %[[GH]], %[[G]] : index
// LOOPS: memref.load %[[QS]][%[[TB]], %[[TH]], %[[TM]], %{{.+}}]
// LOOPS: memref.load %[[KS]][%{{.+}}, %[[KH]], %{{.+}}, %{{.+}}]
// LOOPS-DAG: arith.addi %[[TB]], %[[B]] : index
// LOOPS-DAG: %[[GH2:.+]] = arith.addi %[[TH]], %[[H]] : index
// LOOPS-DAG: %[[GM:.+]] = arith.addi %[[TM]], %[[M]] : index
// LOOPS: memref.load %{{.+}}[%[[GH2]]] : memref<8xf32>
// LOOPS: arith.cmpi sge, %[[GM]], %{{.+}} : index
// LOOPS-NOT: flex.attention ins
// LOOPS-LABEL: func.func @tile_ev
// LOOPS-NOT: flex.attention ins
// LOOPS-LABEL: func.func @tile_kv_broadcast
// LOOPS-NOT: flex.attention ins
// LOOPS-LABEL: func.func @tile_twice
// LOOPS-NOT: flex.attention ins
// LOOPS-LABEL: func.func @tile_forall
// LOOPS: scf.forall
// LOOPS-NOT: flex.attention ins
// LOOPS-LABEL: func.func @tile_dynamic
// LOOPS: memref.dim
// LOOPS-NOT: flex.attention ins

// CHECK-LABEL: func.func @tile_bhm_gqa
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x8x16x8xf32>, %[[K:[^:]+]]: tensor<2x2x32x8xf32>, %[[V:[^:]+]]: tensor<2x2x32x4xf32>, %[[BIAS:[^:]+]]: tensor<8xf32>)
// CHECK-DAG: %[[O:.+]] = tensor.empty() : tensor<2x8x16x4xf32>
// CHECK-DAG: %[[L:.+]] = tensor.empty() : tensor<2x8x16xf32>
// CHECK-DAG: %[[X:.+]] = tensor.empty() : tensor<2x8x16xf32>
// CHECK: %[[R:.+]]:3 = scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OB:.+]] = %[[O]], %[[LB:.+]] = %[[L]], %[[XB:.+]] = %[[X]])
// CHECK: scf.for %[[H:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OH:.+]] = %[[OB]], %[[LH:.+]] = %[[LB]], %[[XH:.+]] = %[[XB]])
// CHECK: scf.for %[[M:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OM:.+]] = %[[OH]], %[[LM:.+]] = %[[LH]], %[[XM:.+]] = %[[XH]])
// CHECK-DAG: %[[QS:.+]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[M]], 0] [1, 2, 8, 8] [1, 1, 1, 1] : tensor<2x8x16x8xf32> to tensor<1x2x8x8xf32>
// CHECK-DAG: %[[KS:.+]] = tensor.extract_slice %[[K]][%[[B]], 0, 0, 0] [1, 2, 32, 8] [1, 1, 1, 1] : tensor<2x2x32x8xf32> to tensor<1x2x32x8xf32>
// CHECK-DAG: %[[VS:.+]] = tensor.extract_slice %[[V]][%[[B]], 0, 0, 0] [1, 2, 32, 4] [1, 1, 1, 1] : tensor<2x2x32x4xf32> to tensor<1x2x32x4xf32>
// CHECK-DAG: %[[OS:.+]] = tensor.extract_slice %[[OM]][%[[B]], %[[H]], %[[M]], 0] [1, 2, 8, 4] [1, 1, 1, 1] : tensor<2x8x16x4xf32> to tensor<1x2x8x4xf32>
// CHECK-DAG: %[[LS:.+]] = tensor.extract_slice %[[LM]][%[[B]], %[[H]], %[[M]]] [1, 2, 8] [1, 1, 1] : tensor<2x8x16xf32> to tensor<1x2x8xf32>
// CHECK-DAG: %[[XS:.+]] = tensor.extract_slice %[[XM]][%[[B]], %[[H]], %[[M]]] [1, 2, 8] [1, 1, 1] : tensor<2x8x16xf32> to tensor<1x2x8xf32>
// CHECK: %[[T:.+]]:3 = flex.attention ins(%[[QS]], %[[KS]], %[[VS]] : tensor<1x2x8x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x4xf32>)
// CHECK-SAME: captures(%[[BIAS]] : tensor<8xf32>) offsets(%[[B]], %[[H]], %[[M]])
// CHECK-SAME: outs(%[[OS]] : tensor<1x2x8x4xf32>) logsumexp(%[[LS]] : tensor<1x2x8xf32>) max_scores(%[[XS]] : tensor<1x2x8xf32>)
// CHECK-SAME: scale(1.250000e-01) {kv_group_size = 4 : i64} score_mod {
// CHECK: tensor.extract %[[BIAS]]
// CHECK: } mask_mod {
// CHECK: arith.cmpi sge
// CHECK: } -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>
// CHECK-DAG: tensor.insert_slice %[[T]]#0 into %[[OM]][%[[B]], %[[H]], %[[M]], 0] [1, 2, 8, 4] [1, 1, 1, 1]
// CHECK-DAG: tensor.insert_slice %[[T]]#1 into %[[LM]][%[[B]], %[[H]], %[[M]]] [1, 2, 8] [1, 1, 1]
// CHECK-DAG: tensor.insert_slice %[[T]]#2 into %[[XM]][%[[B]], %[[H]], %[[M]]] [1, 2, 8] [1, 1, 1]
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @tile_bhm_gqa(%q: tensor<2x8x16x8xf32>, %k: tensor<2x2x32x8xf32>, %v: tensor<2x2x32x4xf32>, %bias: tensor<8xf32>) -> (tensor<2x8x16x4xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %o = tensor.empty() : tensor<2x8x16x4xf32>
  %l = tensor.empty() : tensor<2x8x16xf32>
  %x = tensor.empty() : tensor<2x8x16xf32>
  %r:3 = flex.attention ins(%q, %k, %v : tensor<2x8x16x8xf32>, tensor<2x2x32x8xf32>, tensor<2x2x32x4xf32>)
      captures(%bias : tensor<8xf32>)
      outs(%o : tensor<2x8x16x4xf32>) logsumexp(%l : tensor<2x8x16xf32>) max_scores(%x : tensor<2x8x16xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %e = tensor.extract %bias[%h] : tensor<8xf32>
        %t = arith.addf %s, %e : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<2x8x16x4xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
  return %r#0, %r#1, %r#2 : tensor<2x8x16x4xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops:3 = transform.structured.tile_using_for %0 tile_sizes [1, 2, 8, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Tiling Ev only: V and the output are sliced along Ev; q, K and the whole
// contraction dimension E stay whole; offsets are zero.
// CHECK-LABEL: func.func @tile_ev
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x2x16x8xf32>, %[[K:[^:]+]]: tensor<1x2x32x8xf32>, %[[V:[^:]+]]: tensor<1x2x32x12xf32>, %[[O:[^:]+]]: tensor<1x2x16x12xf32>)
// CHECK: scf.for %[[E:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OE:.+]] = %[[O]])
// CHECK: %[[MIN:.+]] = affine.min #{{.+}}(%[[E]])
// CHECK-DAG: %[[QS:.+]] = tensor.extract_slice %[[Q]][0, 0, 0, 0] [1, 2, 16, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[KS:.+]] = tensor.extract_slice %[[K]][0, 0, 0, 0] [1, 2, 32, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[VS:.+]] = tensor.extract_slice %[[V]][0, 0, 0, %[[E]]] [1, 2, 32, %[[MIN]]] [1, 1, 1, 1] : tensor<1x2x32x12xf32> to tensor<1x2x32x?xf32>
// CHECK-DAG: %[[OS:.+]] = tensor.extract_slice %[[OE]][0, 0, 0, %[[E]]] [1, 2, 16, %[[MIN]]] [1, 1, 1, 1] : tensor<1x2x16x12xf32> to tensor<1x2x16x?xf32>
// CHECK: %[[T:.+]] = flex.attention ins(%[[QS]], %[[KS]], %[[VS]] : tensor<1x2x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x?xf32>) offsets(%{{.+}}, %{{.+}}, %{{.+}}) outs(%[[OS]] : tensor<1x2x16x?xf32>) scale(1.250000e-01) {kv_group_size = 1 : i64} -> tensor<1x2x16x?xf32>
// CHECK: tensor.insert_slice %[[T]] into %[[OE]][0, 0, 0, %[[E]]] [1, 2, 16, %[[MIN]]] [1, 1, 1, 1]
func.func @tile_ev(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x12xf32>, %o: tensor<1x2x16x12xf32>) -> tensor<1x2x16x12xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x12xf32>)
      outs(%o : tensor<1x2x16x12xf32>) scale(0.125) -> tensor<1x2x16x12xf32>
  return %r : tensor<1x2x16x12xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops = transform.structured.tile_using_for %0 tile_sizes [0, 0, 0, 0, 8] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Key/value batch 1 broadcast: K/V slices stay at batch 0, size 1.
// CHECK-LABEL: func.func @tile_kv_broadcast
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<4x2x16x8xf32>, %[[K:[^:]+]]: tensor<1x2x16x8xf32>, %[[V:[^:]+]]: tensor<1x2x16x8xf32>
// CHECK: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK-DAG: tensor.extract_slice %[[Q]][%[[B]], 0, 0, 0] [2, 2, 16, 8]
// CHECK-DAG: %[[KS:.+]] = tensor.extract_slice %[[K]][0, 0, 0, 0] [1, 2, 16, 8] [1, 1, 1, 1] : tensor<1x2x16x8xf32> to tensor<1x2x16x8xf32>
// CHECK-DAG: %[[VS:.+]] = tensor.extract_slice %[[V]][0, 0, 0, 0] [1, 2, 16, 8] [1, 1, 1, 1] : tensor<1x2x16x8xf32> to tensor<1x2x16x8xf32>
// CHECK: flex.attention ins(%{{.+}}, %[[KS]], %[[VS]] : tensor<2x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) offsets(%[[B]], %{{.+}}, %{{.+}})
func.func @tile_kv_broadcast(%q: tensor<4x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<4x2x16x8xf32>) -> tensor<4x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<4x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<4x2x16x8xf32>) scale(0.125) -> tensor<4x2x16x8xf32>
  return %r : tensor<4x2x16x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops = transform.structured.tile_using_for %0 tile_sizes [2, 0, 0, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Tiling a tile: the new offsets are the old ones plus the inner ivs, and
// kv_group_size is kept.
// CHECK-LABEL: func.func @tile_twice
// CHECK: scf.for %[[M1:[^ ]+]] =
// CHECK: scf.for %[[M2:[^ ]+]] =
// CHECK-DAG: tensor.extract_slice %{{.+}}[0, 0, %[[M2]], 0] [1, 2, 4, 8] [1, 1, 1, 1] : tensor<1x2x8x8xf32> to tensor<1x2x4x8xf32>
// CHECK-DAG: %[[B2:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK-DAG: %[[H2:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK-DAG: %[[MM:.+]] = arith.addi %[[M1]], %[[M2]] : index
// CHECK: flex.attention ins(%{{.+}} : tensor<1x2x4x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) offsets(%[[B2]], %[[H2]], %[[MM]]) outs(%{{.+}} : tensor<1x2x4x8xf32>) scale(1.250000e-01) {kv_group_size = 2 : i64}
// CHECK-NOT: = flex.attention
func.func @tile_twice(%q: tensor<1x2x16x8xf32>, %k: tensor<1x1x16x8xf32>, %v: tensor<1x1x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %l1 = transform.structured.tile_using_for %0 tile_sizes [0, 0, 8, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %2, %l2 = transform.structured.tile_using_for %1 tile_sizes [0, 0, 4, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// scf.forall tiling uses the same interface.
// CHECK-DAG: #[[$MAP2:.+]] = affine_map<(d0) -> (d0 * 2)>
// CHECK-DAG: #[[$MAP8:.+]] = affine_map<(d0) -> (d0 * 8)>
// CHECK-LABEL: func.func @tile_forall
// CHECK: scf.forall (%[[I:.+]], %[[J:.+]]) in (2, 2) shared_outs(%[[OS:.+]] = %{{.+}}, %[[LS:.+]] = %{{.+}})
// CHECK-DAG: %[[H:.+]] = affine.apply #[[$MAP2]](%[[I]])
// CHECK-DAG: %[[M:.+]] = affine.apply #[[$MAP8]](%[[J]])
// CHECK: %[[T:.+]]:2 = flex.attention ins({{.+}} : tensor<1x2x8x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) offsets(%{{.+}}, %[[H]], %[[M]]) outs(%{{.+}} : tensor<1x2x8x8xf32>) logsumexp(%{{.+}} : tensor<1x2x8xf32>) scale(1.250000e-01) {kv_group_size = 2 : i64}
// CHECK: scf.forall.in_parallel
// CHECK-DAG: tensor.parallel_insert_slice %[[T]]#0 into %[[OS]][0, %[[H]], %[[M]], 0] [1, 2, 8, 8]
// CHECK-DAG: tensor.parallel_insert_slice %[[T]]#1 into %[[LS]][0, %[[H]], %[[M]]] [1, 2, 8]
func.func @tile_forall(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x4x16x8xf32>, %l: tensor<1x4x16xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x4x16x8xf32>) logsumexp(%l : tensor<1x4x16xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  return %r#0, %r#1 : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops = transform.structured.tile_using_forall %0 tile_sizes [0, 2, 8, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Dynamic shapes: untiled N is recognized as whole even though it is a
// `tensor.dim`; a dynamic key batch selects row 0 when it is 1 at run time.
// CHECK-LABEL: func.func @tile_dynamic
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x?x?xf32>, %[[K:[^:]+]]: tensor<?x?x?x?xf32>
// CHECK: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK: scf.for %[[M:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK-DAG: %[[ONE:.+]] = arith.cmpi eq, %{{.+}}, %{{.+}} : index
// CHECK-DAG: %[[KB:.+]] = arith.select %[[ONE]], %{{.+}}, %[[B]] : index
// CHECK: tensor.extract_slice %[[K]][%[[KB]], 0, 0, 0]
// CHECK: flex.attention
// CHECK-SAME: offsets(%[[B]], %{{.+}}, %[[M]])
// CHECK-NOT: kv_group_size
// CHECK-SAME: -> tensor<1x?x?x?xf32>
func.func @tile_dynamic(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>, %o: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      outs(%o : tensor<?x?x?x?xf32>) scale(0.125) -> tensor<?x?x?x?xf32>
  return %r : tensor<?x?x?x?xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops:2 = transform.structured.tile_using_for %0 tile_sizes [1, 0, 8, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Dynamic head counts without kv_group_size: the GQA ratio is only known at
// run time, so the head dimension cannot be tiled.
func.func @tile_dynamic_heads(%q: tensor<1x?x16x8xf32>, %k: tensor<1x?x16x8xf32>, %v: tensor<1x?x16x8xf32>, %o: tensor<1x?x16x8xf32>) -> tensor<1x?x16x8xf32> {
  // expected-error @+3 {{cannot tile the head dimension when the query or key/value head count is dynamic and kv_group_size is not set}}
  // expected-error @+2 {{to tile operation}}
  // expected-error @+1 {{failed to generate tiling loops}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x?x16x8xf32>, tensor<1x?x16x8xf32>, tensor<1x?x16x8xf32>)
      outs(%o : tensor<1x?x16x8xf32>) scale(0.125) -> tensor<1x?x16x8xf32>
  return %r : tensor<1x?x16x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops = transform.structured.tile_using_for %0 tile_sizes [0, 1, 0, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// N is the softmax reduction: tiling it is refused with a diagnostic.
func.func @tile_n(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+3 {{cannot tile the kv (reduction) dimension N; tile sizes for N must be 0}}
  // expected-error @+2 {{to tile operation}}
  // expected-error @+1 {{failed to generate tiling loops}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops:2 = transform.structured.tile_using_for %0 tile_sizes [0, 0, 8, 16, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Block tensors are passed whole to every tile; the tile's offsets make the
// block lookup use global rows and heads: qb = (m_tile + M0) / 32.
// CHECK-LABEL: func.func @tile_block_tensors
// CHECK-SAME: %[[N:[^:]+]]: tensor<1x2x2xi32>, %[[I:[^:]+]]: tensor<1x2x2x2xi32>)
// CHECK: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK: scf.for %[[H:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK: scf.for %[[M:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK: flex.attention ins({{.+}} : tensor<1x1x32x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) offsets(%[[B]], %[[H]], %[[M]]) kv_blocks(%[[N]], %[[I]] : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32, 32] outs(
// LOOPS-LABEL: func.func @tile_block_tensors
// LOOPS-SAME: %[[N:[^:]+]]: memref<1x2x2xi32>, %[[I:[^:]+]]: memref<1x2x2x2xi32>)
// LOOPS: scf.for %[[B:[^ ]+]] =
// LOOPS: scf.for %[[H:[^ ]+]] =
// LOOPS: scf.for %[[M:[^ ]+]] =
// LOOPS: scf.for %[[TB:[^ ]+]] =
// LOOPS: scf.for %[[TH:[^ ]+]] =
// LOOPS: scf.for %[[TM:[^ ]+]] =
// LOOPS: arith.addi %[[TB]], %[[B]] : index
// LOOPS-NEXT: %[[GH:.+]] = arith.addi %[[TH]], %[[H]] : index
// LOOPS-NEXT: %[[GM:.+]] = arith.addi %[[TM]], %[[M]] : index
// LOOPS: %[[QB:.+]] = arith.divui %[[GM]], %{{.+}} : index
// LOOPS: memref.load %[[N]][%{{.+}}, %[[GH]], %[[QB]]] : memref<1x2x2xi32>
// LOOPS: memref.load %[[I]][%{{.+}}, %[[GH]], %[[QB]], %{{.+}}] : memref<1x2x2x2xi32>
// LOOPS-NOT: flex.attention ins
func.func @tile_block_tensors(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) -> tensor<1x2x64x8xf32> {
  %o = tensor.empty() : tensor<1x2x64x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>)
      kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32, 32]
      outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return %r : tensor<1x2x64x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops:3 = transform.structured.tile_using_for %0 tile_sizes [1, 1, 32, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}
