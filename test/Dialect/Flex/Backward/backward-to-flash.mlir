// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=16 tile-n=16" | FileCheck %s
// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=16 tile-n=16" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=16 tile-n=16 bf16-dot=1" | FileCheck %s --check-prefix=BF16

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
// bf16-dot leaves f32 inputs on the broadcast-FMA kernels.
// BF16-LABEL: func.func @causal_gqa
// BF16-NOT: x86vector
// BF16-NOT: vector.interleave
// BF16: vector.fma
// BF16-NOT: x86vector
// BF16: return
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

// -----

// bf16-dot: K^T and V^T in bf16 pairs of E per key block ([Np/Nt * E/2,
// 2 Nt]) and K rows in pairs of keys ([Np/2, 2 E]), per kv head in
// scf.foralls; each tile packs its Q and dO in pairs of query rows in
// scf.for loops (no forall inside the tile's forall). A live pair runs the
// five contractions on x86vector.avx512.dot: S = scale Q.K^T (the sums
// scaled before they are written) and dP = dO.V^T on the key pairs; P and
// dS rounded to bf16 and packed in pairs of query rows, the lhs words of
// dV += P^T.dO (Ev = 4: 4-lane dots) and dK += dS^T.Q read at
// [k2, 2 row]; dS rounded row by row for dQ += dS.K. No f32 FMA kernel.
// Without the option (CHECK): the FMA kernels.
// CHECK-LABEL: func.func @bf16_dot
// CHECK-NOT: x86vector
// CHECK: vector.fma
// CHECK-NOT: x86vector
// CHECK: return
// BF16-LABEL: func.func @bf16_dot
// BF16: %[[KP:.+]] = scf.forall ({{.+}}) in (1, 2) shared_outs({{.+}}) -> (tensor<1x2x8x32xbf16>)
// BF16: %[[KR:.+]] = scf.forall ({{.+}}) in (1, 2) shared_outs({{.+}}) -> (tensor<1x2x16x16xbf16>)
// BF16: vector.interleave {{.+}} : vector<8xbf16> -> vector<16xbf16>
// BF16: %[[VP:.+]] = scf.forall ({{.+}}) in (1, 2) shared_outs({{.+}}) -> (tensor<1x2x4x32xbf16>)
// The (b, hkv) tiles; Q and dO pairs inside, in loops.
// BF16: scf.forall ({{.+}}) in (1, 2) shared_outs(
// BF16-NOT: scf.forall
// BF16: vector.interleave {{.+}} : vector<8xbf16> -> vector<16xbf16>
// BF16: scf.yield {{.+}} : tensor<1x1x16x16xbf16>
// BF16: vector.interleave {{.+}} : vector<4xbf16> -> vector<8xbf16>
// BF16: scf.yield {{.+}} : tensor<1x1x16x8xbf16>
// Key block j: the pair tiles of K^T, V^T and K rows.
// BF16: tensor.extract_slice %[[KP]]{{.+}} [1, 1, 4, 32] [1, 1, 1, 1] : tensor<1x2x8x32xbf16> to tensor<4x32xbf16>
// BF16: tensor.extract_slice %[[VP]]{{.+}} [1, 1, 2, 32] [1, 1, 1, 1] : tensor<1x2x4x32xbf16> to tensor<2x32xbf16>
// BF16: tensor.extract_slice %[[KR]]{{.+}} [1, 1, 8, 16] [1, 1, 1, 1] : tensor<1x2x16x16xbf16> to tensor<8x16xbf16>
// BF16: scf.if
// S = scale Q.K^T: a Q pair broadcast as one i32 word, 4 rows x 1 piece.
// BF16: vector.bitcast {{.+}} : vector<2xbf16> to vector<1xi32>
// BF16: vector.broadcast {{.+}} : vector<1xi32> to vector<16xi32>
// BF16: x86vector.avx512.dot {{.+}} : vector<32xbf16> -> vector<16xf32>
// BF16: arith.mulf {{.+}} : vector<16xf32>
// dP = dO.V^T.
// BF16: x86vector.avx512.dot {{.+}} : vector<32xbf16> -> vector<16xf32>
// The score tile.
// BF16: linalg.generic
// P^T pairs: rows 2 k2 and 2 k2 + 1 of P rounded and interleaved.
// BF16: %[[PP:.+]] = scf.for {{.+}} -> (tensor<8x32xbf16>)
// BF16: %[[P0:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// BF16: %[[P1:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// BF16: vector.interleave %[[P0]], %[[P1]] : vector<16xbf16> -> vector<32xbf16>
// dV += P^T.dO: the word of (P[2 k2, row], P[2 k2 + 1, row]) at [k2, 2 row].
// BF16: scf.for %[[ROW:[^ ]+]] = {{.+}} -> (tensor<16x4xf32>)
// BF16: scf.for %[[K2:[^ ]+]] =
// BF16: %[[COL:.+]] = arith.muli %[[ROW]], %{{.+}} : index
// BF16: vector.transfer_read %[[PP]][%[[K2]], %[[COL]]]{{.+}} : tensor<8x32xbf16>, vector<2xbf16>
// BF16: x86vector.avx512.dot {{.+}} : vector<8xbf16> -> vector<4xf32>
// dS^T pairs, dK += dS^T.Q.
// BF16: vector.interleave {{.+}} : vector<16xbf16> -> vector<32xbf16>
// BF16: x86vector.avx512.dot {{.+}} : vector<16xbf16> -> vector<8xf32>
// dS rounded row by row (no interleave), dQ += dS.K.
// BF16: arith.truncf {{.+}} : vector<16xf32> to vector<16xbf16>
// BF16-NOT: vector.interleave
// BF16: x86vector.avx512.dot {{.+}} : vector<16xbf16> -> vector<8xf32>
// BF16-NOT: vector.fma
// BF16: return
func.func @bf16_dot(%q: tensor<1x2x32x8xbf16>, %k: tensor<1x2x32x8xbf16>, %v: tensor<1x2x32x4xbf16>, %o: tensor<1x2x32x4xbf16>, %lse: tensor<1x2x32xf32>, %do: tensor<1x2x32x4xbf16>, %dq0: tensor<1x2x32x8xbf16>, %dk0: tensor<1x2x32x8xbf16>, %dv0: tensor<1x2x32x4xbf16>) -> (tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16>, tensor<1x2x32x4xbf16>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16>, tensor<1x2x32x4xbf16>, tensor<1x2x32x4xbf16>, tensor<1x2x32xf32>, tensor<1x2x32x4xbf16>)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16>, tensor<1x2x32x4xbf16>)
      scale(0.353553385)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16>, tensor<1x2x32x4xbf16>
  return %dq, %dk, %dv : tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16>, tensor<1x2x32x4xbf16>
}

// -----

// bf16-dot cannot pair a value row of 6 lanes (dV's width, dP's
// reduction is fine): the whole backward stays on the FMA kernels.
// BF16-LABEL: func.func @bf16_dot_unpairable
// BF16-NOT: x86vector
// BF16-NOT: vector.interleave
// BF16: vector.fma
// BF16-NOT: x86vector
// BF16: return
func.func @bf16_dot_unpairable(%q: tensor<1x1x32x8xbf16>, %k: tensor<1x1x32x8xbf16>, %v: tensor<1x1x32x6xbf16>, %o: tensor<1x1x32x6xbf16>, %lse: tensor<1x1x32xf32>, %do: tensor<1x1x32x6xbf16>, %dq0: tensor<1x1x32x8xbf16>, %dk0: tensor<1x1x32x8xbf16>, %dv0: tensor<1x1x32x6xbf16>) -> (tensor<1x1x32x8xbf16>, tensor<1x1x32x8xbf16>, tensor<1x1x32x6xbf16>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x1x32x8xbf16>, tensor<1x1x32x8xbf16>, tensor<1x1x32x6xbf16>, tensor<1x1x32x6xbf16>, tensor<1x1x32xf32>, tensor<1x1x32x6xbf16>)
      outs(%dq0, %dk0, %dv0 : tensor<1x1x32x8xbf16>, tensor<1x1x32x8xbf16>, tensor<1x1x32x6xbf16>)
      scale(0.353553385)
      -> tensor<1x1x32x8xbf16>, tensor<1x1x32x8xbf16>, tensor<1x1x32x6xbf16>
  return %dq, %dk, %dv : tensor<1x1x32x8xbf16>, tensor<1x1x32x8xbf16>, tensor<1x1x32x6xbf16>
}
