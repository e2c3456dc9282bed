// RUN: flex-opt %s -split-input-file --flex-decompose-attention-backward-tile="tile-m=16 tile-n=16 vectorize=0" | FileCheck %s
// RUN: flex-opt %s -split-input-file --flex-decompose-attention-backward-tile="tile-m=16 tile-n=16" | FileCheck %s --check-prefix=VEC

// The tile stage of flex-backward-to-flash on a (b, hkv) tile (one kv
// head, its G = 2 query heads, global offsets): its own pre-pass and K/V
// layout, then the block loops. Without `vectorize` the five contractions
// are linalg ops: S = Q.K^T, dP = dO.V^T (K^T, V^T blocks), the score tile,
// dV_j += P^T.dO and dK_j += dS^T.Q (the [Mt, Nt] tile transposed), dQ_i +=
// dS.K.

// CHECK-LABEL: func.func @tile
// CHECK-SAME: %[[B0:[^:]+]]: index, %[[H0:[^:]+]]: index)
// Pre-pass and layout.
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: linalg.generic
// CHECK: linalg.transpose
// CHECK: linalg.transpose
// CHECK: scf.for %[[KB:[^ ]+]] =
// CHECK: scf.for %[[J:[^ ]+]] =
// CHECK: scf.for %[[B:[^ ]+]] =
// CHECK: scf.for %[[G:[^ ]+]] =
// CHECK: scf.for %[[I:[^ ]+]] =
// Global indices: batch B0 + b, head H0 + g.
// CHECK: %[[BG:.+]] = arith.addi %[[B0]], %[[B]] : index
// CHECK: %[[HG:.+]] = arith.addi %[[H0]], %[[G]] : index
// CHECK: scf.if
// S = Q.K^T, scaled.
// CHECK: %[[S0:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: %[[S:.+]] = linalg.generic {{.+}} outs(%[[S0]] : tensor<16x16xf32>)
// CHECK: arith.mulf
// dP = dO.V^T.
// CHECK: %[[DP:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "reduction", "parallel"]
// P and dS on global indices (the mask applied unless the pair is full);
// the alibi score_mod reads its slope at H0 + g.
// CHECK: %[[PDS:.+]]:2 = scf.if
// CHECK: linalg.generic {{.+}} ins(%[[S]], %[[DP]], %{{.+}}, %{{.+}} : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK: tensor.extract %{{.+}}[%[[HG]]] : tensor<4xf32>
// CHECK: arith.cmpf one
// CHECK: arith.select
// dV_j += P^T.dO
// CHECK: %[[PT:.+]] = linalg.transpose ins(%[[PDS]]#0 : tensor<16x16xf32>)
// CHECK: linalg.generic {{.+}} ins(%[[PT]], %{{.+}} : tensor<16x16xf32>, tensor<16x4xf32>)
// dK_j += dS^T.Q
// CHECK: %[[DST:.+]] = linalg.transpose ins(%[[PDS]]#1 : tensor<16x16xf32>)
// CHECK: linalg.generic {{.+}} ins(%[[DST]], %{{.+}} : tensor<16x16xf32>, tensor<16x8xf32>)
// dQ_i += dS.K
// CHECK: linalg.generic {{.+}} ins(%[[PDS]]#1, %{{.+}} : tensor<16x16xf32>, tensor<16x8xf32>)
// CHECK: tensor.insert_slice

// VEC-LABEL: func.func @tile
// VEC: scf.if
// VEC-COUNT-5: vector.fma
func.func @tile(%q: tensor<1x2x32x8xf32>, %k: tensor<1x1x32x8xf32>, %v: tensor<1x1x32x4xf32>, %o: tensor<1x2x32x4xf32>, %lse: tensor<1x2x32xf32>, %do: tensor<1x2x32x4xf32>, %slopes: tensor<4xf32>, %dq0: tensor<1x2x32x8xf32>, %dk0: tensor<1x1x32x8xf32>, %dv0: tensor<1x1x32x4xf32>, %b0: index, %h0: index) -> (tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32xf32>, tensor<1x2x32x4xf32>)
      captures(%slopes : tensor<4xf32>)
      offsets(%b0, %h0)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>)
      scale(0.353553385) {kv_group_size = 2 : i64}
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %sl = tensor.extract %slopes[%h] : tensor<4xf32>
        %d = arith.subi %n, %m : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %x = arith.mulf %sl, %df : f32
        %y = arith.addf %s, %x : f32
        flex.yield %y : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>
  return %dq, %dk, %dv : tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>
}

// -----

// A tile with a capture gradient (ALiBi slopes, d/dslope = dS * (n - m)) and
// no caller-provided partials: its own zero-filled [C + 1] f32 partial,
// threaded through the block loops, scatter-added per point, then added
// into the init (rounded once) after the loops.

// CHECK-LABEL: func.func @tile_capture_grad
// CHECK: %[[PBUF:.+]] = bufferization.alloc_tensor() : tensor<5xf32>
// CHECK: %[[PART:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[PBUF]] : tensor<5xf32>)
// CHECK: %[[RES:.+]]:4 = scf.for {{.+}} iter_args({{.+}}, %{{.+}} = %[[PART]]) -> ({{.+}}, tensor<5xf32>)
// CHECK: linalg.generic {{.+}} outs({{.+}} : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xi32>)
// CHECK: tensor.extract %{{.+}} : tensor<16x16xi32>
// CHECK: tensor.insert %{{.+}} : tensor<5xf32>
// CHECK: %[[USED:.+]] = tensor.extract_slice %[[RES]]#3[0] [4] [1] : tensor<5xf32> to tensor<4xf32>
// CHECK: %[[DS:.+]] = linalg.generic {{.+}} iterator_types = ["parallel"]} ins(%[[USED]] : tensor<4xf32>)
// CHECK: return {{.+}}, %[[DS]]
func.func @tile_capture_grad(%q: tensor<1x2x32x8xf32>, %k: tensor<1x1x32x8xf32>, %v: tensor<1x1x32x4xf32>, %o: tensor<1x2x32x4xf32>, %lse: tensor<1x2x32xf32>, %do: tensor<1x2x32x4xf32>, %slopes: tensor<4xf32>, %dq0: tensor<1x2x32x8xf32>, %dk0: tensor<1x1x32x8xf32>, %dv0: tensor<1x1x32x4xf32>, %ds0: tensor<4xf32>, %b0: index, %h0: index) -> (tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>, tensor<4xf32>) {
  %dq, %dk, %dv, %ds = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32xf32>, tensor<1x2x32x4xf32>)
      captures(%slopes : tensor<4xf32>)
      offsets(%b0, %h0)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>)
      capture_grads(%ds0 : tensor<4xf32>) grad_captures [0]
      scale(0.353553385) {kv_group_size = 2 : i64}
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %sl = tensor.extract %slopes[%h] : tensor<4xf32>
        %d = arith.subi %n, %m : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %x = arith.mulf %sl, %df : f32
        %y = arith.addf %s, %x : f32
        flex.yield %y : f32
      } joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        %d = arith.subi %n, %m : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %x = arith.mulf %g, %df : f32
        flex.yield %g, %x, %h : f32, f32, index
      } -> tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>, tensor<4xf32>
  return %dq, %dk, %dv, %ds : tensor<1x2x32x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>, tensor<4xf32>
}
