// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=16 tile-n=16" | FileCheck %s
// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=16 tile-n=16" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// The tiled (FA2) backward: the row pre-pass (delta, natural-log lse), K^T
// and V^T per key block, an scf.forall over (b, hkv) tiles, then per tile
// the key-block loop (dK_j, dV_j accumulators), the query batches, the G
// query heads and the query blocks, each (i, j) pair classified (scf.if
// skips empty pairs) before S = Q.K^T, dP = dO.V^T (broadcast-FMA), the
// score tile and dV_j += P^T.dO, dK_j += dS^T.Q, dQ_i += dS.K.

// CHECK-LABEL: func.func @causal_gqa
// Pre-pass: delta = sum_e dO * O, then (delta - glse / ln2, lse * ln2).
// CHECK: %[[DOT:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[STATS:.+]]:2 = linalg.generic {{.+}} ins(%[[DOT]], %{{.+}}, %{{.+}} :
// CHECK: arith.subf
// CHECK: arith.constant 0.693147182 : f32
// K^T and V^T per key block (the forward's layout), in parallel.
// CHECK: scf.forall
// CHECK: linalg.transpose
// CHECK: scf.forall
// CHECK: linalg.transpose
// One tile per (b, hkv): grad_query, grad_key, grad_value shared outs.
// CHECK: scf.forall (%{{.+}}, %{{.+}}) in (2, 2) shared_outs(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (tensor<2x4x40x8xf32>, tensor<2x2x40x8xf32>, tensor<2x2x40x4xf32>)
// The tile's slices of the pre-pass.
// CHECK: tensor.extract_slice %[[STATS]]#0
// CHECK: tensor.extract_slice %[[STATS]]#1
// Q, dO, lse, delta and the f32 dQ accumulator padded to whole query blocks.
// CHECK: tensor.pad
// kv batches, key blocks j (dK_j, dV_j = 0), query batches, heads, blocks i.
// CHECK: scf.for %[[KB:[^ ]+]] =
// CHECK: scf.for %[[J:[^ ]+]] =
// CHECK: linalg.fill
// CHECK: linalg.fill
// CHECK: scf.for %[[B:[^ ]+]] =
// CHECK: scf.for %[[G:[^ ]+]] =
// CHECK: scf.for %[[I:[^ ]+]] =
// Interval classification of the causal mask; empty pairs skipped.
// CHECK: arith.cmpi sge
// CHECK: %[[LIVE:.+]] = arith.xori
// CHECK: scf.if %[[LIVE]]
// S = scale Q.K^T and dP = dO.V^T: broadcast-FMA kernels.
// CHECK: vector.fma
// CHECK: arith.mulf {{.+}} : vector<16xf32>
// CHECK: vector.fma
// Full pairs drop mask_mod: the score tile with and without the mask.
// CHECK: scf.if
// CHECK: linalg.generic
// CHECK: arith.cmpi sge
// CHECK: } else {
// CHECK: linalg.generic
// CHECK-NOT: arith.cmpi sge
// CHECK: }
// dV_j += P^T.dO, dK_j += dS^T.Q (lhs read transposed), dQ_i += dS.K.
// CHECK: vector.fma
// CHECK: vector.fma
// CHECK: vector.fma
// CHECK: tensor.insert_slice
// After the query loops: grad_key, grad_value rows of block j += dK_j, dV_j.
// CHECK: linalg.generic
// CHECK: tensor.insert_slice
// CHECK: linalg.generic
// CHECK: tensor.insert_slice
// CHECK: scf.forall.in_parallel
// CHECK-COUNT-3: tensor.parallel_insert_slice
// CHECK: flex.block_classification = "interval", flex.tiles = array<i64: 16, 16>
func.func @causal_gqa(%q: tensor<2x4x40x8xf32>, %k: tensor<2x2x40x8xf32>, %v: tensor<2x2x40x4xf32>, %o: tensor<2x4x40x4xf32>, %lse: tensor<2x4x40xf32>, %do: tensor<2x4x40x4xf32>, %gl: tensor<2x4x40xf32>, %dq0: tensor<2x4x40x8xf32>, %dk0: tensor<2x2x40x8xf32>, %dv0: tensor<2x2x40x4xf32>) -> (tensor<2x4x40x8xf32>, tensor<2x2x40x8xf32>, tensor<2x2x40x4xf32>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<2x4x40x8xf32>, tensor<2x2x40x8xf32>, tensor<2x2x40x4xf32>, tensor<2x4x40x4xf32>, tensor<2x4x40xf32>, tensor<2x4x40x4xf32>)
      grad_logsumexp(%gl : tensor<2x4x40xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<2x4x40x8xf32>, tensor<2x2x40x8xf32>, tensor<2x2x40x4xf32>)
      scale(0.353553385)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<2x4x40x8xf32>, tensor<2x2x40x8xf32>, tensor<2x2x40x4xf32>
  return %dq, %dk, %dv : tensor<2x4x40x8xf32>, tensor<2x2x40x8xf32>, tensor<2x2x40x4xf32>
}

// -----

// A broadcast key batch (Bkv = 1 < B): tiles over Hkv only, the query
// batches summed into one kv head's dK / dV inside the tile.

// CHECK-LABEL: func.func @broadcast_kv_batch
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs({{.+}}) -> (tensor<3x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
// The kv batch's query batches: itself when Bkv == B, else all of them.
// CHECK: scf.for
// CHECK: %[[SAME:.+]] = arith.cmpi eq
// CHECK: %[[LO:.+]] = arith.select %[[SAME]]
// CHECK: %[[HI:.+]] = arith.select %[[SAME]]
// CHECK: scf.for
// CHECK: scf.for %{{.+}} = %[[LO]] to %[[HI]]
func.func @broadcast_kv_batch(%q: tensor<3x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<3x2x16x8xf32>, %lse: tensor<3x2x16xf32>, %do: tensor<3x2x16x8xf32>, %dq0: tensor<3x2x16x8xf32>, %dk0: tensor<1x2x16x8xf32>, %dv0: tensor<1x2x16x8xf32>) -> (tensor<3x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<3x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<3x2x16x8xf32>, tensor<3x2x16xf32>, tensor<3x2x16x8xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<3x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      scale(0.353553385)
      -> tensor<3x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
  return %dq, %dk, %dv : tensor<3x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
}

// -----

// Capture gradients stay on the scalar reference (flex-to-loops).

// CHECK-LABEL: func.func @capture_grads
// CHECK-NOT: scf.forall
// CHECK: flex.attention_backward
// REMARK: remark: flex-backward-to-flash: capture gradients; left for flex-to-loops
func.func @capture_grads(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x16x8xf32>, %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>, %lse: tensor<1x1x16xf32>, %do: tensor<1x1x16x8xf32>, %bias: tensor<16xf32>, %dq0: tensor<1x1x16x8xf32>, %dk0: tensor<1x1x16x8xf32>, %dv0: tensor<1x1x16x8xf32>, %db0: tensor<16xf32>) -> (tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<16xf32>) {
  %dq, %dk, %dv, %db = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16xf32>, tensor<1x1x16x8xf32>)
      captures(%bias : tensor<16xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      capture_grads(%db0 : tensor<16xf32>) grad_captures [0]
      scale(0.353553385)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%n] : tensor<16xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        flex.yield %g, %g, %n : f32, f32, index
      } -> tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<16xf32>
  return %dq, %dk, %dv, %db : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<16xf32>
}
