// RUN: flex-opt %s -split-input-file | flex-opt -split-input-file | FileCheck %s

// Round trip of flex.attention_backward.

// CHECK-LABEL: func.func @minimal
// CHECK: %[[R:.+]]:3 = flex.attention_backward ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>, tensor<2x4x16x4xf32>, tensor<2x4x16xf32>, tensor<2x4x16x4xf32>) outs(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>) scale(1.250000e-01) -> tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: joint
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @minimal(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>, %v: tensor<2x4x32x4xf32>, %o: tensor<2x4x16x4xf32>, %lse: tensor<2x4x16xf32>, %do: tensor<2x4x16x4xf32>, %dq: tensor<2x4x16x8xf32>, %dk: tensor<2x4x32x8xf32>, %dv: tensor<2x4x32x4xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>) {
  %r:3 = flex.attention_backward ins(%q, %k, %v, %o, %lse, %do : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>, tensor<2x4x16x4xf32>, tensor<2x4x16xf32>, tensor<2x4x16x4xf32>)
      outs(%dq, %dk, %dv : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>) scale(0.125)
      -> tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>
  return %r#0, %r#1, %r#2 : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x4xf32>
}

// -----

// Every optional part: grad_logsumexp, captures, block tensors, a capture
// gradient, GQA (Hq = 4, Hkv = 2) with a broadcast kv batch, bf16.
// CHECK-LABEL: func.func @full
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x4x16x8xbf16>, %[[K:[^:]+]]: tensor<1x2x16x8xbf16>, %[[V:[^:]+]]: tensor<1x2x16x4xbf16>, %[[O:[^:]+]]: tensor<2x4x16x4xbf16>, %[[L:[^:]+]]: tensor<2x4x16xf32>, %[[DO:[^:]+]]: tensor<2x4x16x4xbf16>, %[[GL:[^:]+]]: tensor<2x4x16xf32>, %[[BIAS:[^:]+]]: tensor<4x16xbf16>, %[[DOC:[^:]+]]: tensor<16xi64>, %[[KVN:[^:]+]]: tensor<1x1x2xi32>, %[[KVI:[^:]+]]: tensor<1x1x2x2xi32>, %[[FKVN:[^:]+]]: tensor<1x1x2xi32>, %[[FKVI:[^:]+]]: tensor<1x1x2x2xi32>, %[[DQ:[^:]+]]: tensor<2x4x16x8xbf16>, %[[DK:[^:]+]]: tensor<1x2x16x8xbf16>, %[[DV:[^:]+]]: tensor<1x2x16x4xbf16>, %[[DB:[^:]+]]: tensor<4x16xbf16>)
// CHECK: %{{.+}}:4 = flex.attention_backward ins(%[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %[[DO]] : tensor<2x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>, tensor<2x4x16x4xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x4xbf16>)
// CHECK-SAME: grad_logsumexp(%[[GL]] : tensor<2x4x16xf32>)
// CHECK-SAME: captures(%[[BIAS]], %[[DOC]] : tensor<4x16xbf16>, tensor<16xi64>)
// CHECK-SAME: kv_blocks(%[[KVN]], %[[KVI]] : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
// CHECK-SAME: full_kv_blocks(%[[FKVN]], %[[FKVI]] : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) block_sizes [8, 8]
// CHECK-SAME: outs(%[[DQ]], %[[DK]], %[[DV]] : tensor<2x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>)
// CHECK-SAME: capture_grads(%[[DB]] : tensor<4x16xbf16>) grad_captures [0] scale(3.535530e-01) score_mod {
// CHECK-NEXT: ^bb0(%{{.+}}: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK: } mask_mod {
// CHECK-NEXT: ^bb0(%{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK: } joint {
// CHECK-NEXT: ^bb0(%{{.+}}: f32, %{{.+}}: index, %[[H:.+]]: index, %{{.+}}: index, %[[N:.+]]: index, %[[G:.+]]: f32):
// CHECK-NEXT:   %[[GB:.+]] = arith.truncf %[[G]] : f32 to bf16
// CHECK-NEXT:   flex.yield %[[G]], %[[GB]], %[[H]], %[[N]] : f32, bf16, index, index
// CHECK-NEXT: } -> tensor<2x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>, tensor<4x16xbf16>
func.func @full(%q: tensor<2x4x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x4xbf16>, %o: tensor<2x4x16x4xbf16>, %lse: tensor<2x4x16xf32>, %do: tensor<2x4x16x4xbf16>, %glse: tensor<2x4x16xf32>, %bias: tensor<4x16xbf16>, %doc: tensor<16xi64>, %kvn: tensor<1x1x2xi32>, %kvi: tensor<1x1x2x2xi32>, %fkvn: tensor<1x1x2xi32>, %fkvi: tensor<1x1x2x2xi32>, %dq: tensor<2x4x16x8xbf16>, %dk: tensor<1x2x16x8xbf16>, %dv: tensor<1x2x16x4xbf16>, %db: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  %r:4 = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<2x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>, tensor<2x4x16x4xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x4xbf16>)
      grad_logsumexp(%glse : tensor<2x4x16xf32>)
      captures(%bias, %doc : tensor<4x16xbf16>, tensor<16xi64>)
      kv_blocks(%kvn, %kvi : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
      full_kv_blocks(%fkvn, %fkvi : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
      block_sizes [8, 8]
      outs(%dq, %dk, %dv : tensor<2x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>)
      capture_grads(%db : tensor<4x16xbf16>) grad_captures [0]
      scale(0.353553)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h, %n] : tensor<4x16xbf16>
        %xf = arith.extf %x : bf16 to f32
        %t = arith.addf %s, %xf : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %dm = tensor.extract %doc[%m] : tensor<16xi64>
        %dn = tensor.extract %doc[%n] : tensor<16xi64>
        %c = arith.cmpi eq, %dm, %dn : i64
        flex.yield %c : i1
      } joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        %gb = arith.truncf %g : f32 to bf16
        flex.yield %g, %gb, %h, %n : f32, bf16, index, index
      } -> tensor<2x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>, tensor<4x16xbf16>
  return %r#3 : tensor<4x16xbf16>
}

// -----

// On memrefs: no results; offsets and kv_group_size as tiling sets them.
// CHECK-LABEL: func.func @buffers
// CHECK: flex.attention_backward ins({{.+}}) offsets(%{{.+}}, %{{.+}}) outs({{.+}}) scale(1.000000e+00) {kv_group_size = 2 : i64} joint {
// CHECK: }{{$}}
func.func @buffers(%q: memref<1x2x16x8xf32>, %k: memref<1x1x16x8xf32>, %v: memref<1x1x16x8xf32>, %o: memref<1x2x16x8xf32>, %lse: memref<1x2x16xf32>, %do: memref<1x2x16x8xf32>, %dq: memref<1x2x16x8xf32>, %dk: memref<1x1x16x8xf32>, %dv: memref<1x1x16x8xf32>, %b0: index, %h0: index) {
  flex.attention_backward ins(%q, %k, %v, %o, %lse, %do : memref<1x2x16x8xf32>, memref<1x1x16x8xf32>, memref<1x1x16x8xf32>, memref<1x2x16x8xf32>, memref<1x2x16xf32>, memref<1x2x16x8xf32>)
      offsets(%b0, %h0)
      outs(%dq, %dk, %dv : memref<1x2x16x8xf32>, memref<1x1x16x8xf32>, memref<1x1x16x8xf32>) scale(1.0) {kv_group_size = 2 : i64}
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        %t = arith.mulf %g, %s : f32
        flex.yield %t : f32
      }
  return
}
