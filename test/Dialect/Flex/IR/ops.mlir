// RUN: flex-opt %s -split-input-file | flex-opt -split-input-file | FileCheck %s

// Round trip of every form of flex.attention.

// CHECK-LABEL: func.func @no_regions
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x16x8xf32>, %[[K:.+]]: tensor<2x4x32x8xf32>, %[[V:.+]]: tensor<2x4x32x8xf32>, %[[O:.+]]: tensor<2x4x16x8xf32>)
// CHECK: %[[R:.+]] = flex.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>) outs(%[[O]] : tensor<2x4x16x8xf32>) scale(1.250000e-01) -> tensor<2x4x16x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: mask_mod
// CHECK: return %[[R]]
func.func @no_regions(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>, %v: tensor<2x4x32x8xf32>, %o: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      outs(%o : tensor<2x4x16x8xf32>) scale(0.125) -> tensor<2x4x16x8xf32>
  return %r : tensor<2x4x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @score_mod_only
// CHECK: flex.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%{{.+}} : tensor<1x2x16x8xf32>) scale(5.000000e-01) score_mod {
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %[[B:.+]]: index, %[[H:.+]]: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-NEXT:   %[[D:.+]] = arith.subi %[[M]], %[[N]] : index
// CHECK-NEXT:   %[[I:.+]] = arith.index_cast %[[D]] : index to i64
// CHECK-NEXT:   %[[F:.+]] = arith.sitofp %[[I]] : i64 to f32
// CHECK-NEXT:   %[[T:.+]] = arith.addf %[[S]], %[[F]] : f32
// CHECK-NEXT:   flex.yield %[[T]] : f32
// CHECK-NEXT: } -> tensor<1x2x16x8xf32>
// CHECK-NOT: mask_mod
func.func @score_mod_only(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.5)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %d = arith.subi %m, %n : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %t = arith.addf %s, %df : f32
        flex.yield %t : f32
      } -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @mask_mod_only
// CHECK: flex.attention ins({{.+}}) outs({{.+}}) scale(1.250000e-01) mask_mod {
// CHECK-NEXT: ^bb0(%[[B:.+]]: index, %[[H:.+]]: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-NEXT:   %[[C:.+]] = arith.cmpi sge, %[[M]], %[[N]] : index
// CHECK-NEXT:   flex.yield %[[C]] : i1
// CHECK-NEXT: } -> tensor<1x2x16x8xf32>
func.func @mask_mod_only(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @both_regions
// CHECK: flex.attention
// CHECK-SAME: score_mod {
// CHECK: math.tanh
// CHECK: flex.yield %{{.+}} : f32
// CHECK-NEXT: } mask_mod {
// CHECK: arith.cmpi sge
// CHECK: flex.yield %{{.+}} : i1
// CHECK-NEXT: } -> tensor<1x2x16x8xf32>
func.func @both_regions(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %cap = arith.constant 20.0 : f32
        %x = arith.divf %s, %cap : f32
        %t = math.tanh %x : f32
        %y = arith.mulf %t, %cap : f32
        flex.yield %y : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// Captured tensors (a per-head bias and a document-id vector) read in the
// regions with tensor.extract.
// CHECK-LABEL: func.func @captures
// CHECK-SAME: %[[BIAS:[^:]+]]: tensor<2xf32>, %[[DOC:[^:]+]]: tensor<16xi64>
// CHECK: flex.attention ins({{.+}}) captures(%[[BIAS]], %[[DOC]] : tensor<2xf32>, tensor<16xi64>) outs({{.+}}) scale(1.250000e-01) score_mod {
// CHECK: tensor.extract %[[BIAS]][%{{.+}}] : tensor<2xf32>
// CHECK: } mask_mod {
// CHECK-DAG: tensor.extract %[[DOC]][%{{.+}}] : tensor<16xi64>
// CHECK-DAG: tensor.extract %[[DOC]][%{{.+}}] : tensor<16xi64>
// CHECK: arith.cmpi eq
func.func @captures(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %bias: tensor<2xf32>, %doc: tensor<16xi64>) -> tensor<1x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      captures(%bias, %doc : tensor<2xf32>, tensor<16xi64>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h] : tensor<2xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %dm = tensor.extract %doc[%m] : tensor<16xi64>
        %dn = tensor.extract %doc[%n] : tensor<16xi64>
        %c = arith.cmpi eq, %dm, %dn : i64
        flex.yield %c : i1
      } -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @logsumexp
// CHECK: %[[R:.+]]:2 = flex.attention ins({{.+}}) outs(%{{.+}} : tensor<1x2x16x8xf32>) logsumexp(%{{.+}} : tensor<1x2x16xf32>) scale(1.250000e-01) -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @logsumexp(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) logsumexp(%l : tensor<1x2x16xf32>) scale(0.125)
      -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
  return %r#0, %r#1 : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
}

// -----

// CHECK-LABEL: func.func @max_scores
// CHECK: %[[R:.+]]:2 = flex.attention ins({{.+}}) outs(%{{.+}} : tensor<1x2x16x8xf32>) max_scores(%{{.+}} : tensor<1x2x16xf32>) scale(1.250000e-01) -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
// CHECK-NOT: logsumexp
func.func @max_scores(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %mx: tensor<1x2x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) max_scores(%mx : tensor<1x2x16xf32>) scale(0.125)
      -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
  return %r#0, %r#1 : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
}

// -----

// CHECK-LABEL: func.func @both_aux
// CHECK-SAME: %[[O:[^:]+]]: tensor<1x2x16x8xf32>, %[[L:[^:]+]]: tensor<1x2x16xf32>, %[[MX:[^:]+]]: tensor<1x2x16xf32>
// CHECK: %[[R:.+]]:3 = flex.attention ins({{.+}}) outs(%[[O]] : tensor<1x2x16x8xf32>) logsumexp(%[[L]] : tensor<1x2x16xf32>) max_scores(%[[MX]] : tensor<1x2x16xf32>) scale(1.250000e-01) -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @both_aux(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x16xf32>, %mx: tensor<1x2x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) {
  %r:3 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) logsumexp(%l : tensor<1x2x16xf32>) max_scores(%mx : tensor<1x2x16xf32>) scale(0.125)
      -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
}

// -----

// The form produced by tiling: offsets of the tile and the GQA ratio.
// CHECK-LABEL: func.func @offsets_and_group
// CHECK-SAME: %[[B0:[^:]+]]: index, %[[H0:[^:]+]]: index, %[[M0:[^:]+]]: index
// CHECK: flex.attention ins({{.+}} : tensor<1x2x8x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>) offsets(%[[B0]], %[[H0]], %[[M0]]) outs({{.+}} : tensor<1x2x8x8xf32>) scale(1.250000e-01) {kv_group_size = 4 : i64} mask_mod {
func.func @offsets_and_group(%q: tensor<1x2x8x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x8xf32>, %o: tensor<1x2x8x8xf32>, %b0: index, %h0: index, %m0: index) -> tensor<1x2x8x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x8x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>)
      offsets(%b0, %h0, %m0)
      outs(%o : tensor<1x2x8x8xf32>) scale(0.125) {kv_group_size = 4 : i64}
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x8x8xf32>
  return %r : tensor<1x2x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_dims
// CHECK: flex.attention ins({{.+}} : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) outs(%{{.+}} : tensor<?x?x?x?xf32>) logsumexp(%{{.+}} : tensor<?x?x?xf32>) scale(1.250000e-01) -> tensor<?x?x?x?xf32>, tensor<?x?x?xf32>
func.func @dynamic_dims(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>, %o: tensor<?x?x?x?xf32>, %l: tensor<?x?x?xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      outs(%o : tensor<?x?x?x?xf32>) logsumexp(%l : tensor<?x?x?xf32>) scale(0.125)
      -> tensor<?x?x?x?xf32>, tensor<?x?x?xf32>
  return %r#0, %r#1 : tensor<?x?x?x?xf32>, tensor<?x?x?xf32>
}

// -----

// Mixed static and dynamic extents.
// CHECK-LABEL: func.func @partly_dynamic
// CHECK: flex.attention ins({{.+}} : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x32xf32>) outs(%{{.+}} : tensor<1x8x?x32xf32>) scale(1.250000e-01) -> tensor<1x8x?x32xf32>
func.func @partly_dynamic(%q: tensor<1x8x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x32xf32>, %o: tensor<1x8x?x32xf32>) -> tensor<1x8x?x32xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x32xf32>)
      outs(%o : tensor<1x8x?x32xf32>) scale(0.125) -> tensor<1x8x?x32xf32>
  return %r : tensor<1x8x?x32xf32>
}

// -----

// CHECK-LABEL: func.func @f16
// CHECK: flex.attention ins({{.+}} : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) outs(%{{.+}} : tensor<1x2x16x8xf16>) logsumexp(%{{.+}} : tensor<1x2x16xf32>) scale(1.250000e-01) score_mod {
// CHECK-NEXT: ^bb0(%{{.+}}: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK: -> tensor<1x2x16x8xf16>, tensor<1x2x16xf32>
func.func @f16(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %o: tensor<1x2x16x8xf16>, %l: tensor<1x2x16xf32>) -> (tensor<1x2x16x8xf16>, tensor<1x2x16xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
      outs(%o : tensor<1x2x16x8xf16>) logsumexp(%l : tensor<1x2x16xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        flex.yield %s : f32
      } -> tensor<1x2x16x8xf16>, tensor<1x2x16xf32>
  return %r#0, %r#1 : tensor<1x2x16x8xf16>, tensor<1x2x16xf32>
}

// -----

// CHECK-LABEL: func.func @bf16
// CHECK: flex.attention ins({{.+}} : tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>) outs(%{{.+}} : tensor<1x2x16x8xbf16>) max_scores(%{{.+}} : tensor<1x2x16xf32>) scale(1.250000e-01) -> tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>
func.func @bf16(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>, %o: tensor<1x2x16x8xbf16>, %mx: tensor<1x2x16xf32>) -> (tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>) {
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>)
      outs(%o : tensor<1x2x16x8xbf16>) max_scores(%mx : tensor<1x2x16xf32>) scale(0.125)
      -> tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>
  return %r#0, %r#1 : tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>
}

// -----

// Memref form (after bufferization): no results.
// CHECK-LABEL: func.func @memref_form
// CHECK-SAME: %[[BIAS:[^:]+]]: memref<2xf32>
// CHECK: flex.attention ins({{.+}} : memref<1x2x16x8xf32>, memref<1x2x16x8xf32>, memref<1x2x16x8xf32>) captures(%[[BIAS]] : memref<2xf32>) outs(%{{.+}} : memref<1x2x16x8xf32>) logsumexp(%{{.+}} : memref<1x2x16xf32>) scale(1.250000e-01) score_mod {
// CHECK: memref.load %[[BIAS]]
// CHECK: flex.yield %{{.+}} : f32
// CHECK-NEXT: }{{$}}
// CHECK-NEXT: return
func.func @memref_form(%q: memref<1x2x16x8xf32>, %k: memref<1x2x16x8xf32>, %v: memref<1x2x16x8xf32>, %bias: memref<2xf32>, %o: memref<1x2x16x8xf32>, %l: memref<1x2x16xf32>) {
  flex.attention ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x16x8xf32>, memref<1x2x16x8xf32>)
      captures(%bias : memref<2xf32>)
      outs(%o : memref<1x2x16x8xf32>) logsumexp(%l : memref<1x2x16xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = memref.load %bias[%h] : memref<2xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      }
  return
}

// -----

// GQA: Hq = 8, Hkv = 2; Ev = 16 differs from E = 64; M != N.
// CHECK-LABEL: func.func @gqa
// CHECK: flex.attention ins({{.+}} : tensor<2x8x16x64xf32>, tensor<2x2x48x64xf32>, tensor<2x2x48x16xf32>) outs(%{{.+}} : tensor<2x8x16x16xf32>) scale(1.250000e-01) -> tensor<2x8x16x16xf32>
func.func @gqa(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x48x64xf32>, %v: tensor<2x2x48x16xf32>, %o: tensor<2x8x16x16xf32>) -> tensor<2x8x16x16xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<2x8x16x64xf32>, tensor<2x2x48x64xf32>, tensor<2x2x48x16xf32>)
      outs(%o : tensor<2x8x16x16xf32>) scale(0.125) -> tensor<2x8x16x16xf32>
  return %r : tensor<2x8x16x16xf32>
}

// -----

// Key/value batch 1 broadcast over the query batch 4.
// CHECK-LABEL: func.func @kv_batch_broadcast
// CHECK: flex.attention ins({{.+}} : tensor<4x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%{{.+}} : tensor<4x2x16x8xf32>) scale(1.250000e-01) -> tensor<4x2x16x8xf32>
func.func @kv_batch_broadcast(%q: tensor<4x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<4x2x16x8xf32>) -> tensor<4x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<4x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<4x2x16x8xf32>) scale(0.125) -> tensor<4x2x16x8xf32>
  return %r : tensor<4x2x16x8xf32>
}

// -----

// The tile-level online-softmax step, with a capture and both regions.
// CHECK-LABEL: func.func @online_attention
// CHECK: flex.online_attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<16x8xbf16>, tensor<8x32xbf16>, tensor<32x4xbf16>) captures(%{{.+}} : tensor<4xf32>) at(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) bounds(%{{.+}}, %{{.+}}) outs(%{{.+}}, %{{.+}}, %{{.+}} : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(1.250000e-01) {transposed_key} score_mod {
// CHECK: } mask_mod {
// CHECK: } -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
func.func @online_attention(%q: tensor<16x8xbf16>, %kt: tensor<8x32xbf16>, %v: tensor<32x4xbf16>, %c: tensor<4xf32>,
                            %mx: tensor<16xf32>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>, %i: index)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) {
  %r:3 = flex.online_attention ins(%q, %kt, %v : tensor<16x8xbf16>, tensor<8x32xbf16>, tensor<32x4xbf16>)
      captures(%c : tensor<4xf32>) at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125) {transposed_key}
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %c[%h] : tensor<4xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %k = arith.cmpi sge, %m, %n : index
        flex.yield %k : i1
      } -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
  return %r#0, %r#1, %r#2 : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
}

// -----

// mask_when: the mask applies only where the i1 operand is true.
// CHECK-LABEL: func.func @online_attention_mask_when
// CHECK-SAME: %[[W:[^:]+]]: i1
// CHECK: flex.online_attention ins({{.*}}) at({{.*}}) bounds({{.*}}) outs({{.*}}) scale(1.250000e-01) mask_when(%[[W]]) mask_mod {
func.func @online_attention_mask_when(%q: tensor<16x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                                      %mx: tensor<16xf32>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>,
                                      %i: index, %w: i1)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) {
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<16x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125) mask_when(%w)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %k2 = arith.cmpi sge, %m, %n : index
        flex.yield %k2 : i1
      } -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
  return %r#0, %r#1, %r#2 : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
}

// -----

// Generic form parses to the same op.
// CHECK-LABEL: func.func @generic_form
// CHECK: flex.attention ins({{.+}}) outs({{.+}}) scale(1.250000e-01) -> tensor<1x2x16x8xf32>
func.func @generic_form(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %r = "flex.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// Block tensors (BlockMask): the partial pair, the full pair and the block
// sizes; B/H of the block tensors broadcast (1).
// CHECK-LABEL: func.func @block_tensors
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x4x100x8xf32>, %{{.+}}, %{{.+}}, %[[O:[^:]+]]: tensor<2x4x100x8xf32>, %[[N:[^:]+]]: tensor<1x4x4xi32>, %[[I:[^:]+]]: tensor<1x4x4x2xi32>, %[[FN:[^:]+]]: tensor<1x4x4xi32>, %[[FI:[^:]+]]: tensor<1x4x4x2xi32>)
// CHECK: flex.attention ins(%[[Q]], %{{.+}}, %{{.+}} : tensor<2x4x100x8xf32>, tensor<2x4x64x8xf32>, tensor<2x4x64x8xf32>) kv_blocks(%[[N]], %[[I]] : tensor<1x4x4xi32>, tensor<1x4x4x2xi32>) full_kv_blocks(%[[FN]], %[[FI]] : tensor<1x4x4xi32>, tensor<1x4x4x2xi32>) block_sizes [32, 32] outs(%[[O]] : tensor<2x4x100x8xf32>) scale(1.250000e-01) mask_mod {
// CHECK: } -> tensor<2x4x100x8xf32>
func.func @block_tensors(%q: tensor<2x4x100x8xf32>, %k: tensor<2x4x64x8xf32>, %v: tensor<2x4x64x8xf32>, %o: tensor<2x4x100x8xf32>, %n: tensor<1x4x4xi32>, %i: tensor<1x4x4x2xi32>, %fn: tensor<1x4x4xi32>, %fi: tensor<1x4x4x2xi32>) -> tensor<2x4x100x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<2x4x100x8xf32>, tensor<2x4x64x8xf32>, tensor<2x4x64x8xf32>)
      kv_blocks(%n, %i : tensor<1x4x4xi32>, tensor<1x4x4x2xi32>)
      full_kv_blocks(%fn, %fi : tensor<1x4x4xi32>, tensor<1x4x4x2xi32>)
      block_sizes [32, 32]
      outs(%o : tensor<2x4x100x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %kv: index):
        %c = arith.cmpi sge, %m, %kv : index
        flex.yield %c : i1
      } -> tensor<2x4x100x8xf32>
  return %r : tensor<2x4x100x8xf32>
}

// -----

// Partial pair only, on memrefs, with i64 indices and dynamic extents.
// CHECK-LABEL: func.func @block_tensors_memref
// CHECK: flex.attention ins({{.+}}) kv_blocks(%{{.+}}, %{{.+}} : memref<?x?x?xi64>, memref<?x?x?x?xi64>) block_sizes [16, 64] outs(%{{.+}} : memref<1x2x16x8xf32>) scale(1.250000e-01)
// CHECK-NOT: full_kv_blocks
func.func @block_tensors_memref(%q: memref<1x2x16x8xf32>, %k: memref<1x2x16x8xf32>, %v: memref<1x2x16x8xf32>, %o: memref<1x2x16x8xf32>, %n: memref<?x?x?xi64>, %i: memref<?x?x?x?xi64>) {
  flex.attention ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x16x8xf32>, memref<1x2x16x8xf32>)
      kv_blocks(%n, %i : memref<?x?x?xi64>, memref<?x?x?x?xi64>) block_sizes [16, 64]
      outs(%o : memref<1x2x16x8xf32>) scale(0.125)
  return
}

// -----

// A multi-head tile (GQA decode): rows_per_head.
// CHECK-LABEL: func.func @online_attention_rows_per_head
// CHECK: flex.online_attention {{.*}} scale(1.250000e-01) {rows_per_head = 2 : i64} -> tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>
func.func @online_attention_rows_per_head(%q: tensor<4x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                                          %mx: tensor<4xf32>, %l: tensor<4xf32>, %acc: tensor<4x4xf32>, %i: index)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>) {
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>) scale(0.125) {rows_per_head = 2 : i64}
      -> tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>
  return %r#0, %r#1, %r#2 : tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>
}
