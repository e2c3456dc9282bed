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

// Capture gradients (a learnable relative-position bias bias[h, m - n + 15]):
// each tile scatter-adds the joint's contributions of its live pairs into
// its own zero-filled f32 row of [numTiles, C + 1] partials (C = 2 * 31; the
// last column absorbs masked / out-of-range points), reduced over the
// tiles into the capture gradient after the forall.

// CHECK-LABEL: func.func @capture_grads
// CHECK: %[[PBUF:.+]] = bufferization.alloc_tensor() : tensor<2x63xf32>
// CHECK: %[[PART:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[PBUF]] : tensor<2x63xf32>)
// CHECK: %[[RES:.+]]:4 = scf.forall (%[[T:.+]]) in (2) shared_outs(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %[[POUT:.+]] = %[[PART]]) -> ({{.+}}, tensor<2x63xf32>)
// The tile's row of the partials, threaded through the block loops.
// CHECK: %[[ROW:.+]] = tensor.extract_slice %[[POUT]][%[[T]], 0] [1, 63] [1, 1] : tensor<2x63xf32> to tensor<63xf32>
// CHECK: %[[LOOP:.+]]:4 = scf.for {{.+}} iter_args({{.+}}, %{{.+}} = %[[ROW]]) -> ({{.+}}, tensor<63xf32>)
// The score tile also yields each point's contribution and flat index
// (62, the discard slot, unless kept and in bounds).
// CHECK: %[[SC:.+]]:4 = linalg.generic {{.+}} outs({{.+}} : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xi32>)
// CHECK: tensor.extract %{{.+}} : tensor<2x31xf32>
// CHECK: arith.cmpi ult, %{{.+}}, %c2
// CHECK: arith.cmpi ult, %{{.+}}, %c31
// CHECK: %[[FLAT:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[DISCARD:.+]] = arith.constant 62 : i32
// CHECK: arith.select %{{.+}}, %[[FLAT]], %[[DISCARD]] : i32
// CHECK: linalg.yield
// The scatter-add over the tile's points into its partial row.
// CHECK: scf.for %[[R:[^ ]+]] = {{.+}} iter_args(%[[P0:.+]] = %{{.+}}) -> (tensor<63xf32>)
// CHECK: scf.for %[[C:[^ ]+]] = {{.+}} iter_args(%[[P1:.+]] = %[[P0]]) -> (tensor<63xf32>)
// CHECK: %[[V:.+]] = tensor.extract %[[SC]]#2[%[[R]], %[[C]]] : tensor<16x16xf32>
// CHECK: %[[I32:.+]] = tensor.extract %[[SC]]#3[%[[R]], %[[C]]] : tensor<16x16xi32>
// CHECK: %[[I:.+]] = arith.index_cast %[[I32]] : i32 to index
// CHECK: %[[OLD:.+]] = tensor.extract %[[P1]][%[[I]]] : tensor<63xf32>
// CHECK: %[[NEW:.+]] = arith.addf %[[OLD]], %[[V]] : f32
// CHECK: tensor.insert %[[NEW]] into %[[P1]][%[[I]]] : tensor<63xf32>
// CHECK: scf.forall.in_parallel
// CHECK-COUNT-3: tensor.parallel_insert_slice
// CHECK: tensor.parallel_insert_slice %[[LOOP]]#3 into %[[POUT]][%[[T]], 0] [1, 63] [1, 1] : tensor<63xf32> into tensor<2x63xf32>
// After the forall: dbias = f32(init) + sum over the tiles of the rows.
// CHECK: %[[ACC0:.+]] = bufferization.alloc_tensor() : tensor<2x31xf32>
// CHECK: %[[ACC:.+]] = linalg.generic {{.+}} ins(%[[DB0:.+]] : tensor<2x31xf32>) outs(%[[ACC0]] : tensor<2x31xf32>)
// CHECK: %[[USED:.+]] = tensor.extract_slice %[[RES]]#3[0, 0] [2, 62] [1, 1] : tensor<2x63xf32> to tensor<2x62xf32>
// CHECK: %[[DB:.+]] = linalg.generic {indexing_maps = [#[[PMAP:.+]], #[[AMAP:.+]]], iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[USED]] : tensor<2x62xf32>) outs(%[[ACC]] : tensor<2x31xf32>)
// CHECK: arith.addf
// CHECK: return %[[RES]]#0, %[[RES]]#1, %[[RES]]#2, %[[DB]]
func.func @capture_grads(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %lse: tensor<1x2x16xf32>, %do: tensor<1x2x16x8xf32>, %bias: tensor<2x31xf32>, %dq0: tensor<1x2x16x8xf32>, %dk0: tensor<1x2x16x8xf32>, %dv0: tensor<1x2x16x8xf32>, %db0: tensor<2x31xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2x31xf32>) {
  %dq, %dk, %dv, %db = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>)
      captures(%bias : tensor<2x31xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      capture_grads(%db0 : tensor<2x31xf32>) grad_captures [0]
      scale(0.353553385)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %c15 = arith.constant 15 : index
        %d = arith.subi %m, %n : index
        %i = arith.addi %d, %c15 : index
        %x = tensor.extract %bias[%h, %i] : tensor<2x31xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        %c15 = arith.constant 15 : index
        %d = arith.subi %m, %n : index
        %i = arith.addi %d, %c15 : index
        flex.yield %g, %g, %h, %i : f32, f32, index, index
      } -> tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2x31xf32>
  return %dq, %dk, %dv, %db : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2x31xf32>
}

// -----

// An owned batch (Bkv = B = 2) tiles over (B, Hkv): the tile's row of the
// partials is b * Hkv + hkv. A bf16 capture gradient is accumulated in f32
// and rounded once after the reduction.

// CHECK-LABEL: func.func @capture_grads_batch_tiles_bf16
// CHECK: bufferization.alloc_tensor() : tensor<2x5xf32>
// CHECK: scf.forall (%[[B:.+]], %[[H:.+]]) in (2, 1) shared_outs({{.+}}) -> ({{.+}}, tensor<2x5xf32>)
// CHECK: %[[C1:.+]] = arith.constant 1 : index
// CHECK: %[[BH:.+]] = arith.muli %[[B]], %[[C1]] : index
// CHECK: %[[T:.+]] = arith.addi %[[BH]], %[[H]] : index
// CHECK: tensor.extract_slice %{{.+}}[%[[T]], 0] [1, 5] [1, 1] : tensor<2x5xf32> to tensor<5xf32>
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK: scf.forall.in_parallel
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK: arith.truncf %{{.+}} : f32 to bf16
func.func @capture_grads_batch_tiles_bf16(%q: tensor<2x1x16x8xf32>, %k: tensor<2x1x16x8xf32>, %v: tensor<2x1x16x8xf32>, %o: tensor<2x1x16x8xf32>, %lse: tensor<2x1x16xf32>, %do: tensor<2x1x16x8xf32>, %w: tensor<4xbf16>, %dq0: tensor<2x1x16x8xf32>, %dk0: tensor<2x1x16x8xf32>, %dv0: tensor<2x1x16x8xf32>, %dw0: tensor<4xbf16>) -> (tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<4xbf16>) {
  %dq, %dk, %dv, %dw = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16xf32>, tensor<2x1x16x8xf32>)
      captures(%w : tensor<4xbf16>)
      outs(%dq0, %dk0, %dv0 : tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>)
      capture_grads(%dw0 : tensor<4xbf16>) grad_captures [0]
      scale(0.353553385)
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        %gb = arith.truncf %g : f32 to bf16
        flex.yield %g, %gb, %m : f32, bf16, index
      } -> tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<4xbf16>
  return %dq, %dk, %dv, %dw : tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<4xbf16>
}

// -----

// Partials over the bound (2 kv heads x (16M + 1) f32 > 64 MiB) stay on the
// scalar reference (flex-to-loops).

// CHECK-LABEL: func.func @capture_grads_too_large
// CHECK-NOT: scf.forall
// CHECK: flex.attention_backward
// REMARK: remark: flex-backward-to-flash: capture gradients: per-tile partial buffers of 134217736 bytes exceed 67108864 bytes; left for flex-to-loops
func.func @capture_grads_too_large(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %lse: tensor<1x2x16xf32>, %do: tensor<1x2x16x8xf32>, %bias: tensor<16777216xf32>, %dq0: tensor<1x2x16x8xf32>, %dk0: tensor<1x2x16x8xf32>, %dv0: tensor<1x2x16x8xf32>, %db0: tensor<16777216xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16777216xf32>) {
  %dq, %dk, %dv, %db = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>)
      captures(%bias : tensor<16777216xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      capture_grads(%db0 : tensor<16777216xf32>) grad_captures [0]
      scale(0.353553385)
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        flex.yield %g, %g, %n : f32, f32, index
      } -> tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16777216xf32>
  return %dq, %dk, %dv, %db : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16777216xf32>
}
