// RUN: flex-opt %s -split-input-file \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s

// Captures become memrefs, tensor.extract in the regions becomes memref.load,
// and the inits are written in place without a copy of their contents.
// CHECK-LABEL: func.func @captures
// CHECK-SAME: (%[[Q:[^:]+]]: memref<1x4x16x8xf32>, %[[K:[^:]+]]: memref<1x2x32x8xf32>, %[[V:[^:]+]]: memref<1x2x32x8xf32>, %[[BIAS:[^:]+]]: memref<4xf32>, %[[DOC:[^:]+]]: memref<16xi64>)
// CHECK-DAG: %[[O:.+]] = memref.alloc() {{.*}}: memref<1x4x16x8xf32>
// CHECK-DAG: %[[L:.+]] = memref.alloc() {{.*}}: memref<1x4x16xf32>
// CHECK-NOT: memref.copy
// CHECK: flex.attention ins(%[[Q]], %[[K]], %[[V]] : memref<1x4x16x8xf32>, memref<1x2x32x8xf32>, memref<1x2x32x8xf32>) captures(%[[BIAS]], %[[DOC]] : memref<4xf32>, memref<16xi64>) outs(%[[O]] : memref<1x4x16x8xf32>) logsumexp(%[[L]] : memref<1x4x16xf32>) scale(1.250000e-01) score_mod {
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[H:.+]]: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:   %[[X:.+]] = memref.load %[[BIAS]][%[[H]]] : memref<4xf32>
// CHECK-NEXT:   %[[T:.+]] = arith.addf %[[S]], %[[X]] : f32
// CHECK-NEXT:   flex.yield %[[T]] : f32
// CHECK-NEXT: } mask_mod {
// CHECK-NEXT: ^bb0(%{{.+}}: index, %{{.+}}: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-DAG:    memref.load %[[DOC]][%[[M]]] : memref<16xi64>
// CHECK-DAG:    memref.load %[[DOC]][%[[N]]] : memref<16xi64>
// CHECK:        arith.cmpi eq
// CHECK-NEXT:   arith.cmpi sge, %[[M]], %[[N]] : index
// CHECK-NEXT:   arith.andi
// CHECK-NEXT:   flex.yield %{{.+}} : i1
// CHECK-NEXT: }{{$}}
// CHECK-NOT: tensor.
// CHECK-NOT: memref.copy
// CHECK: return %[[O]], %[[L]] : memref<1x4x16x8xf32>, memref<1x4x16xf32>
func.func @captures(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x8xf32>, %bias: tensor<4xf32>, %doc: tensor<16xi64>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) {
  %o = tensor.empty() : tensor<1x4x16x8xf32>
  %l = tensor.empty() : tensor<1x4x16xf32>
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>)
      captures(%bias, %doc : tensor<4xf32>, tensor<16xi64>)
      outs(%o : tensor<1x4x16x8xf32>) logsumexp(%l : tensor<1x4x16xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h] : tensor<4xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %dm = tensor.extract %doc[%m] : tensor<16xi64>
        %dn = tensor.extract %doc[%n] : tensor<16xi64>
        %same = arith.cmpi eq, %dm, %dn : i64
        %causal = arith.cmpi sge, %m, %n : index
        %c = arith.andi %same, %causal : i1
        flex.yield %c : i1
      } -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  return %r#0, %r#1 : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
}

// -----

// An init that is a function argument is written in place.
// CHECK-LABEL: func.func @init_in_place
// CHECK-SAME: %[[O:[^:]+]]: memref<1x2x16x8xf32>, %[[MX:[^:]+]]: memref<1x2x16xf32>)
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: flex.attention ins({{.+}}) outs(%[[O]] : memref<1x2x16x8xf32>) max_scores(%[[MX]] : memref<1x2x16xf32>) scale(1.250000e-01){{$}}
// CHECK: return %[[O]], %[[MX]]
func.func @init_in_place(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %mx: tensor<1x2x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) max_scores(%mx : tensor<1x2x16xf32>) scale(0.125)
      -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
  return %r#0, %r#1 : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
}

// -----

// The init is still live after the op: the result gets a fresh buffer, and
// since the op never reads its init, nothing is copied into it.
// CHECK-LABEL: func.func @init_live_after
// CHECK-SAME: %[[O:[^:]+]]: memref<1x2x16x8xf32>)
// CHECK: %[[NEW:.+]] = memref.alloc() {{.*}}: memref<1x2x16x8xf32>
// CHECK-NOT: memref.copy
// CHECK: flex.attention ins({{.+}}) outs(%[[NEW]] : memref<1x2x16x8xf32>)
// CHECK: return %[[NEW]], %[[O]]
func.func @init_live_after(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return %r, %o : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
}

// -----

// Two ops in sequence: the second reads the first's output as its query.
// CHECK-LABEL: func.func @chained
// CHECK: %[[A:.+]] = memref.alloc() {{.*}}: memref<1x2x16x8xf32>
// CHECK: flex.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : {{.+}}) outs(%[[A]] : memref<1x2x16x8xf32>)
// CHECK: %[[B:.+]] = memref.alloc() {{.*}}: memref<1x2x16x8xf32>
// CHECK: flex.attention ins(%[[A]], %{{.+}}, %{{.+}} : {{.+}}) outs(%[[B]] : memref<1x2x16x8xf32>)
// CHECK: return %[[B]]
func.func @chained(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %e = tensor.empty() : tensor<1x2x16x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%e : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  %e2 = tensor.empty() : tensor<1x2x16x8xf32>
  %r2 = flex.attention ins(%r, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%e2 : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return %r2 : tensor<1x2x16x8xf32>
}
