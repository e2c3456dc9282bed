// RUN: flex-opt %s -split-input-file -flex-to-flash="vectorize=false" -canonicalize -cse | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-to-flash="tile-m=16 tile-n=32 block-sparsity=false vectorize=false" -canonicalize -cse | FileCheck %s --check-prefix=NOSKIP
// RUN: flex-opt %s -split-input-file -flex-to-flash -canonicalize -cse | FileCheck %s --check-prefix=VEC
// RUN: flex-opt %s -split-input-file -flex-to-flash="bf16-dot=true" -canonicalize -cse | FileCheck %s --check-prefix=BF16
// RUN: flex-opt %s -split-input-file -flex-to-flash="serial-below-us=250" | FileCheck %s --check-prefix=SERIAL
// RUN: flex-opt %s -split-input-file -flex-to-flash="amx=true" -canonicalize -cse | FileCheck %s --check-prefix=AMX

// Causal mask, the whole driver: K^T laid out once, row tiles from the
// TilingInterface (scf.forall over (h, m0), step (1, 64)), a loop over key
// blocks carrying the online-softmax state, analytic block classification,
// each block's flex.online_attention decomposed into Q.K^T, scores on
// global indices, the softmax update and P.V, then the normalization.
// CHECK-LABEL: func.func @causal
// K^T per key block ([2, E, Nt]), one transpose per (batch, kv head) in
// its own forall:
// CHECK: %[[KT:.*]] = scf.forall (%{{.*}}) in (4) shared_outs(%{{.*}}) -> (tensor<1x4x2x32x64xf32>)
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [2, 64, 32] : tensor<128x32xf32> into tensor<2x64x32xf32>
// CHECK: linalg.transpose ins(%{{.*}} : tensor<2x64x32xf32>) outs(%{{.*}} : tensor<2x32x64xf32>) permutation = [0, 2, 1]
// CHECK: tensor.parallel_insert_slice
// (the unit batch loop is folded away by -canonicalize)
// CHECK: scf.forall (%[[H:.*]], %[[M0:.*]]) = (0, 0) to (4, 128) step (1, 64) shared_outs(%[[O:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}})
// CHECK: %[[QS:.*]] = tensor.extract_slice %{{.*}}[0, %[[H]], %[[M0]], 0] [1, 1, 64, 32] [1, 1, 1, 1] : tensor<1x4x128x32xf32> to tensor<1x1x64x32xf32>
// CHECK: %[[QT:.*]] = tensor.extract_slice %[[QS]][0, 0, 0, 0] [1, 1, 64, 32] [1, 1, 1, 1] : tensor<1x1x64x32xf32> to tensor<64x32xf32>
// CHECK: %[[MHI:.*]] = arith.addi %[[M0]], %c63
// CHECK: scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[MX:.*]] = %{{.*}}, %[[LS:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<64xf32>, tensor<64xf32>, tensor<64x32xf32>)
// CHECK: %[[N0:.*]] = arith.muli %[[J]], %c64
// CHECK: %[[NHI:.*]] = arith.addi %[[N0]], %c63
// Block classification: all kept iff m_lo >= n_hi, none iff m_hi < n_lo.
// CHECK: %[[NHIC:.*]] = arith.minsi %[[NHI]], %c127
// CHECK: %[[FULL:.*]] = arith.cmpi sge, %[[M0]], %[[NHIC]] : index
// CHECK: %[[EMPTY:.*]] = arith.cmpi slt, %[[MHI]], %[[N0]] : index
// CHECK: scf.if %[[EMPTY]]
// CHECK-NEXT: scf.yield %[[MX]], %[[LS]], %[[ACC]]
// CHECK: } else {
// One copy of the block for full and partial ones: Q.K^T once, then the
// scores without the mask when the block is full, with it otherwise.
// CHECK: %[[JB:.*]] = arith.divui %[[N0]], %c64 : index
// CHECK: tensor.extract_slice %[[KT]][0, %[[H]], %[[JB]], 0, 0] [1, 1, 1, 32, 64]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} ins(%[[QT]], %{{.*}} : tensor<64x32xf32>, tensor<32x64xf32>) outs(%{{.*}} : tensor<64x64xf32>)
// CHECK: scf.if %[[FULL]] -> (tensor<64x64xf32>)
// CHECK: arith.mulf
// CHECK-NOT: arith.cmpi
// CHECK: } else {
// The scores see global indices: m0 + linalg.index 0, n0 + linalg.index 1.
// CHECK: arith.mulf
// CHECK: %[[IM:.*]] = linalg.index 0 : index
// CHECK: %[[IN:.*]] = linalg.index 1 : index
// CHECK: %[[GM:.*]] = arith.addi %[[M0]], %[[IM]] : index
// CHECK: %[[GN:.*]] = arith.addi %[[N0]], %[[IN]] : index
// CHECK: %[[KEEP:.*]] = arith.cmpi sge, %[[GM]], %[[GN]] : index
// CHECK: arith.select %[[KEEP]]
// Online-softmax update: block max, new max, correction exp(m_old - m_new), l *= corr.
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}}outs(%{{.*}} : tensor<64xf32>)
// CHECK: arith.cmpf ugt
// CHECK: linalg.generic {{.*}}ins(%{{.*}} : tensor<64xf32>) outs(%[[MX]], %[[LS]], %{{.*}} : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK: arith.cmpf ugt
// CHECK: arith.subf
// CHECK: math.floor
// CHECK: arith.mulf
// P = exp(S - m), then the row sum, acc *= corr, acc += P V.
// CHECK: linalg.generic
// CHECK: math.floor
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}}outs(%[[ACC]] : tensor<64x32xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} outs(%{{.*}} : tensor<64x32xf32>)
// (no second copy of the contractions)
// CHECK-NOT: iterator_types = ["parallel", "reduction", "parallel"]
// Normalization: fully masked rows (max = -inf) give 0; lse in log2 units.
// CHECK: arith.divf
// CHECK: arith.cmpf oeq
// CHECK: arith.select
// CHECK: math.log
// CHECK: arith.mulf %{{.*}}, %cst_{{.*}} : f32
// CHECK: scf.forall.in_parallel
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[O]][0, %[[H]], %[[M0]], 0] [1, 1, 64, 32]
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[L]][0, %[[H]], %[[M0]]] [1, 1, 64]
// What the pass chose, kept on the forall for torch_mlir_flex's logging:
// CHECK: } {flex.block_classification = "interval", flex.tiles = array<i64: 64, 64>}
// No tensor of size B*H*M*N:
// CHECK-NOT: tensor<1x4x128x128xf32>
// VEC-LABEL: func.func @causal
// K^T as 16 x 16 vector blocks, one transpose per block:
// VEC: scf.forall (%{{.*}}) in (4) shared_outs(%{{.*}}) -> (tensor<1x4x2x32x64xf32>)
// VEC: scf.for %{{.*}} = %c0 to %c128 step %c16 iter_args(%{{.*}}) -> (tensor<2x32x64xf32>)
// VEC: scf.for %{{.*}} = %c0 to %c32 step %c16 iter_args(%{{.*}}) -> (tensor<2x32x64xf32>)
// VEC-COUNT-16: vector.transfer_read {{.*}} : tensor<128x32xf32>, vector<16xf32>
// VEC: vector.from_elements
// VEC-COUNT-16: vector.transfer_write {{.*}} : vector<16xf32>, tensor<2x32x64xf32>
// Q.K^T in two column chunks of 32 (kQKChunk), 8 rows x 2 registers, as
// one kernel in a loop over the chunk's column offset:
// VEC: scf.for %[[COL:.*]] = %c0 to %c64 step %c32 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// VEC: scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// VEC: scf.for {{.*}} = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// VEC: vector.transfer_read {{.*}}[%{{.*}}, %[[COL]]], {{.*}} {in_bounds = [true]} : tensor<32x64xf32>, vector<32xf32>
// VEC: vector.fma {{.*}} : vector<32xf32>
// VEC: vector.transfer_write {{.*}}[%{{.*}}, %[[COL]]] {in_bounds = [true]} : vector<32xf32>, tensor<64x64xf32>
// VEC-NOT: vector.transfer_read {{.*}} : tensor<32x64xf32>, vector<32xf32>
// VEC: linalg.generic
// VEC: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
// VEC: vector.extract_strided_slice {{.*}} : vector<64xf32> to vector<32xf32>
// VEC: math.floor {{.*}} : vector<64xf32>
// VEC: tensor.insert
// VEC: scf.for {{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (tensor<64x32xf32>)
// VEC: arith.mulf {{.*}} : vector<32xf32>
// VEC: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// VEC: vector.fma {{.*}} : vector<32xf32>
// VEC: scf.forall.in_parallel
// VEC-NOT: tensor<1x4x128x128xf32>
// NOSKIP-LABEL: func.func @causal
// NOSKIP: scf.forall {{.*}} = (0, 0) to (4, 128) step (1, 16)
// NOSKIP: scf.for {{.*}} -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>)
// NOSKIP-NOT: scf.if
// NOSKIP: scf.forall.in_parallel
// NOSKIP: } {flex.block_classification = "none", flex.tiles = array<i64: 16, 32>}
func.func @causal(%q: tensor<1x4x128x32xf32>, %k: tensor<1x4x128x32xf32>, %v: tensor<1x4x128x32xf32>) -> (tensor<1x4x128x32xf32>, tensor<1x4x128xf32>) {
  %o = tensor.empty() : tensor<1x4x128x32xf32>
  %l = tensor.empty() : tensor<1x4x128xf32>
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>)
      outs(%o : tensor<1x4x128x32xf32>) logsumexp(%l : tensor<1x4x128xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x4x128x32xf32>, tensor<1x4x128xf32>
  return %r#0, %r#1 : tensor<1x4x128x32xf32>, tensor<1x4x128xf32>
}

// -----

// GQA 4:1 (kv head = h / 4), KV batch broadcast, captured per-head bias
// read with tensor.extract inside the score generic, Ev != E.
// CHECK-LABEL: func.func @gqa_capture
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]]) in (2, 8)
// CHECK: %[[KH:.*]] = arith.divui %[[H]], %c4 : index
// CHECK: tensor.extract_slice %{{.*}}[0, %[[KH]], 0, 0, 0] [1, 1, 1, 16, 64] {{.*}} to tensor<16x64xf32>
// CHECK: tensor.extract_slice %{{.*}}[0, %[[KH]], 0, 0] [1, 1, 64, 24] {{.*}} to tensor<64x24xf32>
// CHECK: linalg.generic
// CHECK: tensor.extract %{{.*}}[%[[H]]] : tensor<8xf32>
// CHECK-NOT: scf.if
// CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[B]], %[[H]], 0, 0] [1, 1, 64, 24]
func.func @gqa_capture(%q: tensor<2x8x64x16xf32>, %k: tensor<1x2x64x16xf32>, %v: tensor<1x2x64x24xf32>, %bias: tensor<8xf32>) -> tensor<2x8x64x24xf32> {
  %o = tensor.empty() : tensor<2x8x64x24xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<2x8x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x24xf32>)
      captures(%bias : tensor<8xf32>)
      outs(%o : tensor<2x8x64x24xf32>) scale(0.25)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h] : tensor<8xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } -> tensor<2x8x64x24xf32>
  return %r : tensor<2x8x64x24xf32>
}

// -----

// Decode: M = 1 (Mt = 1), N = 300 in blocks of Nt = 128: two whole blocks
// in a loop, then the last 44 keys padded to a block; padded key columns
// are masked to -inf and the region sees kv_idx clamped to N - 1. Without
// vectorize K is transposed (a copy padded to 384 keys) and V is read in
// place; with it (VEC) K rows are read in place too: only the tails are
// copied, never all of K or V.
// CHECK-LABEL: func.func @decode
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 256, 0] [1, 4, 44, 64]
// CHECK: tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 84, 0]
// CHECK: tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 84, 0]
// CHECK: scf.forall {{.*}} in (4)
// CHECK: scf.forall {{.*}} in (4)
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1
// CHECK: linalg.generic
// CHECK: %[[IN:.*]] = linalg.index 1 : index
// CHECK: %[[N:.*]] = arith.addi %{{.*}}, %[[IN]] : index
// CHECK: %[[NC:.*]] = arith.minsi %[[N]], %c299 : index
// CHECK: arith.index_cast %[[NC]]
// CHECK: %[[VALID:.*]] = arith.cmpi slt, %[[N]], %c300 : index
// CHECK: arith.select %[[VALID]]
// CHECK-NOT: tensor<1x4x1x300xf32>
// VEC-LABEL: func.func @decode
// VEC-NOT: tensor<1x4x384x64xf32>
// VEC: %[[KT:.*]] = tensor.pad %{{.*}} high[0, 0, 84, 0]
// VEC: %[[VT:.*]] = tensor.pad %{{.*}} high[0, 0, 84, 0]
// VEC: scf.forall (%[[H:.*]]) in (4)
// VEC: scf.for %{{.*}} = %c0 to %c2 step %c1
// VEC: tensor.extract_slice %arg1[0, %[[H]], %{{.*}}, 0] [1, 1, 128, 64] {{.*}} : tensor<1x4x300x64xf32> to tensor<128x64xf32>
// VEC: tensor.extract_slice %arg2[0, %[[H]], %{{.*}}, 0] [1, 1, 128, 64] {{.*}} : tensor<1x4x300x64xf32> to tensor<128x64xf32>
// VEC: tensor.extract_slice %[[KT]][0, %[[H]], 0, 0] [1, 1, 128, 64] {{.*}} : tensor<1x4x128x64xf32> to tensor<128x64xf32>
// VEC: tensor.extract_slice %[[VT]][0, %[[H]], 0, 0] [1, 1, 128, 64] {{.*}} : tensor<1x4x128x64xf32> to tensor<128x64xf32>
// VEC-NOT: tensor<1x4x384x64xf32>
// VEC: return
func.func @decode(%q: tensor<1x4x1x64xf32>, %k: tensor<1x4x300x64xf32>, %v: tensor<1x4x300x64xf32>) -> tensor<1x4x1x64xf32> {
  %o = tensor.empty() : tensor<1x4x1x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x4x1x64xf32>, tensor<1x4x300x64xf32>, tensor<1x4x300x64xf32>)
      outs(%o : tensor<1x4x1x64xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %i = arith.index_cast %n : index to i64
        %f = arith.sitofp %i : i64 to f32
        %t = arith.addf %s, %f : f32
        flex.yield %t : f32
      } -> tensor<1x4x1x64xf32>
  return %r : tensor<1x4x1x64xf32>
}

// -----

// A mask reading a captured tensor (document ids): the interval analysis
// bounds doc over the row tile's rows (once per row tile, ahead of the key
// loop) and over each key block's keys (a min / max loop over each index
// range: Mt and Nt reads), then classifies the block by comparing the two
// ranges: empty when disjoint, full when both are the same single id. No
// dense Mt x Nt pre-pass.
// CHECK-LABEL: func.func @document
// CHECK-SAME: %[[DOC:[^:]*]]: tensor<128xi64>) -> tensor<1x2x128x16xf32>
// CHECK: scf.forall (%[[H:.*]], %[[M0:.*]]) = (0, 0) to (2, 128) step (1, 64)
// CHECK: %[[MHI:.*]] = arith.addi %[[M0]], %c63
// Rows of the tile, clamped to the capture's extent:
// CHECK: %[[QLO0:.*]] = arith.maxsi %[[M0]], %c0
// CHECK: %[[QLO:.*]] = arith.minsi %[[QLO0]], %c127
// CHECK: %[[QHI0:.*]] = arith.maxsi %[[MHI]], %c0
// CHECK: %[[QHI:.*]] = arith.minsi %[[QHI0]], %c127
// CHECK: %[[QUB:.*]] = arith.addi %[[QHI]], %c1
// CHECK: %[[QR:.*]]:2 = scf.for %[[I:.*]] = %[[QLO]] to %[[QUB]] step %c1 iter_args({{.*}}) -> (i64, i64) {
// CHECK: %[[D:.*]] = tensor.extract %[[DOC]][%[[I]]] : tensor<128xi64>
// CHECK: arith.minsi %{{.*}}, %[[D]] : i64
// CHECK: arith.maxsi %{{.*}}, %[[D]] : i64
// CHECK: }
// CHECK: %[[QPOINT:.*]] = arith.cmpi eq, %[[QR]]#0, %[[QR]]#1 : i64
// CHECK: scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[MX:.*]] = %{{.*}}, %[[LS:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<64xf32>, tensor<64xf32>, tensor<64x16xf32>)
// CHECK: %[[N0:.*]] = arith.muli %[[J]], %c64
// Keys of the block:
// CHECK: %[[KLO0:.*]] = arith.maxsi %[[N0]], %c0
// CHECK: %[[KLO:.*]] = arith.minsi %[[KLO0]], %c127
// CHECK: %[[KR:.*]]:2 = scf.for %[[I2:.*]] = %[[KLO]] to %{{.*}} step %c1 iter_args({{.*}}) -> (i64, i64) {
// CHECK: tensor.extract %[[DOC]][%[[I2]]] : tensor<128xi64>
// CHECK: }
// full: both ranges are the same point; empty: disjoint.
// CHECK-DAG: %[[E1:.*]] = arith.cmpi eq, %[[QR]]#0, %[[KR]]#0 : i64
// CHECK-DAG: %[[E2:.*]] = arith.cmpi eq, %[[KR]]#0, %[[KR]]#1 : i64
// CHECK-DAG: arith.andi %[[QPOINT]], %[[E2]] : i1
// CHECK-DAG: %[[D1:.*]] = arith.cmpi slt, %[[KR]]#1, %[[QR]]#0 : i64
// CHECK-DAG: %[[D2:.*]] = arith.cmpi slt, %[[QR]]#1, %[[KR]]#0 : i64
// CHECK: %[[EMPTY:.*]] = arith.ori %[[D2]], %[[D1]] : i1
// CHECK: scf.if %[[EMPTY]]
// CHECK-NEXT: scf.yield %[[MX]], %[[LS]], %[[ACC]]
// CHECK: } else {
// CHECK: scf.if %{{.*}}
// CHECK-NOT: tensor.extract %[[DOC]]
// CHECK: } else {
// CHECK: linalg.generic
// CHECK: tensor.extract %[[DOC]]
// CHECK: } {flex.block_classification = "interval", flex.tiles = array<i64: 64, 64>}
func.func @document(%q: tensor<1x2x128x16xf32>, %k: tensor<1x2x128x16xf32>, %v: tensor<1x2x128x16xf32>, %doc: tensor<128xi64>) -> tensor<1x2x128x16xf32> {
  %o = tensor.empty() : tensor<1x2x128x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32>)
      captures(%doc : tensor<128xi64>)
      outs(%o : tensor<1x2x128x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %dq = tensor.extract %doc[%m] : tensor<128xi64>
        %dk = tensor.extract %doc[%n] : tensor<128xi64>
        %c = arith.cmpi eq, %dq, %dk : i64
        flex.yield %c : i1
      } -> tensor<1x2x128x16xf32>
  return %r : tensor<1x2x128x16xf32>
}

// -----

// Dynamic M and N: K and V padded to a multiple of the key block; the last
// row tile is partial (affine.min): its Q rows are padded to the tile and
// only its valid rows are written back.
// CHECK-LABEL: func.func @dynamic
// CHECK: tensor.pad
// CHECK: scf.forall (%{{.*}}, %[[M0:.*]]) = (0, 0) to (2, %[[M:.*]]) step (1, 64)
// CHECK: %[[ROWS:.*]] = affine.min #{{.*}}(%[[M0]])[%[[M]]]
// CHECK: tensor.pad %{{.*}} low[0, 0] high[%{{.*}}, 0]
// CHECK: } : tensor<?x16xf32> to tensor<64x16xf32>
// CHECK: arith.minsi
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%[[ROWS]], 16] [1, 1] : tensor<64x16xf32> to tensor<?x16xf32>
func.func @dynamic(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>, %o: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%o : tensor<1x2x?x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----
// Dynamic head counts without kv_group_size: the group size is only known at
// run time, so the op is left for flex-to-loops.
// CHECK-LABEL: func.func @dynamic_heads
// CHECK-NOT: scf.forall
// CHECK: flex.attention
func.func @dynamic_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x?x8x16xf32>, %v: tensor<1x?x8x16xf32>, %o: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x?x8x16xf32>, tensor<1x?x8x16xf32>)
      outs(%o : tensor<1x4x8x16xf32>) scale(0.25) -> tensor<1x4x8x16xf32>
  return %r : tensor<1x4x8x16xf32>
}

// -----

// Dynamic head dimension: left for flex-to-loops with a remark.
// CHECK-LABEL: func.func @dynamic_e
// CHECK: flex.attention
func.func @dynamic_e(%q: tensor<1x2x8x?xf32>, %k: tensor<1x2x8x?xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x8x?xf32>, tensor<1x2x8x?xf32>, tensor<1x2x8x4xf32>)
      outs(%o : tensor<1x2x8x4xf32>) scale(0.25) -> tensor<1x2x8x4xf32>
  return %r : tensor<1x2x8x4xf32>
}

// -----

// Soft-capping: math.tanh in the score_mod becomes a polynomial (plain
// arithmetic that LLVM vectorizes) instead of a scalar tanhf call.
// VEC-LABEL: func.func @softcap
// VEC-NOT: math.tanh
// VEC: scf.forall.in_parallel
func.func @softcap(%q: tensor<1x2x64x16xf32>, %k: tensor<1x2x64x16xf32>, %v: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %o = tensor.empty() : tensor<1x2x64x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>)
      outs(%o : tensor<1x2x64x16xf32>) scale(0.25)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %c = arith.constant 2.000000e+01 : f32
        %d = arith.divf %s, %c : f32
        %t = math.tanh %d : f32
        %x = arith.mulf %t, %c : f32
        flex.yield %x : f32
      } -> tensor<1x2x64x16xf32>
  return %r : tensor<1x2x64x16xf32>
}

// -----

// Head dim 256 stays on the vector path: Q.K^T reduces over E = 256 with
// 8 rows of S in registers (chunks of 32 columns), and P.V splits the
// rows of acc (and V) into four column chunks of 64 (4 rows x 4 registers
// each), at offsets 0 .. 192 of one loop.
// VEC-LABEL: func.func @head_dim_256
// VEC-NOT: iterator_types = ["parallel", "reduction", "parallel"]
// VEC: scf.for {{.*}} = %c0 to %c256 step %c1 iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// VEC: vector.fma {{.*}} : vector<32xf32>
// The four chunks are one kernel in a loop over their column offset:
// VEC: scf.for %[[COL:.*]] = %c0 to %c256 step %c64 iter_args(%{{.*}}) -> (tensor<64x256xf32>)
// VEC: scf.for {{.*}} = %c0 to %c64 step %c4 iter_args(%{{.*}}) -> (tensor<64x256xf32>)
// VEC: vector.transfer_read {{.*}}[%{{.*}}, %[[COL]]], {{.*}} : tensor<64x256xf32>, vector<64xf32>
// VEC: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<64xf32>, vector<64xf32>, vector<64xf32>, vector<64xf32>)
// VEC: vector.transfer_read {{.*}}[%{{.*}}, %[[COL]]], {{.*}} : tensor<64x256xf32>, vector<64xf32>
// VEC: vector.fma {{.*}} : vector<64xf32>
// VEC: vector.transfer_write {{.*}}[%{{.*}}, %[[COL]]] {in_bounds = [true]} : vector<64xf32>, tensor<64x256xf32>
// VEC-NOT: vector.fma {{.*}} : vector<64xf32>
// VEC-NOT: iterator_types = ["parallel", "reduction", "parallel"]
// VEC: return
func.func @head_dim_256(%q: tensor<1x1x64x256xf32>, %k: tensor<1x1x64x256xf32>, %v: tensor<1x1x64x256xf32>) -> tensor<1x1x64x256xf32> {
  %o = tensor.empty() : tensor<1x1x64x256xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x256xf32>, tensor<1x1x64x256xf32>, tensor<1x1x64x256xf32>)
      outs(%o : tensor<1x1x64x256xf32>) scale(0.0625) -> tensor<1x1x64x256xf32>
  return %r : tensor<1x1x64x256xf32>
}

// -----

// Head dim 80 (not a power of two): one chunk of 80 columns, 2 rows of
// acc per step (5 registers each).
// VEC-LABEL: func.func @head_dim_80
// VEC-NOT: iterator_types = ["parallel", "reduction", "parallel"]
// VEC: scf.for {{.*}} = %c0 to %c80 step %c1 iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// VEC: scf.for {{.*}} = %c0 to %c64 step %c2 iter_args(%{{.*}}) -> (tensor<64x80xf32>)
// VEC: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<80xf32>, vector<80xf32>)
// VEC: vector.fma {{.*}} : vector<80xf32>
// VEC-NOT: iterator_types = ["parallel", "reduction", "parallel"]
// VEC: return
func.func @head_dim_80(%q: tensor<1x1x64x80xf32>, %k: tensor<1x1x64x80xf32>, %v: tensor<1x1x64x80xf32>) -> tensor<1x1x64x80xf32> {
  %o = tensor.empty() : tensor<1x1x64x80xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x80xf32>, tensor<1x1x64x80xf32>, tensor<1x1x64x80xf32>)
      outs(%o : tensor<1x1x64x80xf32>) scale(0.125) -> tensor<1x1x64x80xf32>
  return %r : tensor<1x1x64x80xf32>
}

// -----

// bf16-dot: V packed in pairs of key rows (rows 2i, 2i+1 interleaved)
// and K^T in pairs of E (per pair column, the pairs of 16 key rows
// gathered as i32 words), each per kv head in an scf.forall; Q.K^T
// broadcasts a (q[m, 2e], q[m, 2e+1]) pair as one i32 and issues one
// vdpbf16ps per 16 lanes of a row of S (4 rows x 4 pieces for Nt = 64);
// P is rounded to bf16 row by row before P.V (Ev = 32: 2 pieces, 4 rows).
// Without the option: the f32 broadcast-FMA kernels.
// BF16-LABEL: func.func @bf16_dot
// BF16: %[[VP:.*]] = scf.forall (%{{.*}}) in (2) shared_outs(%{{.*}}) -> (tensor<1x2x64x64xbf16>)
// BF16: scf.for %[[I:.*]] = %c0 to %c64 step %c1 iter_args(%{{.*}}) -> (tensor<64x64xbf16>)
// BF16: %[[R0I:.*]] = arith.muli %[[I]], %c2
// BF16: %[[R0:.*]] = vector.transfer_read %{{.*}}[%[[R0I]], %c0]{{.*}} : tensor<128x32xbf16>, vector<32xbf16>
// BF16: %[[R1I:.*]] = arith.addi %[[R0I]], %c1
// BF16: %[[R1:.*]] = vector.transfer_read %{{.*}}[%[[R1I]], %c0]{{.*}} : tensor<128x32xbf16>, vector<32xbf16>
// BF16: %[[IL:.*]] = vector.interleave %[[R0]], %[[R1]] : vector<32xbf16> -> vector<64xbf16>
// BF16: vector.transfer_write %[[IL]], %{{.*}}[%[[I]], %c0]{{.*}} : vector<64xbf16>, tensor<64x64xbf16>
// K^T in pairs, key block by key block: rows (n / 64) * 32 + p, columns
// 2 (n mod 64), so that a block's 32 x 128 tile is contiguous.
// BF16: %[[KP:.*]] = scf.forall (%{{.*}}) in (2) shared_outs(%{{.*}}) -> (tensor<1x2x64x128xbf16>)
// BF16: scf.for %[[NB:.*]] = %c0 to %c128 step %c16
// BF16: %[[BLK:.*]] = arith.divui %[[NB]], %c64
// BF16: %[[ROW0:.*]] = arith.muli %[[BLK]], %c32
// BF16: %[[INB:.*]] = arith.remui %[[NB]], %c64
// BF16: %[[COL:.*]] = arith.muli %[[INB]], %c2
// BF16: scf.for %[[P:.*]] = %c0 to %c32 step %c1
// BF16: %[[PE:.*]] = arith.muli %[[P]], %c2
// BF16: vector.transfer_read %{{.*}}[%[[NB]], %[[PE]]]{{.*}} : tensor<128x64xbf16>, vector<2xbf16>
// BF16: %[[WS:.*]] = vector.from_elements {{.*}} : vector<16xi32>
// BF16: %[[WB:.*]] = vector.bitcast %[[WS]] : vector<16xi32> to vector<32xbf16>
// BF16: %[[ROW:.*]] = arith.addi %[[ROW0]], %[[P]]
// BF16: vector.transfer_write %[[WB]], %{{.*}}[%[[ROW]], %[[COL]]]{{.*}} : vector<32xbf16>, tensor<64x128xbf16>
// BF16: scf.forall (%[[H:.*]], %{{.*}}) = (0, 0) to (2, 128) step (1, 64)
// BF16: scf.for %[[J:.*]] = %c0 to %c2 step %c1
// BF16: %[[N0:.*]] = arith.muli %[[J]], %c64
// BF16: %[[KB:.*]] = arith.divui %[[N0]], %c64
// BF16: %[[KROW:.*]] = arith.muli %[[KB]], %c32
// BF16: %[[KTILE:.*]] = tensor.extract_slice %[[KP]][0, %[[H]], %[[KROW]], 0] [1, 1, 32, 128] [1, 1, 1, 1] : tensor<1x2x64x128xbf16> to tensor<32x128xbf16>
// BF16: %[[VROW:.*]] = arith.divui %[[N0]], %c2
// BF16: %[[VTILE:.*]] = tensor.extract_slice %[[VP]][0, %[[H]], %[[VROW]], 0] [1, 1, 32, 64] [1, 1, 1, 1] : tensor<1x2x64x64xbf16> to tensor<32x64xbf16>
// BF16: scf.for %{{.*}} = %c0 to %c64 step %c4
// BF16: scf.for %[[E2:.*]] = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// BF16: %[[KR:.*]] = vector.transfer_read %[[KTILE]][%[[E2]], %c0]{{.*}} : tensor<32x128xbf16>, vector<32xbf16>
// BF16: %[[E:.*]] = arith.muli %[[E2]], %c2
// BF16: %[[QP:.*]] = vector.transfer_read %{{.*}}[%{{.*}}, %[[E]]]{{.*}} : tensor<64x64xbf16>, vector<2xbf16>
// BF16: %[[W:.*]] = vector.bitcast %[[QP]] : vector<2xbf16> to vector<1xi32>
// BF16: %[[WS:.*]] = vector.broadcast %[[W]] : vector<1xi32> to vector<16xi32>
// BF16: %[[QB:.*]] = vector.bitcast %[[WS]] : vector<16xi32> to vector<32xbf16>
// BF16: x86vector.avx512.dot %{{.*}}, %[[QB]], %[[KR]] : vector<32xbf16> -> vector<16xf32>
// BF16: arith.truncf %{{.*}} : vector<64xf32> to vector<64xbf16>
// BF16: scf.for %[[N2:.*]] = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// BF16: vector.transfer_read %[[VTILE]][%[[N2]], %c0]{{.*}} : tensor<32x64xbf16>, vector<32xbf16>
// BF16: x86vector.avx512.dot {{.*}} : vector<32xbf16> -> vector<16xf32>
// BF16-NOT: vector.fma
// BF16: return
// VEC-LABEL: func.func @bf16_dot
// VEC-NOT: x86vector
// VEC: vector.fma
// VEC-NOT: x86vector
// VEC: return
// amx: the same pair packings; Q.K^T into the zeroed scores scratch and
// P.V (acc scaled by corr first, P rounded to bf16 row by row) as
// linalg.generic ops marked flex.amx (AMX tiles after bufferization,
// flex-amx-contractions), lhs at (m, k), the pairs at (k floordiv 2,
// 2 n + k mod 2).
// AMX-DAG: #[[$ALHS:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// AMX-DAG: #[[$APAIRS:.+]] = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
// AMX-LABEL: func.func @bf16_dot
// AMX: scf.forall (%{{.*}}) in (2) shared_outs(%{{.*}}) -> (tensor<1x2x64x64xbf16>)
// AMX: vector.interleave
// AMX: scf.forall (%{{.*}}) in (2) shared_outs(%{{.*}}) -> (tensor<1x2x64x128xbf16>)
// AMX: %[[S0:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<64x64xf32>)
// AMX: linalg.generic {indexing_maps = [#[[$ALHS]], #[[$APAIRS]], {{.+}}], iterator_types = ["parallel", "reduction", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<64x64xbf16>, tensor<32x128xbf16>) outs(%[[S0]] : tensor<64x64xf32>) attrs = {flex.amx}
// AMX: %[[SCALED:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<64x32xf32>)
// AMX: arith.mulf
// AMX: %[[PB:.+]] = scf.for {{.+}} -> (tensor<64x64xbf16>)
// AMX: arith.truncf %{{.+}} : vector<64xf32> to vector<64xbf16>
// AMX: linalg.generic {indexing_maps = [#[[$ALHS]], #[[$APAIRS]], {{.+}}], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[PB]], %{{.+}} : tensor<64x64xbf16>, tensor<32x64xbf16>) outs(%[[SCALED]] : tensor<64x32xf32>) attrs = {flex.amx}
// AMX-NOT: x86vector
// AMX-NOT: vector.fma
// AMX: return
func.func @bf16_dot(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>, %v: tensor<1x2x128x32xbf16>) -> tensor<1x2x128x32xbf16> {
  %o = tensor.empty() : tensor<1x2x128x32xbf16>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x32xbf16>)
      outs(%o : tensor<1x2x128x32xbf16>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x128x32xbf16>
  return %r : tensor<1x2x128x32xbf16>
}

// -----

// bf16-dot cannot pair an odd E (Q.K^T: plain K^T and FMA kernel) nor a
// V row of 30 lanes (P.V: FMA kernel on V as is).
// BF16-LABEL: func.func @bf16_dot_unpairable
// BF16-NOT: x86vector
// BF16-NOT: vector.interleave
// BF16: linalg.transpose
// BF16: vector.fma
// BF16-NOT: x86vector
// BF16: return
func.func @bf16_dot_unpairable(%q: tensor<1x1x64x33xbf16>, %k: tensor<1x1x64x33xbf16>, %v: tensor<1x1x64x30xbf16>) -> tensor<1x1x64x30xbf16> {
  %o = tensor.empty() : tensor<1x1x64x30xbf16>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x33xbf16>, tensor<1x1x64x33xbf16>, tensor<1x1x64x30xbf16>)
      outs(%o : tensor<1x1x64x30xbf16>) scale(0.125) -> tensor<1x1x64x30xbf16>
  return %r : tensor<1x1x64x30xbf16>
}

// -----

// bf16-dot and amx leave f32 inputs on the FMA kernels.
// AMX-LABEL: func.func @f32_with_bf16_dot
// AMX-NOT: flex.amx
// AMX: vector.fma
// AMX-NOT: flex.amx
// AMX: return
// BF16-LABEL: func.func @f32_with_bf16_dot
// BF16-NOT: x86vector
// BF16: vector.fma
// BF16-NOT: x86vector
// BF16: return
func.func @f32_with_bf16_dot(%q: tensor<1x1x64x64xf32>, %k: tensor<1x1x64x64xf32>, %v: tensor<1x1x64x64xf32>) -> tensor<1x1x64x64xf32> {
  %o = tensor.empty() : tensor<1x1x64x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x64xf32>, tensor<1x1x64x64xf32>, tensor<1x1x64x64xf32>)
      outs(%o : tensor<1x1x64x64xf32>) scale(0.125) -> tensor<1x1x64x64xf32>
  return %r : tensor<1x1x64x64xf32>
}

// -----

// bf16-dot leaves few query rows (decode, Mt = 1) on the f32 kernels: no
// packing for them.
// BF16-LABEL: func.func @bf16_decode
// BF16-NOT: vector.interleave
// BF16-NOT: x86vector
// BF16: vector.fma
// BF16-NOT: x86vector
// BF16: return
func.func @bf16_decode(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = tensor.empty() : tensor<1x2x1x64xbf16>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x1x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
      outs(%o : tensor<1x2x1x64xbf16>) scale(0.125) -> tensor<1x2x1x64xbf16>
  return %r : tensor<1x2x1x64xbf16>
}

// -----

// Block tensors (kv_blocks, blocks of 32): the tiles are 32 x 32 so that
// each lies in one block pair; per key block the listed kv blocks of the
// row's query block are scanned, an unlisted block keeps the state and a
// listed one runs without mask (no mask_mod, no full list).
// CHECK-LABEL: func.func @block_tensors
// CHECK-SAME: %[[KVN:[^:]+]]: tensor<1x1x2xi32>, %[[KVI:[^:]+]]: tensor<1x1x2x2xi32>
// CHECK: scf.forall (%{{.*}}, %[[M0:.*]]) = (0, 0) to (2, 64) step (1, 32)
// CHECK: scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[MX:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}})
// CHECK: %[[N0:.*]] = arith.muli %[[J]], %c32
// CHECK: %[[QB:.*]] = arith.divui %[[M0]], %c32
// CHECK: %[[KB:.*]] = arith.divui %[[N0]], %c32
// CHECK: tensor.extract %[[KVN]][%c0, %c0, %[[QB]]]
// CHECK: %[[LISTED:.*]] = scf.for
// CHECK: tensor.extract %[[KVI]][%c0, %c0, %[[QB]], %{{.*}}]
// CHECK: arith.cmpi eq, %{{.*}}, %[[KB]]
// CHECK: scf.if %[[LISTED]]
// CHECK: linalg.generic
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[MX]], %[[L]], %[[ACC]]
// CHECK: flex.tiles = array<i64: 32, 32>
func.func @block_tensors(%q: tensor<1x2x64x16xf32>, %k: tensor<1x2x64x16xf32>, %v: tensor<1x2x64x16xf32>, %n: tensor<1x1x2xi32>, %i: tensor<1x1x2x2xi32>) -> tensor<1x2x64x16xf32> {
  %o = tensor.empty() : tensor<1x2x64x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>)
      kv_blocks(%n, %i : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) block_sizes [32, 32]
      outs(%o : tensor<1x2x64x16xf32>) scale(0.25) -> tensor<1x2x64x16xf32>
  return %r : tensor<1x2x64x16xf32>
}

// -----

// Decode with head dim 256: the query row is dotted with rows of K as
// they are, no K^T copy; 16 keys per step, one key after another, each in
// four FMA chains over the 16-lane chunks of E (4 products, 12 FMAs, the
// chains added), the sums folded into one vector written to S. P.V keeps
// the single output row as 16 pieces of 16 lanes in one loop over the rows
// of V (no 256-lane vector, no pass per column chunk).
// VEC-LABEL: func.func @decode_e256
// VEC-NOT: vector.from_elements
// VEC-NOT: linalg.transpose
// VEC: scf.for {{.*}} = %c0 to %c128 step %c16 iter_args({{.*}}) -> (tensor<1x128xf32>)
// VEC: vector.transfer_read {{.*}} : tensor<128x256xf32>, vector<16xf32>
// VEC-COUNT-4: arith.mulf {{.*}} : vector<16xf32>
// VEC-COUNT-12: vector.fma {{.*}} : vector<16xf32>
// VEC-COUNT-3: arith.addf {{.*}} : vector<16xf32>
// VEC-COUNT-180: vector.fma {{.*}} : vector<16xf32>
// VEC: vector.shuffle
// VEC: vector.transfer_write {{.*}} : vector<16xf32>, tensor<1x128xf32>
// VEC-NOT: vector<256xf32>
// VEC: scf.for {{.*}} = %c0 to %c128 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// VEC-COUNT-16: vector.fma {{.*}} : vector<16xf32>
// VEC-NOT: vector.fma
// VEC: return
func.func @decode_e256(%q: tensor<1x2x1x256xf32>, %k: tensor<1x2x512x256xf32>, %v: tensor<1x2x512x256xf32>) -> tensor<1x2x1x256xf32> {
  %o = tensor.empty() : tensor<1x2x1x256xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x1x256xf32>, tensor<1x2x512x256xf32>, tensor<1x2x512x256xf32>)
      outs(%o : tensor<1x2x1x256xf32>) scale(0.0625) -> tensor<1x2x1x256xf32>
  return %r : tensor<1x2x1x256xf32>
}

// -----
// serial-below-us: an op estimated below 250 us on one thread (here about
// 10 us) marks every forall it became flex.serial (the row tiles and the
// Kᵀ layout); a large one (about 15 ms) keeps them parallel.
// SERIAL-LABEL: func.func @serial_small_large
// SERIAL: scf.forall (%{{.*}}, %{{.*}}) in (1, 4)
// SERIAL: } {flex.serial}
// SERIAL: scf.forall {{.*}} to (1, 4, 16)
// SERIAL: } {{{.*}}flex.serial
// SERIAL: scf.forall (%{{.*}}, %{{.*}}) in (1, 8)
// SERIAL-NOT: flex.serial
// SERIAL: return
func.func @serial_small_large(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x300x64xf32>, %v: tensor<1x4x300x64xf32>,
                              %qb: tensor<1x8x1024x64xf32>, %kb: tensor<1x8x1024x64xf32>, %vb: tensor<1x8x1024x64xf32>)
    -> (tensor<1x4x16x64xf32>, tensor<1x8x1024x64xf32>) {
  %o = tensor.empty() : tensor<1x4x16x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x4x300x64xf32>, tensor<1x4x300x64xf32>)
      outs(%o : tensor<1x4x16x64xf32>) scale(0.125) -> tensor<1x4x16x64xf32>
  %ob = tensor.empty() : tensor<1x8x1024x64xf32>
  %rb = flex.attention ins(%qb, %kb, %vb : tensor<1x8x1024x64xf32>, tensor<1x8x1024x64xf32>, tensor<1x8x1024x64xf32>)
      outs(%ob : tensor<1x8x1024x64xf32>) scale(0.125) -> tensor<1x8x1024x64xf32>
  return %r, %rb : tensor<1x4x16x64xf32>, tensor<1x8x1024x64xf32>
}

// -----
// Dynamic sizes count as 4096 tokens (batch, heads as 1): a decode step
// over a cache of dynamic length (about 30 us at 4096 keys) stays on one
// thread; a prefill of dynamic length (about 7 ms) keeps its threads.
// SERIAL-LABEL: func.func @serial_dynamic
// SERIAL: scf.forall {{.*}} in (1, 2, 1)
// SERIAL: } {{{.*}}flex.serial
// SERIAL: scf.forall {{.*}} in (1, 2)
// SERIAL-NOT: flex.serial
// SERIAL: return
func.func @serial_dynamic(%q: tensor<1x2x1x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>,
                          %qb: tensor<1x2x?x64xf32>) -> (tensor<1x2x1x64xf32>, tensor<1x2x?x64xf32>) {
  %o = tensor.empty() : tensor<1x2x1x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x1x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x2x1x64xf32>) scale(0.125) -> tensor<1x2x1x64xf32>
  %c2 = arith.constant 2 : index
  %m = tensor.dim %qb, %c2 : tensor<1x2x?x64xf32>
  %ob = tensor.empty(%m) : tensor<1x2x?x64xf32>
  %rb = flex.attention ins(%qb, %k, %v : tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%ob : tensor<1x2x?x64xf32>) scale(0.125) -> tensor<1x2x?x64xf32>
  return %r, %rb : tensor<1x2x1x64xf32>, tensor<1x2x?x64xf32>
}

// -----
// GQA decode (Hq = 8 over Hkv = 2, G = 4, M = 1): one row tile per kv head
// holds its 4 query heads as 4 rows (tile sizes (1, 4, 1)), so each key
// block is sliced once (as rows of K, and V) for all of them. Row i is head h0 + i:
// the score_mod reads slope[h0 + i]; the mask (kv >= 40 h) is classified on
// the heads [h0, h0 + 3] of the tile.
// VEC-LABEL: func.func @gqa_decode
// VEC: scf.forall (%[[H0:.*]]) = (0) to (8) step (4)
// VEC: %[[Q:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] : tensor<1x4x1x64xf32> into tensor<4x64xf32>
// VEC: %[[KH:.*]] = arith.divui %[[H0]], %c4 : index
// VEC: %[[HHI:.*]] = arith.addi %[[H0]], %c3 : index
// VEC: arith.muli %[[HHI]], %c40
// VEC: scf.for {{.*}} -> (tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>)
// VEC: %[[K:.*]] = tensor.extract_slice %{{.*}}[0, %[[KH]], %{{.*}}, 0] [1, 1, 128, 64] {{.*}} to tensor<128x64xf32>
// VEC-NEXT: tensor.extract_slice %{{.*}}[0, %[[KH]], %{{.*}}, 0] [1, 1, 128, 64] {{.*}} to tensor<128x64xf32>
// VEC-NOT: tensor.extract_slice
// Q.K^T on the key-row dot kernel: 16 keys per step, then each of the 4
// rows of Q against them.
// VEC: scf.for {{.*}} step %c16 iter_args({{.*}}) -> (tensor<4x128xf32>)
// VEC: scf.for %[[R:.*]] = %c0 to %c4 step %c1
// VEC: vector.transfer_read %[[Q]][%[[R]], %c0]
// VEC: vector.transfer_read %[[K]]
// VEC: linalg.generic
// VEC: %[[I:.*]] = linalg.index 0 : index
// VEC: %[[H:.*]] = arith.addi %[[H0]], %[[I]] : index
// VEC: tensor.extract %{{.*}}[%[[H]]] : tensor<8xf32>
// VEC: tensor.expand_shape {{.*}} output_shape [1, 4, 1, 64] : tensor<4x64xf32> into tensor<1x4x1x64xf32>
// VEC: tensor.expand_shape {{.*}} output_shape [1, 4, 1] : tensor<4xf32> into tensor<1x4x1xf32>
// VEC: tensor.parallel_insert_slice %{{.*}}[0, %[[H0]], 0, 0] [1, 4, 1, 64]
// VEC: return
func.func @gqa_decode(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x300x64xf32>, %v: tensor<1x2x300x64xf32>, %slope: tensor<8xf32>) -> (tensor<1x8x1x64xf32>, tensor<1x8x1xf32>) {
  %o = tensor.empty() : tensor<1x8x1x64xf32>
  %l = tensor.empty() : tensor<1x8x1xf32>
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x8x1x64xf32>, tensor<1x2x300x64xf32>, tensor<1x2x300x64xf32>)
      captures(%slope : tensor<8xf32>)
      outs(%o : tensor<1x8x1x64xf32>) logsumexp(%l : tensor<1x8x1xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %a = tensor.extract %slope[%h] : tensor<8xf32>
        %i = arith.index_cast %n : index to i64
        %f = arith.sitofp %i : i64 to f32
        %p = arith.mulf %a, %f : f32
        %t = arith.addf %s, %p : f32
        flex.yield %t : f32
      }
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c40 = arith.constant 40 : index
        %w = arith.muli %h, %c40 : index
        %ok = arith.cmpi sge, %n, %w : index
        flex.yield %ok : i1
      } -> tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
  return %r#0, %r#1 : tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
}
