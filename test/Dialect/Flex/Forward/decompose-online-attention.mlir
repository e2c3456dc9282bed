// RUN: flex-opt %s -split-input-file -flex-decompose-online-attention="vectorize=false" -canonicalize -cse | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-decompose-online-attention -canonicalize -cse | FileCheck %s --check-prefix=VEC

// The last stage of the tiled lowering: one flex.online_attention block as
// S = Q.K^T, the scores tile on global indices, the online-softmax update
// and acc = acc * corr + P.V.

// Padding rows (rows is not the constant 8) are clamped to the last valid
// row for the regions; keys past kv_len are masked (-inf) and clamped.
// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<8x16xf32>, %[[KT:[^:]+]]: tensor<16x32xf32>, %[[V:[^:]+]]: tensor<32x12xf32>, %[[MX:[^:]+]]: tensor<8xf32>, %[[L:[^:]+]]: tensor<8xf32>, %[[ACC:[^:]+]]: tensor<8x12xf32>, %[[B:[^:]+]]: index, %[[H:[^:]+]]: index, %[[M0:[^:]+]]: index, %[[N0:[^:]+]]: index, %[[ROWS:[^:]+]]: index, %[[N:[^:]+]]: index)
// S = Q . K^T over (m, e, n) with K transposed:
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} ins(%[[Q]], %[[KT]] : tensor<8x16xf32>, tensor<16x32xf32>) outs(%{{.*}} : tensor<8x32xf32>)
// CHECK: %[[LASTROW:.*]] = arith.subi %[[ROWS]], %c1 : index
// CHECK: %[[LASTKEY:.*]] = arith.subi %[[N]], %c1 : index
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.mulf %{{.*}}, %cst
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[IC:.*]] = arith.minsi %[[I]], %[[LASTROW]] : index
// CHECK: %[[GM:.*]] = arith.addi %[[M0]], %[[IC]] : index
// CHECK: %[[GN:.*]] = arith.addi %[[N0]], %[[J]] : index
// CHECK: %[[GNC:.*]] = arith.minsi %[[GN]], %[[LASTKEY]] : index
// CHECK: %[[KEEP:.*]] = arith.cmpi sge, %[[GM]], %[[GNC]] : index
// CHECK: arith.select %[[KEEP]]
// CHECK: %[[VALID:.*]] = arith.cmpi slt, %[[GN]], %[[N]] : index
// CHECK: arith.select %[[VALID]]
// Block max, then new max / l * corr / corr in one elementwise op:
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<8xf32>)
// CHECK: %[[ST:.*]]:3 = linalg.generic {{.*}}outs(%[[MX]], %[[L]], %{{.*}} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// P = exp(S - mn), then l += row sums:
// CHECK: %[[P:.*]] = linalg.generic {{.*}}ins(%[[ST]]#0 : tensor<8xf32>) outs(%{{.*}} : tensor<8x32xf32>)
// CHECK: %[[LN:.*]] = linalg.generic {{.*}}ins(%[[P]] : tensor<8x32xf32>) outs(%[[ST]]#1 : tensor<8xf32>)
// acc * corr, then + P . V:
// CHECK: %[[AS:.*]] = linalg.generic {{.*}}ins(%[[ST]]#2 : tensor<8xf32>) outs(%[[ACC]] : tensor<8x12xf32>)
// CHECK: %[[AN:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} ins(%[[P]], %[[V]] : tensor<8x32xf32>, tensor<32x12xf32>) outs(%[[AS]] : tensor<8x12xf32>)
// CHECK: return %[[ST]]#0, %[[LN]], %[[AN]]
// VEC-LABEL: func.func @block
// VEC: %[[SC:.*]] = arith.constant dense<2.500000e-01> : vector<32xf32>
// Q.K^T: all 8 rows of S in registers over E = 16 (one step of 8 rows),
// one FMA per row with a row of K^T.
// VEC-NOT: scf.for {{.*}} -> (tensor<8x32xf32>)
// VEC: scf.for {{.*}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// VEC: vector.fma {{.*}} : vector<32xf32>
// The sums times the scale (0.25) as they are written: the scores tile
// below (mask and key padding) does not multiply again.
// VEC: %[[SS:.*]] = arith.mulf %{{.*}}, %[[SC]] : vector<32xf32>
// VEC: vector.transfer_write %[[SS]]
// VEC: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// VEC-NOT: arith.mulf
// VEC: arith.cmpi sge
// VEC: linalg.yield
// Softmax row by row: tree reductions of the row vector.
// VEC: scf.for {{.*}} = %c0 to %c8 step %c1 iter_args({{.*}}) -> (tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// VEC: vector.extract_strided_slice {{.*}} : vector<32xf32> to vector<16xf32>
// VEC: math.floor {{.*}} : vector<32xf32>
// P.V: rows of acc scaled by corr, FMA with rows of V over the 32 keys.
// VEC: scf.for {{.*}} = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<12xf32>, vector<12xf32>, vector<12xf32>, vector<12xf32>, vector<12xf32>, vector<12xf32>, vector<12xf32>, vector<12xf32>)
// VEC: vector.fma {{.*}} : vector<12xf32>
// VEC-NOT: linalg.generic {{.*}}["parallel", "reduction", "parallel"]
// VEC: return
func.func @block(%q: tensor<8x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x12xf32>,
                 %mx: tensor<8xf32>, %l: tensor<8xf32>, %acc: tensor<8x12xf32>,
                 %b: index, %h: index, %m0: index, %n0: index, %rows: index, %n: index)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>) {
  %r:3 = flex.online_attention ins(%q, %kt, %v : tensor<8x16xf32>, tensor<16x32xf32>, tensor<32x12xf32>)
      at(%b, %h, %m0, %n0) bounds(%rows, %n)
      outs(%mx, %l, %acc : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>)
      scale(0.25) {transposed_key}
      mask_mod {
      ^bb0(%bb: index, %hh: index, %m: index, %kv: index):
        %c = arith.cmpi sge, %m, %kv : index
        flex.yield %c : i1
      } -> tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
  return %r#0, %r#1, %r#2 : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
}

// -----

// Full rows and keys (rows = 8, kv_len a multiple of 32): no clamping and
// no padding mask; the score_mod reads a capture at the global head; keys
// as rows ([Nt, E], no transposed_key): S from dot products of rows.
// CHECK-LABEL: func.func @key_rows_score_mod
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[KMAP:.*]], #{{.*}}], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-NOT: arith.minsi
// CHECK: tensor.extract %{{.*}}[%{{.*}}] : tensor<4xf32>
// CHECK-NOT: arith.cmpi slt
// CHECK: return
// Vector form: 16 keys per step, one after another: per row and key one
// product of the first 16-lane chunks of E and one FMA with the second;
// the 16 partial vectors folded pairwise as soon as both exist, in four
// levels (lane groups 8, 4, 2, 1 of both operands), into one vector of
// the 16 sums, times the scale, written as a row chunk of S. The scores
// tile then only adds the capture.
// VEC-LABEL: func.func @key_rows_score_mod
// VEC-DAG: %[[SC:.*]] = arith.constant dense<2.500000e-01> : vector<16xf32>
// VEC: scf.for %[[N0:.*]] = %c0 to %c32 step %c16 iter_args(%{{.*}}) -> (tensor<2x32xf32>)
// VEC: scf.for %[[R:.*]] = %c0 to %c2 step %c1 iter_args(%[[S:.*]] = %{{.*}}) -> (tensor<2x32xf32>)
// VEC: %[[P0:.*]] = arith.mulf {{.*}} : vector<16xf32>
// VEC: %[[S0:.*]] = vector.fma {{.*}}, %[[P0]] : vector<16xf32>
// VEC: %[[P1:.*]] = arith.mulf {{.*}} : vector<16xf32>
// VEC: %[[S1:.*]] = vector.fma {{.*}}, %[[P1]] : vector<16xf32>
// VEC: vector.shuffle %[[S0]], %[[S1]] [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// VEC: vector.shuffle %[[S0]], %[[S1]] [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xf32>, vector<16xf32>
// VEC-COUNT-2: vector.fma {{.*}} : vector<16xf32>
// VEC: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// VEC: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27] : vector<16xf32>, vector<16xf32>
// VEC: vector.shuffle {{.*}} [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29] : vector<16xf32>, vector<16xf32>
// VEC: %[[LO:.*]] = vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30] : vector<16xf32>, vector<16xf32>
// VEC: %[[HI:.*]] = vector.shuffle {{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31] : vector<16xf32>, vector<16xf32>
// VEC: %[[SUM:.*]] = arith.addf %[[LO]], %[[HI]] : vector<16xf32>
// VEC: %[[SS:.*]] = arith.mulf %[[SUM]], %[[SC]] : vector<16xf32>
// VEC: vector.transfer_write %[[SS]], %[[S]][%[[R]], %[[N0]]] {in_bounds = [true]} : vector<16xf32>, tensor<2x32xf32>
// VEC: linalg.generic
// VEC-NOT: arith.mulf
// VEC: tensor.extract %{{.*}}[%{{.*}}] : tensor<4xf32>
// VEC: return
func.func @key_rows_score_mod(%q: tensor<2x32xf32>, %k: tensor<32x32xf32>, %v: tensor<32x8xf32>,
                              %mx: tensor<2xf32>, %l: tensor<2xf32>, %acc: tensor<2x8xf32>,
                              %bias: tensor<4xf32>, %h: index, %n0: index)
    -> (tensor<2xf32>, tensor<2xf32>, tensor<2x8xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<2x32xf32>, tensor<32x32xf32>, tensor<32x8xf32>)
      captures(%bias : tensor<4xf32>)
      at(%c0, %h, %c0, %n0) bounds(%c2, %c64)
      outs(%mx, %l, %acc : tensor<2xf32>, tensor<2xf32>, tensor<2x8xf32>)
      scale(0.25)
      score_mod {
      ^bb0(%s: f32, %bb: index, %hh: index, %m: index, %kv: index):
        %x = tensor.extract %bias[%hh] : tensor<4xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } -> tensor<2xf32>, tensor<2xf32>, tensor<2x8xf32>
  return %r#0, %r#1, %r#2 : tensor<2xf32>, tensor<2xf32>, tensor<2x8xf32>
}

// -----

// Keys as rows with a head dim that is not a multiple of 16 (E = 24): one
// tree-summed dot product per (row, key), written element by element; the
// scores tile multiplies by the scale.
// VEC-LABEL: func.func @key_rows_tree
// VEC: scf.for %{{.*}} = %c0 to %c32 step %c1 iter_args(%{{.*}}) -> (tensor<1x32xf32>)
// VEC: arith.mulf {{.*}} : vector<24xf32>
// VEC: vector.extract_strided_slice {{.*}} : vector<24xf32> to vector<12xf32>
// VEC: tensor.insert
// VEC-NOT: vector.shuffle
// VEC: linalg.generic
// VEC: arith.mulf
// VEC: return
func.func @key_rows_tree(%q: tensor<1x24xf32>, %k: tensor<32x24xf32>, %v: tensor<32x8xf32>,
                         %mx: tensor<1xf32>, %l: tensor<1xf32>, %acc: tensor<1x8xf32>,
                         %n0: index, %n: index)
    -> (tensor<1xf32>, tensor<1xf32>, tensor<1x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<1x24xf32>, tensor<32x24xf32>, tensor<32x8xf32>)
      at(%c0, %c0, %c0, %n0) bounds(%c1, %n)
      outs(%mx, %l, %acc : tensor<1xf32>, tensor<1xf32>, tensor<1x8xf32>)
      scale(0.25) -> tensor<1xf32>, tensor<1xf32>, tensor<1x8xf32>
  return %r#0, %r#1, %r#2 : tensor<1xf32>, tensor<1xf32>, tensor<1x8xf32>
}

// -----

// Two heads of 2 query rows each (rows_per_head = 2), one padding row per
// head (rows = 1): row i is head h + i / 2 and query m0 + min(i % 2, 0);
// the score_mod reads the capture at that head.
// CHECK-LABEL: func.func @rows_per_head
// CHECK-SAME: %{{[^:]*}}: tensor<8xf32>, %[[H:[^:]*]]: index, %[[M0:[^:]*]]: index
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[DH:.*]] = arith.divui %[[I]], %c2 : index
// CHECK: %[[HI:.*]] = arith.addi %[[H]], %[[DH]] : index
// CHECK: %[[MI:.*]] = arith.remui %[[I]], %c2 : index
// CHECK: %[[MC:.*]] = arith.minsi %[[MI]], %c0 : index
// CHECK: arith.addi %[[M0]], %[[MC]] : index
// CHECK: tensor.extract %{{.*}}[%[[HI]]] : tensor<8xf32>
// CHECK: return
func.func @rows_per_head(%q: tensor<4x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x8xf32>,
                         %mx: tensor<4xf32>, %l: tensor<4xf32>, %acc: tensor<4x8xf32>,
                         %bias: tensor<8xf32>, %h: index, %m0: index, %n0: index)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<4x16xf32>, tensor<32x16xf32>, tensor<32x8xf32>)
      captures(%bias : tensor<8xf32>)
      at(%c0, %h, %m0, %n0) bounds(%c1, %c64)
      outs(%mx, %l, %acc : tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>)
      scale(0.25) {rows_per_head = 2 : i64}
      score_mod {
      ^bb0(%s: f32, %bb: index, %hh: index, %m: index, %kv: index):
        %x = tensor.extract %bias[%hh] : tensor<8xf32>
        %mi = arith.index_cast %m : index to i64
        %mf = arith.sitofp %mi : i64 to f32
        %t = arith.addf %s, %x : f32
        %u = arith.addf %t, %mf : f32
        flex.yield %u : f32
      } -> tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>
  return %r#0, %r#1, %r#2 : tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>
}

// -----

// A full block (no mask, no score_mod, rows and kv_len whole) with K
// transposed: the kernel's scaled sums are the scores; no pass over S.
// VEC-LABEL: func.func @full_block
// VEC: %[[SC:.*]] = arith.constant dense<2.500000e-01> : vector<32xf32>
// VEC: vector.fma {{.*}} : vector<32xf32>
// VEC: arith.mulf %{{.*}}, %[[SC]] : vector<32xf32>
// VEC-NOT: linalg.generic
// VEC: math.floor
// VEC: return
func.func @full_block(%q: tensor<8x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x12xf32>,
                      %mx: tensor<8xf32>, %l: tensor<8xf32>, %acc: tensor<8x12xf32>,
                      %b: index, %h: index, %m0: index, %n0: index)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>) {
  %rows = arith.constant 8 : index
  %n = arith.constant 64 : index
  %r:3 = flex.online_attention ins(%q, %kt, %v : tensor<8x16xf32>, tensor<16x32xf32>, tensor<32x12xf32>)
      at(%b, %h, %m0, %n0) bounds(%rows, %n)
      outs(%mx, %l, %acc : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>)
      scale(0.25) {transposed_key} -> tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
  return %r#0, %r#1, %r#2 : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
}

// -----

// mask_when: one Q.K^T, then the scores with the mask where %partial is
// true and without it otherwise (scf.if); one softmax update and P.V.
// CHECK-LABEL: func.func @mask_when
// CHECK-SAME: %[[PART:[^:]+]]: i1)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} outs(%{{.*}} : tensor<8x32xf32>)
// CHECK: %[[S:.*]] = scf.if %[[PART]] -> (tensor<8x32xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.cmpi sge
// CHECK: arith.select
// CHECK: } else {
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK-NOT: arith.cmpi
// CHECK: linalg.yield
// CHECK: }
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[S]] : tensor<8x32xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} outs(%{{.*}} : tensor<8x12xf32>)
// CHECK-NOT: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: return
// VEC-LABEL: func.func @mask_when
// VEC: scf.if
// VEC: arith.cmpi sge
// VEC: } else {
// VEC: vector.fma {{.*}} : vector<12xf32>
// VEC-NOT: vector.fma {{.*}} : vector<32xf32>
// VEC: return
func.func @mask_when(%q: tensor<8x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x12xf32>,
                     %mx: tensor<8xf32>, %l: tensor<8xf32>, %acc: tensor<8x12xf32>,
                     %b: index, %h: index, %m0: index, %n0: index, %partial: i1)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>) {
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %r:3 = flex.online_attention ins(%q, %kt, %v : tensor<8x16xf32>, tensor<16x32xf32>, tensor<32x12xf32>)
      at(%b, %h, %m0, %n0) bounds(%c8, %c64)
      outs(%mx, %l, %acc : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>)
      scale(0.25) mask_when(%partial) {transposed_key}
      mask_mod {
      ^bb0(%bb: index, %hh: index, %m: index, %kv: index):
        %c = arith.cmpi sge, %m, %kv : index
        flex.yield %c : i1
      } -> tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
  return %r#0, %r#1, %r#2 : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
}

// -----

// A dynamic kv_len and a mask_mod reading a capture: a block ending at or
// before kv_len (every block but the last) takes the scores without the
// key clamp, so pad[b, n0 + j] is read contiguously in j; the last block
// clamps its key index and masks the keys past kv_len.
// CHECK-LABEL: func.func @capture_read_split_keys
// CHECK-SAME: %[[N0:[^:]+]]: index, %[[N:[^:]+]]: index, %[[PAD:[^:]+]]: tensor<2x?xi8>)
// CHECK: %[[END:.*]] = arith.addi %[[N0]], %c32 : index
// CHECK: %[[IN:.*]] = arith.cmpi sle, %[[END]], %[[N]] : index
// CHECK: %[[S:.*]] = scf.if %[[IN]] -> (tensor<8x32xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[GN:.*]] = arith.addi %[[N0]], %[[J]] : index
// CHECK-NOT: arith.minsi
// CHECK: tensor.extract %[[PAD]][%{{.*}}, %[[GN]]] : tensor<2x?xi8>
// CHECK-NOT: arith.cmpi slt
// CHECK: linalg.yield
// CHECK: } else {
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: %[[J2:.*]] = linalg.index 1 : index
// CHECK: %[[GN2:.*]] = arith.addi %[[N0]], %[[J2]] : index
// CHECK: %[[GNC:.*]] = arith.minsi %[[GN2]], %{{.*}} : index
// CHECK: tensor.extract %[[PAD]][%{{.*}}, %[[GNC]]] : tensor<2x?xi8>
// CHECK: arith.cmpi slt, %[[GN2]], %[[N]] : index
// CHECK: linalg.yield
// CHECK: }
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[S]] : tensor<8x32xf32>)
func.func @capture_read_split_keys(%q: tensor<8x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x12xf32>,
                                   %mx: tensor<8xf32>, %l: tensor<8xf32>, %acc: tensor<8x12xf32>,
                                   %b: index, %h: index, %m0: index, %n0: index, %n: index,
                                   %pad: tensor<2x?xi8>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>) {
  %c8 = arith.constant 8 : index
  %r:3 = flex.online_attention ins(%q, %kt, %v : tensor<8x16xf32>, tensor<16x32xf32>, tensor<32x12xf32>)
      captures(%pad : tensor<2x?xi8>)
      at(%b, %h, %m0, %n0) bounds(%c8, %n)
      outs(%mx, %l, %acc : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>)
      scale(0.25) {transposed_key}
      mask_mod {
      ^bb0(%bb: index, %hh: index, %m: index, %kv: index):
        %c0 = arith.constant 0 : i8
        %x = tensor.extract %pad[%bb, %kv] : tensor<2x?xi8>
        %keep = arith.cmpi ne, %x, %c0 : i8
        flex.yield %keep : i1
      } -> tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
  return %r#0, %r#1, %r#2 : tensor<8xf32>, tensor<8xf32>, tensor<8x12xf32>
}
