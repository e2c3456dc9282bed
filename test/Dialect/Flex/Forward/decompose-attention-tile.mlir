// RUN: flex-opt %s -split-input-file --transform-interpreter \
// RUN:   -flex-decompose-attention-tile="tile-m=16 tile-n=16" -canonicalize -cse | FileCheck %s

// Stage 2 of the tiled lowering, after upstream tiling of flex.attention
// through its TilingInterface (tile_using_forall, sizes [1, 1, 16]): each
// row tile becomes the online-softmax state, a loop over key blocks of
// flex.online_attention and the normalization.

// M = N = 40: the last row tile has 8 rows (affine.min), padded to 16; K is
// padded to 48 keys (3 blocks of 16) and transposed; V is read in place for
// the two whole blocks, and its last 8 rows padded to one block for the
// third, which runs after the loop; the causal mask is classified per block
// by interval arithmetic: empty blocks keep the state, live ones run one
// flex.online_attention whose mask applies only where the block is not
// full (mask_when), one copy for full and partial blocks.
// CHECK-LABEL: func.func @causal_rows
// CHECK: scf.forall (%[[H:.*]], %[[MT:.*]]) in (2, 3)
// CHECK: %[[M0:.*]] = affine.apply #{{.*}}(%[[MT]])
// CHECK: %[[ROWS:.*]] = affine.min #{{.*}}(%[[MT]])
// CHECK: %[[QT:.*]] = tensor.pad %{{.*}} low[0, 0] high[%{{.*}}, 0]
// CHECK: } : tensor<?x16xf32> to tensor<16x16xf32>
// CHECK: %[[VREST:.*]] = tensor.extract_slice %[[V:.*]][0, 0, 32, 0] [1, 2, 8, 16] [1, 1, 1, 1] : tensor<1x2x40x16xf32> to tensor<1x2x8x16xf32>
// CHECK: %[[VTAIL:.*]] = tensor.pad %[[VREST]] low[0, 0, 0, 0] high[0, 0, 8, 0]
// CHECK: tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 8, 0]
// K^T per key block ([3, E, Nt]) from 16 x 16 vector blocks (f32, E and
// Nt multiples of 16):
// CHECK: scf.for %{{.*}} = %c0 to %c48 step %c16 iter_args(%{{.*}}) -> (tensor<3x16x16xf32>)
// CHECK: %[[KBLK:.*]] = arith.divui %{{.*}}, %c16 : index
// CHECK: %[[KCOL:.*]] = arith.remui %{{.*}}, %c16 : index
// CHECK-COUNT-16: vector.transfer_read {{.*}} : tensor<48x16xf32>, vector<16xf32>
// CHECK: vector.to_elements
// CHECK: vector.from_elements
// CHECK: vector.transfer_write {{.*}}[%[[KBLK]], %c0, %[[KCOL]]] {{.*}} : vector<16xf32>, tensor<3x16x16xf32>
// CHECK: %[[LOOP:.*]]:3 = scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[MX:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<16xf32>, tensor<16xf32>, tensor<16x16xf32>)
// CHECK: %[[N0:.*]] = arith.muli %[[J]], %c16
// CHECK: %[[KHI0:.*]] = arith.addi %[[N0]], %c15 : index
// CHECK: %[[KHI:.*]] = arith.minsi %[[KHI0]], %c39 : index
// CHECK: %[[EMPTY:.*]] = arith.cmpi slt, %{{.*}}, %[[N0]] : index
// CHECK: scf.if %[[EMPTY]]
// CHECK-NEXT: scf.yield %[[MX]], %[[L]], %[[ACC]]
// CHECK-NEXT: } else {
// Not full (canonicalized from !(m0 >= last key)):
// CHECK-NEXT: %[[PART:.*]] = arith.cmpi slt, %[[M0]], %[[KHI]] : index
// CHECK: %[[JB:.*]] = arith.divui %[[N0]], %c16 : index
// CHECK: %[[KB:.*]] = tensor.extract_slice %{{.*}}[0, %[[H]], %[[JB]], 0, 0] [1, 1, 1, 16, 16] {{.*}} : tensor<1x2x3x16x16xf32> to tensor<16x16xf32>
// CHECK: %[[VB:.*]] = tensor.extract_slice %[[V]][0, %[[H]], %[[N0]], 0] [1, 1, 16, 16] {{.*}} : tensor<1x2x40x16xf32> to tensor<16x16xf32>
// CHECK: flex.online_attention ins(%[[QT]], %[[KB]], %[[VB]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>)
// CHECK-SAME: at(%c0, %[[H]], %[[M0]], %[[N0]]) bounds(%[[ROWS]], %c40)
// CHECK-SAME: outs(%[[MX]], %[[L]], %[[ACC]] : tensor<16xf32>, tensor<16xf32>, tensor<16x16xf32>)
// CHECK-SAME: scale(2.500000e-01) mask_when(%[[PART]]) {transposed_key} mask_mod {
// CHECK: arith.cmpi sge
// CHECK-NEXT: flex.yield
// CHECK-NEXT: } -> tensor<16xf32>, tensor<16xf32>, tensor<16x16xf32>
// CHECK-NEXT: scf.yield %new_max, %new_sum, %new_acc
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield
// The tail block (keys 32..39) on the loop's state, V from the padded tail:
// CHECK: scf.if
// CHECK-NEXT: scf.yield %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2
// CHECK: %[[VT:.*]] = tensor.extract_slice %[[VTAIL]][0, %[[H]], 0, 0] [1, 1, 16, 16]
// CHECK: flex.online_attention ins(%[[QT]], %{{.*}}, %[[VT]] : {{.*}}) at(%c0, %[[H]], %[[M0]], %c32) bounds(%[[ROWS]], %c40)
// CHECK-SAME: outs(%[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2 :
// Normalization; only the valid rows reach the output and the lse.
// CHECK: arith.divf
// CHECK: math.log
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%[[ROWS]], 16] [1, 1] : tensor<16x16xf32> to tensor<?x16xf32>
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0, 0] [1, 1, %[[ROWS]], 16]
// CHECK: tensor.extract_slice %{{.*}}[0] [%[[ROWS]]] [1] : tensor<16xf32> to tensor<?xf32>
// CHECK: scf.forall.in_parallel
func.func @causal_rows(%q: tensor<1x2x40x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  %o = tensor.empty() : tensor<1x2x40x16xf32>
  %l = tensor.empty() : tensor<1x2x40xf32>
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>)
      outs(%o : tensor<1x2x40x16xf32>) logsumexp(%l : tensor<1x2x40xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %r#0, %r#1 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 1, 16, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// GQA 4:1 with a captured bias and no mask: the kv head of a tile is
// h / 4 (kv_group_size, set by tiling); no block classification; the
// captures and score_mod travel to flex.online_attention.
// CHECK-LABEL: func.func @gqa_score_mod
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]]) in (2, 8)
// CHECK: %[[KH:.*]] = arith.divui %[[H]], %c4 : index
// CHECK-NOT: scf.if
// CHECK: tensor.extract_slice %{{.*}}[0, %[[KH]], %{{.*}}, 0, 0] [1, 1, 1, 16, 16]
// CHECK: flex.online_attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x24xf32>)
// CHECK-SAME: captures(%{{.*}} : tensor<8xf32>) at(%[[B]], %[[H]], %c0, %{{.*}}) bounds(%c16, %c32)
// CHECK-SAME: score_mod {
// CHECK: tensor.extract
// CHECK-NOT: mask_mod
// CHECK: scf.forall.in_parallel
func.func @gqa_score_mod(%q: tensor<2x8x16x16xf32>, %k: tensor<1x2x32x16xf32>, %v: tensor<1x2x32x24xf32>, %bias: tensor<8xf32>) -> tensor<2x8x16x24xf32> {
  %o = tensor.empty() : tensor<2x8x16x24xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<2x8x16x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x24xf32>)
      captures(%bias : tensor<8xf32>)
      outs(%o : tensor<2x8x16x24xf32>) scale(0.25)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h] : tensor<8xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } -> tensor<2x8x16x24xf32>
  return %r : tensor<2x8x16x24xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 1, 16, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Decode (one query row): keys stay rows ([Nt, E], no transpose).
// CHECK-LABEL: func.func @decode_key_rows
// CHECK-NOT: linalg.transpose
// CHECK: flex.online_attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>)
// CHECK-NOT: transposed_key
// CHECK: scf.forall.in_parallel
func.func @decode_key_rows(%q: tensor<1x2x1x16xf32>, %k: tensor<1x2x32x16xf32>, %v: tensor<1x2x32x16xf32>) -> tensor<1x2x1x16xf32> {
  %o = tensor.empty() : tensor<1x2x1x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x1x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>)
      outs(%o : tensor<1x2x1x16xf32>) scale(0.25) -> tensor<1x2x1x16xf32>
  return %r : tensor<1x2x1x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 1, 1, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Data-dependent mask over captures: doc[b, q] == doc[b, kv] (i32, per
// batch), a bool table keep[kv] and a float table bias[kv] > 0. Interval
// classification: each read is bounded by a min / max (i1: and / or) loop
// over its index range, the batch index is a point (no loop); the q-side
// range runs once per row tile, ahead of the key loop; the block is empty
// when the doc ranges are disjoint, or no key is kept, or bias <= 0 on all
// keys; full when both doc ranges are one equal id, all keys are kept and
// bias > 0 on all of them.
// CHECK-LABEL: func.func @document_per_batch
// CHECK-SAME: %[[DOC:[^:]*]]: tensor<2x32xi32>, %[[KEEP:[^:]*]]: tensor<32xi1>, %[[BIAS:[^:]*]]: tensor<32xf32>)
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]], %[[MT:.*]]) in (2, 2, 2)
// CHECK: %[[M0:.*]] = affine.apply #{{.*}}(%[[MT]])
// CHECK: %[[BC0:.*]] = arith.maxsi %[[B]], %c0
// CHECK: %[[BC:.*]] = arith.minsi %[[BC0]], %c1
// CHECK: %[[QR:.*]]:2 = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %c1 iter_args({{.*}}) -> (i32, i32) {
// CHECK: tensor.extract %[[DOC]][%[[BC]], %[[I]]] : tensor<2x32xi32>
// CHECK: arith.minsi
// CHECK: arith.maxsi
// CHECK: }
// CHECK: %[[QPOINT:.*]] = arith.cmpi eq, %[[QR]]#0, %[[QR]]#1 : i32
// CHECK: scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[MX:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}})
// CHECK: %[[N0:.*]] = arith.muli %[[J]], %c16
// CHECK-NOT: scf.for %{{.*}} = %c0 to %c16
// CHECK: %[[KR:.*]]:2 = scf.for %[[I2:.*]] = %[[KLO:.*]] to %[[KUB:.*]] step %c1 iter_args({{.*}}) -> (i32, i32) {
// CHECK: tensor.extract %[[DOC]][%[[BC]], %[[I2]]] : tensor<2x32xi32>
// CHECK: }
// CHECK: %[[KEQ:.*]] = arith.cmpi eq, %[[QR]]#0, %[[KR]]#0 : i32
// CHECK: %[[KPOINT:.*]] = arith.cmpi eq, %[[KR]]#0, %[[KR]]#1 : i32
// CHECK: %[[P:.*]] = arith.andi %[[QPOINT]], %[[KPOINT]] : i1
// CHECK: %[[SAME:.*]] = arith.andi %[[P]], %[[KEQ]] : i1
// CHECK: %[[D1:.*]] = arith.cmpi slt, %[[KR]]#1, %[[QR]]#0 : i32
// CHECK: %[[D2:.*]] = arith.cmpi slt, %[[QR]]#1, %[[KR]]#0 : i32
// CHECK: %[[DISJ:.*]] = arith.ori %[[D2]], %[[D1]] : i1
// CHECK: %[[KK:.*]]:2 = scf.for %[[I3:.*]] = %[[KLO]] to %[[KUB]] step %c1 iter_args({{.*}}) -> (i1, i1) {
// CHECK: tensor.extract %[[KEEP]][%[[I3]]] : tensor<32xi1>
// CHECK: arith.andi
// CHECK: arith.ori
// CHECK: }
// CHECK: %[[NONE:.*]] = arith.xori %[[KK]]#1, %true : i1
// CHECK: %[[BR:.*]]:2 = scf.for %[[I4:.*]] = %[[KLO]] to %[[KUB]] step %c1 iter_args({{.*}}) -> (f32, f32) {
// CHECK: tensor.extract %[[BIAS]][%[[I4]]] : tensor<32xf32>
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: }
// CHECK: %[[POS:.*]] = arith.cmpf ogt, %[[BR]]#0, %{{.*}} : f32
// CHECK: %[[NPOS:.*]] = arith.cmpf ole, %[[BR]]#1, %{{.*}} : f32
// CHECK: %[[F1:.*]] = arith.andi %[[SAME]], %[[KK]]#0 : i1
// CHECK: %[[E1:.*]] = arith.ori %[[DISJ]], %[[NONE]] : i1
// CHECK: %[[FULL:.*]] = arith.andi %[[F1]], %[[POS]] : i1
// CHECK: %[[EMPTY:.*]] = arith.ori %[[E1]], %[[NPOS]] : i1
// CHECK: scf.if %[[EMPTY]]
// CHECK-NEXT: scf.yield %[[MX]], %[[L]], %[[ACC]]
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[PART:.*]] = arith.xori %[[FULL]], %true : i1
// CHECK: flex.online_attention
// CHECK-SAME: at(%[[B]], %[[H]], %[[M0]], %[[N0]])
// CHECK-SAME: mask_when(%[[PART]]) {transposed_key} mask_mod {
// CHECK-NOT: flex.online_attention
// CHECK: scf.forall.in_parallel
func.func @document_per_batch(%q: tensor<2x2x32x16xf32>, %k: tensor<2x2x32x16xf32>, %v: tensor<2x2x32x16xf32>, %doc: tensor<2x32xi32>, %keep: tensor<32xi1>, %bias: tensor<32xf32>) -> tensor<2x2x32x16xf32> {
  %o = tensor.empty() : tensor<2x2x32x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>)
      captures(%doc, %keep, %bias : tensor<2x32xi32>, tensor<32xi1>, tensor<32xf32>)
      outs(%o : tensor<2x2x32x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %dq = tensor.extract %doc[%b, %m] : tensor<2x32xi32>
        %dk = tensor.extract %doc[%b, %n] : tensor<2x32xi32>
        %same = arith.cmpi eq, %dq, %dk : i32
        %kk = tensor.extract %keep[%n] : tensor<32xi1>
        %x = tensor.extract %bias[%n] : tensor<32xf32>
        %z = arith.constant 0.0 : f32
        %pos = arith.cmpf ogt, %x, %z : f32
        %a = arith.andi %same, %kk : i1
        %c = arith.andi %a, %pos : i1
        flex.yield %c : i1
      } -> tensor<2x2x32x16xf32>
  return %r : tensor<2x2x32x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 1, 16, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Index masks in the importer's forms of `//` (sitofp, divf, floor,
// fptosi), abs and `%`: bounded by intervals too (monotone float steps on
// the bounds; abs and remainder by cases); no dense pre-pass.
// CHECK-LABEL: func.func @floor_div_rem_abs
// CHECK: scf.forall (%[[MT:.*]]) in (2)
// CHECK: %[[M0:.*]] = affine.apply #{{.*}}(%[[MT]])
// CHECK: %[[QLOF:.*]] = arith.sitofp %{{.*}} : i32 to f64
// CHECK: %[[QHIF:.*]] = arith.sitofp %{{.*}} : i32 to f64
// CHECK: arith.divf %[[QLOF]], %{{.*}} : f64
// CHECK: arith.divf %[[QHIF]], %{{.*}} : f64
// CHECK: %[[QLOB:.*]] = math.floor %{{.*}} : f64
// CHECK: %[[QHIB:.*]] = math.floor %{{.*}} : f64
// CHECK: %[[QLOI:.*]] = arith.fptosi %[[QLOB]] : f64 to i32
// CHECK: %[[QLO:.*]] = arith.select %{{.*}}, %[[QLOI]], %c-2147483648_i32 : i32
// CHECK: %[[QHII:.*]] = arith.fptosi %[[QHIB]] : f64 to i32
// CHECK: %[[QHI:.*]] = arith.select %{{.*}}, %[[QHII]], %c2147483647_i32 : i32
// CHECK-NOT: iter_args(%{{.*}} = %false, %{{.*}} = %true)
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1
// CHECK: math.floor
// CHECK: math.floor
// CHECK: %[[KLO:.*]] = arith.select %{{.*}}, %{{.*}}, %c-2147483648_i32 : i32
// CHECK: %[[KHI:.*]] = arith.select %{{.*}}, %{{.*}}, %c2147483647_i32 : i32
// CHECK: arith.cmpi sge, %[[QLO]], %[[KHI]] : i32
// CHECK: arith.cmpi slt, %[[QHI]], %[[KLO]] : i32
// |q - kv|: both signs possible -> [0, max(-lo, hi)]:
// CHECK: arith.maxsi
// CHECK: arith.cmpi sle, %{{.*}}, %c20_i32 : i32
// kv % 3: exact when the key range lies in one period, else [0, 2]:
// CHECK: arith.divsi %{{.*}}, %c3_i32 : i32
// CHECK: arith.remsi %{{.*}}, %c3_i32 : i32
// CHECK: scf.if
// CHECK: } else {
// CHECK-NEXT: %[[PART:.*]] = arith.xori %{{.*}}, %true : i1
// CHECK: flex.online_attention
// CHECK-SAME: mask_when(%[[PART]]) {transposed_key} mask_mod {
// CHECK: math.floor
func.func @floor_div_rem_abs(%q: tensor<1x1x32x16xf32>, %k: tensor<1x1x32x16xf32>, %v: tensor<1x1x32x16xf32>) -> tensor<1x1x32x16xf32> {
  %o = tensor.empty() : tensor<1x1x32x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x32x16xf32>, tensor<1x1x32x16xf32>, tensor<1x1x32x16xf32>)
      outs(%o : tensor<1x1x32x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %qi = arith.index_cast %m : index to i32
        %ki = arith.index_cast %n : index to i32
        %c8 = arith.constant 8.0 : f64
        %qf = arith.sitofp %qi : i32 to f64
        %kf = arith.sitofp %ki : i32 to f64
        %qd = arith.divf %qf, %c8 : f64
        %kd = arith.divf %kf, %c8 : f64
        %qb = math.floor %qd : f64
        %kb = math.floor %kd : f64
        %qbi = arith.fptosi %qb : f64 to i32
        %kbi = arith.fptosi %kb : f64 to i32
        %blk = arith.cmpi sge, %qbi, %kbi : i32
        %d = arith.subi %qi, %ki : i32
        %ad = math.absi %d : i32
        %c20 = arith.constant 20 : i32
        %near = arith.cmpi sle, %ad, %c20 : i32
        %c3 = arith.constant 3 : i32
        %c0 = arith.constant 0 : i32
        %rem = arith.remsi %ki, %c3 : i32
        %nz = arith.cmpi ne, %rem, %c0 : i32
        %a = arith.andi %blk, %near : i1
        %c = arith.andi %a, %nz : i1
        flex.yield %c : i1
      } -> tensor<1x1x32x16xf32>
  return %r : tensor<1x1x32x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 1, 16, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Block-causal by integer division with the divisor constant defined in
// the region: the bounds divide by a copy of it (the q side once per row
// tile, ahead of the key loop).
// CHECK-LABEL: func.func @block_causal_div
// CHECK: scf.forall (%[[MT:.*]]) in (4)
// CHECK: %[[M0:.*]] = affine.apply #{{.*}}(%[[MT]])
// CHECK: %[[MHI:.*]] = arith.addi %[[M0]], %c15
// CHECK: %[[QLO:.*]] = arith.floordivsi %[[M0]], %c16 : index
// CHECK: %[[QHI:.*]] = arith.floordivsi %[[MHI]], %c16 : index
// CHECK: scf.for %[[J:.*]] = %c0 to %c4 step %c1
// CHECK: %[[N0:.*]] = arith.muli %[[J]], %c16
// CHECK: %[[NHI0:.*]] = arith.addi %[[N0]], %c15
// CHECK: %[[NHI:.*]] = arith.minsi %[[NHI0]], %c63
// CHECK: %[[KLO:.*]] = arith.divsi %[[N0]], %c16 : index
// CHECK: %[[KHI:.*]] = arith.divsi %[[NHI]], %c16 : index
// CHECK: %[[EMPTY:.*]] = arith.cmpi slt, %[[QHI]], %[[KLO]] : index
// CHECK: scf.if %[[EMPTY]]
// CHECK: } else {
// Not full: !(qlo >= khi), canonicalized:
// CHECK-NEXT: %[[PART:.*]] = arith.cmpi slt, %[[QLO]], %[[KHI]] : index
// CHECK: flex.online_attention
// CHECK-SAME: mask_when(%[[PART]]) {transposed_key} mask_mod
func.func @block_causal_div(%q: tensor<1x1x64x16xf32>, %k: tensor<1x1x64x16xf32>, %v: tensor<1x1x64x16xf32>) -> tensor<1x1x64x16xf32> {
  %o = tensor.empty() : tensor<1x1x64x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>)
      outs(%o : tensor<1x1x64x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c16 = arith.constant 16 : index
        %qb = arith.floordivsi %m, %c16 : index
        %kb = arith.divsi %n, %c16 : index
        %c = arith.cmpi sge, %qb, %kb : index
        flex.yield %c : i1
      } -> tensor<1x1x64x16xf32>
  return %r : tensor<1x1x64x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 1, 16, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// GQA decode row tile (tile sizes [1, 2, 2]): the 2 query heads of one kv
// head, 2 rows each, as one [4, 16] tile over kv head h0 / 2. The mask (a
// shift: no interval analysis) is classified by the dense pre-pass, row i
// at head h0 + i / 2 and query i % 2; flex.online_attention gets
// rows_per_head = 2.
// CHECK-LABEL: func.func @gqa_decode_dense
// CHECK: scf.forall (%[[IV:.*]]) in (2)
// CHECK: %[[H0:.*]] = affine.apply #{{.*}}(%[[IV]])
// CHECK: %[[Q:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] : tensor<1x2x2x16xf32> into tensor<4x16xf32>
// CHECK: %[[KH:.*]] = arith.divui %[[H0]], %c2 : index
// CHECK: scf.for {{.*}} -> (tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>)
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1
// CHECK: %[[DH:.*]] = arith.divui %[[I]], %c2 : index
// CHECK: %[[H:.*]] = arith.addi %[[H0]], %[[DH]] : index
// CHECK: %[[MI:.*]] = arith.remui %[[I]], %c2 : index
// CHECK: arith.minsi %[[MI]], %c1 : index
// CHECK: scf.for
// CHECK: arith.cmpi ne, %{{.*}}, %[[H]] : index
// CHECK: tensor.extract_slice %{{.*}}[0, %[[KH]], %{{.*}}, 0] [1, 1, 16, 16]
// CHECK: flex.online_attention ins(%[[Q]], %{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>)
// CHECK-SAME: at(%c0, %[[H0]], %c0, %{{.*}}) bounds(%c2, %c32)
// CHECK-SAME: mask_when(%{{.*}}) {rows_per_head = 2 : i64}
// CHECK: tensor.expand_shape {{.*}} output_shape [1, 2, 2, 16] : tensor<4x16xf32> into tensor<1x2x2x16xf32>
// CHECK: scf.forall.in_parallel
func.func @gqa_decode_dense(%q: tensor<1x4x2x16xf32>, %k: tensor<1x2x32x16xf32>, %v: tensor<1x2x32x16xf32>) -> tensor<1x4x2x16xf32> {
  %o = tensor.empty() : tensor<1x4x2x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x4x2x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>)
      outs(%o : tensor<1x4x2x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c3 = arith.constant 3 : index
        %nm = arith.addi %n, %m : index
        %s = arith.shrui %nm, %c3 : index
        %ok = arith.cmpi ne, %s, %h : index
        flex.yield %ok : i1
      } -> tensor<1x4x2x16xf32>
  return %r : tensor<1x4x2x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = transform.structured.tile_using_forall %0 tile_sizes [1, 2, 2, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
