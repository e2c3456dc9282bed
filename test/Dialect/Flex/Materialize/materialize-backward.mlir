// RUN: flex-opt %s -flex-materialize -split-input-file | FileCheck %s

// `@__flex_backward_N` calls of torch_mlir_flex.frontend become
// flex.attention_backward on zero-filled gradient inits. The score_mod,
// mask_mod and joint functions become regions (the joint's integer index
// results cast to index); block tensors become kv_blocks; the declaration
// and the modifier functions are erased.

// CHECK-LABEL: func.func @bw(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x4x16x8xf32>, %[[K:[^:]+]]: tensor<1x4x16x8xf32>, %[[V:[^:]+]]: tensor<1x4x16x8xf32>, %[[O:[^:]+]]: tensor<1x4x16x8xf32>, %[[L:[^:]+]]: tensor<1x4x16xf32>, %[[DO:[^:]+]]: tensor<1x4x16x8xf32>, %[[GL:[^:]+]]: tensor<1x4x16xf32>, %[[BIAS:[^:]+]]: tensor<4x16xf32>, %[[DOC:[^:]+]]: tensor<16xi64>, %[[KVN:[^:]+]]: tensor<1x1x2xi32>, %[[KVI:[^:]+]]: tensor<1x1x2x2xi32>)
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[E0:.+]] = tensor.empty() : tensor<1x4x16x8xf32>
// CHECK-DAG: %[[DQ:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E0]] : tensor<1x4x16x8xf32>)
// CHECK-DAG: %[[DK:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<1x4x16x8xf32>)
// CHECK-DAG: %[[DV:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<1x4x16x8xf32>)
// CHECK-DAG: %[[E3:.+]] = tensor.empty() : tensor<4x16xf32>
// CHECK-DAG: %[[DB:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E3]] : tensor<4x16xf32>)
// CHECK: %[[R:.+]]:4 = flex.attention_backward ins(%[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %[[DO]] : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16x8xf32>)
// CHECK-SAME: grad_logsumexp(%[[GL]] : tensor<1x4x16xf32>) captures(%[[BIAS]], %[[DOC]] : tensor<4x16xf32>, tensor<16xi64>)
// CHECK-SAME: kv_blocks(%[[KVN]], %[[KVI]] : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) block_sizes [8, 8]
// CHECK-SAME: outs(%[[DQ]], %[[DK]], %[[DV]] : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>)
// CHECK-SAME: capture_grads(%[[DB]] : tensor<4x16xf32>) grad_captures [0] scale(0.353553385) score_mod {
// CHECK:        tensor.extract %[[BIAS]]
// CHECK:        flex.yield %{{.+}} : f32
// CHECK:      } mask_mod {
// CHECK:        tensor.extract %[[DOC]]
// CHECK:        flex.yield %{{.+}} : i1
// CHECK:      } joint {
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[H:.+]]: index, %{{.+}}: index, %[[N:.+]]: index, %[[G:.+]]: f32):
// CHECK-DAG:    %[[HI:.+]] = arith.index_cast %[[H]] : index to i32
// CHECK-DAG:    %[[NI:.+]] = arith.index_cast %[[N]] : index to i32
// CHECK-DAG:    %[[H64:.+]] = arith.extsi %[[HI]] : i32 to i64
// CHECK-DAG:    %[[N64:.+]] = arith.extsi %[[NI]] : i32 to i64
// CHECK-DAG:    %[[HX:.+]] = arith.index_cast %[[H64]] : i64 to index
// CHECK-DAG:    %[[NX:.+]] = arith.index_cast %[[N64]] : i64 to index
// CHECK-DAG:    %[[GS:.+]] = arith.mulf %[[G]], %[[S]] : f32
// CHECK:        flex.yield %[[GS]], %[[G]], %[[HX]], %[[NX]] : f32, f32, index, index
// CHECK:      } -> tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x16xf32>
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3
// CHECK-NOT: func.func private
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<4x16xf32>) -> tensor<f32> {
    %hi = tensor.extract %h[] : tensor<i32>
    %ni = tensor.extract %n[] : tensor<i32>
    %hx = arith.index_cast %hi : i32 to index
    %nx = arith.index_cast %ni : i32 to index
    %x = tensor.extract %bias[%hx, %nx] : tensor<4x16xf32>
    %e = tensor.empty() : tensor<f32>
    %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%s : tensor<f32>) outs(%e : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %t = arith.addf %in, %x : f32
      linalg.yield %t : f32
    } -> tensor<f32>
    return %r : tensor<f32>
  }
  func.func private @sdpa_mask0(%b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %docs: tensor<16xi64>) -> tensor<i1> {
    %mi = tensor.extract %m[] : tensor<i32>
    %ni = tensor.extract %n[] : tensor<i32>
    %mx = arith.index_cast %mi : i32 to index
    %nx = arith.index_cast %ni : i32 to index
    %dm = tensor.extract %docs[%mx] : tensor<16xi64>
    %dn = tensor.extract %docs[%nx] : tensor<16xi64>
    %c = arith.cmpi eq, %dm, %dn : i64
    %r = tensor.from_elements %c : tensor<i1>
    return %r : tensor<i1>
  }
  func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<4x16xf32>) -> (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>) {
    %e = tensor.empty() : tensor<i64>
    %e2 = tensor.empty() : tensor<f32>
    %h64 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%h : tensor<i32>) outs(%e : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %t = arith.extsi %in : i32 to i64
      linalg.yield %t : i64
    } -> tensor<i64>
    %n64 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%n : tensor<i32>) outs(%e : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %t = arith.extsi %in : i32 to i64
      linalg.yield %t : i64
    } -> tensor<i64>
    %gs = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%g, %s : tensor<f32>, tensor<f32>) outs(%e2 : tensor<f32>) {
    ^bb0(%in: f32, %in2: f32, %out: f32):
      %t = arith.mulf %in, %in2 : f32
      linalg.yield %t : f32
    } -> tensor<f32>
    return %gs, %g, %h64, %n64 : tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>
  }
  func.func @bw(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>, %out: tensor<1x4x16x8xf32>, %lse: tensor<1x4x16xf32>, %dout: tensor<1x4x16x8xf32>, %glse: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %docs: tensor<16xi64>, %kvn: tensor<1x1x2xi32>, %kvi: tensor<1x1x2x2xi32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x16xf32>) {
    %dq, %dk, %dv, %dbias = func.call @__flex_backward_0(%q, %k, %v, %out, %lse, %dout, %glse, %bias, %docs, %kvn, %kvi)
      : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<4x16xf32>, tensor<16xi64>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x16xf32>)
    return %dq, %dk, %dv, %dbias : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x16xf32>
  }
  func.func private @__flex_backward_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<4x16xf32>, tensor<16xi64>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x16xf32>) attributes {flex.score_mod = @sdpa_score0, flex.mask_mod = @sdpa_mask0, flex.joint = @sdpa_joint0, flex.scale = 0.35355339059327373 : f64, flex.has_grad_lse = true, flex.num_score_buffers = 1 : i64, flex.num_mask_buffers = 1 : i64, flex.num_block_tensors = 2 : i64, flex.block_sizes = array<i64: 8, 8>, flex.grad_captures = array<i64: 0>}
}

// -----

// No modifiers and an identity joint: no regions. A forward call in the
// same module keeps its own rewrite (the prefixes do not overlap). GQA.
// CHECK-LABEL: func.func @plain(
// CHECK: flex.attention ins(
// CHECK: %[[R:.+]]:3 = flex.attention_backward ins(%{{.+}} : tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x4x8x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8x4xf16>)
// CHECK-SAME: outs(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>) scale(5.000000e-01) -> tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>
// CHECK-NOT: score_mod
// CHECK-NOT: joint
// CHECK-NOT: func.func private
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
  func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>) -> tensor<f32> {
    return %g : tensor<f32>
  }
  func.func @plain(%q: tensor<2x4x8x4xf16>, %k: tensor<2x2x8x4xf16>, %v: tensor<2x2x8x4xf16>, %dout: tensor<2x4x8x4xf16>) -> (tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>) {
    %f:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>) -> (tensor<2x4x8x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    %r:3 = call @__flex_backward_0(%q, %k, %v, %f#0, %f#1, %dout) : (tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x4x8x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8x4xf16>) -> (tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>)
    return %r#0, %r#1, %r#2 : tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>
  }
  func.func private @__flex_attention_0(tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>) -> (tensor<2x4x8x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.scale = 5.000000e-01 : f64, flex.enable_gqa, flex.return_lse = true}
  func.func private @__flex_backward_0(tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x4x8x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8x4xf16>) -> (tensor<2x4x8x4xf16>, tensor<2x2x8x4xf16>, tensor<2x2x8x4xf16>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 5.000000e-01 : f64, flex.enable_gqa}
}
