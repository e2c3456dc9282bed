// RUN: flex-opt %s -split-input-file -flex-fold-matmul-operands --mlir-print-local-scope | FileCheck %s

// flex-fold-matmul-operands: a linalg.matmul / batch_matmul on tensors reads
// through a linalg.transpose that swaps the last two dims (swapped operand
// map) and through elementwise arith.extf generics (narrow source) when both
// operands widen the same type. Producers left unused are erased.

// aten.linear: the transposed weight is read in place, maps (m,k),(n,k),(m,n).

// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xf32>, %[[W:[a-z0-9_]+]]: tensor<32x16xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[Z:[a-z0-9_]+]] = linalg.fill
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<8x16xf32>, tensor<32x16xf32>) outs(%[[Z]] : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @linear(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) -> tensor<8x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%x, %t : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A transposed left operand (x.t() @ y): A's map becomes (k, m).

// CHECK-LABEL: func.func @transposed_lhs
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<16x8xf32>, %[[Y:[a-z0-9_]+]]: tensor<16x32xf32>, %[[C:[a-z0-9_]+]]: tensor<8x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME: ins(%[[X]], %[[Y]] : tensor<16x8xf32>, tensor<16x32xf32>) outs(%[[C]] : tensor<8x32xf32>)
// CHECK: return %[[R]]
func.func @transposed_lhs(%x: tensor<16x8xf32>, %y: tensor<16x32xf32>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%x : tensor<16x8xf32>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %r = linalg.matmul ins(%t, %y : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// Two swaps cancel: the matmul reads the source with the default maps
// (elided when printed).

// CHECK-LABEL: func.func @double_transpose
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xf32>, %[[W:[a-z0-9_]+]]: tensor<16x32xf32>, %[[C:[a-z0-9_]+]]: tensor<8x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<8x16xf32>, tensor<16x32xf32>) outs(%[[C]] : tensor<8x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @double_transpose(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %e1 = tensor.empty() : tensor<32x16xf32>
  %t1 = linalg.transpose ins(%w : tensor<16x32xf32>) outs(%e1 : tensor<32x16xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<16x32xf32>
  %t2 = linalg.transpose ins(%t1 : tensor<32x16xf32>) outs(%e2 : tensor<16x32xf32>) permutation = [1, 0]
  %r = linalg.matmul ins(%x, %t2 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// bf16 aten.linear with a bias: both operands widened to f32 first. The
// matmul reads the bf16 values (it extends them itself) into its f32 init;
// the extensions and the transpose are erased.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @bf16_linear
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<32x16xbf16>)
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: %[[Z:[a-z0-9_]+]] = linalg.fill
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<8x16xbf16>, tensor<32x16xbf16>) outs(%[[Z]] : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @bf16_linear(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>) -> tensor<8x32xf32> {
  %cst = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<8x16xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x16xbf16>) outs(%ex : tensor<8x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %ew = tensor.empty() : tensor<32x16xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<32x16xbf16>) outs(%ew : tensor<32x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<32x16xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%wf : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%xf, %t : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// f16 on both sides, the transpose before the extension (on the narrow
// weight): still folded.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @f16_transpose_then_extend
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xf16>, %[[W:[a-z0-9_]+]]: tensor<32x16xf16>, %[[C:[a-z0-9_]+]]: tensor<8x32xf32>)
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<8x16xf16>, tensor<32x16xf16>) outs(%[[C]] : tensor<8x32xf32>)
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @f16_transpose_then_extend(%x: tensor<8x16xf16>, %w: tensor<32x16xf16>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %ex = tensor.empty() : tensor<8x16xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x16xf16>) outs(%ex : tensor<8x16xf32>) {
  ^bb0(%in: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %e = tensor.empty() : tensor<16x32xf16>
  %t = linalg.transpose ins(%w : tensor<32x16xf16>) outs(%e : tensor<16x32xf16>) permutation = [1, 0]
  %ew = tensor.empty() : tensor<16x32xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<16x32xf16>) outs(%ew : tensor<16x32xf32>) {
  ^bb0(%in: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    linalg.yield %0 : f32
  } -> tensor<16x32xf32>
  %r = linalg.matmul ins(%xf, %wf : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// Transposed batch_matmul (perm [0, 2, 1]): B's map becomes (b, n, k).

// CHECK-LABEL: func.func @batch_matmul_transposed
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<2x8x16xf32>, %[[B:[a-z0-9_]+]]: tensor<2x32x16xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[Z:[a-z0-9_]+]] = linalg.fill
// CHECK: %[[R:[a-z0-9_]+]] = linalg.batch_matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<2x8x16xf32>, tensor<2x32x16xf32>) outs(%[[Z]] : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @batch_matmul_transposed(%a: tensor<2x8x16xf32>, %b: tensor<2x32x16xf32>) -> tensor<2x8x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x16x32xf32>
  %t = linalg.transpose ins(%b : tensor<2x32x16xf32>) outs(%e : tensor<2x16x32xf32>) permutation = [0, 2, 1]
  %z0 = tensor.empty() : tensor<2x8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %r = linalg.batch_matmul ins(%a, %t : tensor<2x8x16xf32>, tensor<2x16x32xf32>) outs(%z : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}

// -----

// Both operands of a batch_matmul transposed (a.transpose(-1,-2) @ b.transpose(-1,-2)).

// CHECK-LABEL: func.func @batch_matmul_both_transposed
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<2x16x8xf32>, %[[B:[a-z0-9_]+]]: tensor<2x32x16xf32>, %[[C:[a-z0-9_]+]]: tensor<2x8x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.batch_matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<2x16x8xf32>, tensor<2x32x16xf32>) outs(%[[C]] : tensor<2x8x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @batch_matmul_both_transposed(%a: tensor<2x16x8xf32>, %b: tensor<2x32x16xf32>, %c: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %ea = tensor.empty() : tensor<2x8x16xf32>
  %ta = linalg.transpose ins(%a : tensor<2x16x8xf32>) outs(%ea : tensor<2x8x16xf32>) permutation = [0, 2, 1]
  %eb = tensor.empty() : tensor<2x16x32xf32>
  %tb = linalg.transpose ins(%b : tensor<2x32x16xf32>) outs(%eb : tensor<2x16x32xf32>) permutation = [0, 2, 1]
  %r = linalg.batch_matmul ins(%ta, %tb : tensor<2x8x16xf32>, tensor<2x16x32xf32>) outs(%c : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}

// -----

// A batch_matmul whose B map broadcasts a 2-D weight, (b,m,n,k) -> (k,n),
// fed by a transpose. linalg.batch_matmul only accepts the broadcast maps
// (b|m, k) for A and (b, k) / (k, n) for B, so the swapped map (n, k) would
// not verify: the transpose must stay.
//
// BUG (flex-fold-matmul-operands, FoldMatmulOperands.cpp): this case FAILS.
// The pass swaps the 2-D broadcast map to (d2, d3) and the rebuilt op fails
// verification: "'linalg.batch_matmul' op Invalid broadcast requested"
// (flex-opt exits 1). Expected: a verifying op (the transpose kept, as
// checked below). Left failing on purpose until the pass is fixed.

// CHECK-LABEL: func.func @batch_matmul_broadcast_transposed
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<2x8x16xf32>, %[[W:[a-z0-9_]+]]: tensor<32x16xf32>, %[[C:[a-z0-9_]+]]: tensor<2x8x32xf32>)
// CHECK: %[[T:[a-z0-9_]+]] = linalg.transpose ins(%[[W]] : tensor<32x16xf32>) outs(%{{.+}} : tensor<16x32xf32>) permutation = [1, 0]
// CHECK: %[[R:[a-z0-9_]+]] = linalg.batch_matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME: ins(%[[A]], %[[T]] : tensor<2x8x16xf32>, tensor<16x32xf32>) outs(%[[C]] : tensor<2x8x32xf32>)
// CHECK: return %[[R]]
func.func @batch_matmul_broadcast_transposed(%a: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %c: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %e = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %r = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
         ins(%a, %t : tensor<2x8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}

// -----

// NEGATIVE: a 3-D transpose that is not a swap of the last two dims stays.

// CHECK-LABEL: func.func @not_last_two
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<2x8x16xf32>, %[[B:[a-z0-9_]+]]: tensor<16x2x32xf32>)
// CHECK: %[[T:[a-z0-9_]+]] = linalg.transpose ins(%[[B]] : tensor<16x2x32xf32>) outs(%{{.+}} : tensor<2x16x32xf32>) permutation = [1, 0, 2]
// CHECK: %[[Z:[a-z0-9_]+]] = linalg.fill
// CHECK: %[[R:[a-z0-9_]+]] = linalg.batch_matmul ins(%[[A]], %[[T]] : tensor<2x8x16xf32>, tensor<2x16x32xf32>) outs(%[[Z]] : tensor<2x8x32xf32>)
// CHECK: return %[[R]]
func.func @not_last_two(%a: tensor<2x8x16xf32>, %b: tensor<16x2x32xf32>) -> tensor<2x8x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x16x32xf32>
  %t = linalg.transpose ins(%b : tensor<16x2x32xf32>) outs(%e : tensor<2x16x32xf32>) permutation = [1, 0, 2]
  %z0 = tensor.empty() : tensor<2x8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %r = linalg.batch_matmul ins(%a, %t : tensor<2x8x16xf32>, tensor<2x16x32xf32>) outs(%z : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}

// -----

// NEGATIVE: only one operand is widened (a mixed bf16 x f32 product): the
// matmul stays f32, reading the extension's result.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<16x32xf32>)
// CHECK: %[[XF:[a-z0-9_]+]] = linalg.generic
// CHECK-SAME: ins(%[[X]] : tensor<8x16xbf16>)
// CHECK: arith.extf
// CHECK: %[[Z:[a-z0-9_]+]] = linalg.fill
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul ins(%[[XF]], %[[W]] : tensor<8x16xf32>, tensor<16x32xf32>) outs(%[[Z]] : tensor<8x32xf32>)
// CHECK: return %[[R]]
func.func @mixed(%x: tensor<8x16xbf16>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %cst = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<8x16xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x16xbf16>) outs(%ex : tensor<8x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%xf, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// NEGATIVE: bf16 on one side and f16 on the other: both extensions stay,
// the transpose of the (f32) weight is still folded.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @mixed_narrow_types
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<32x16xf16>)
// CHECK: %[[XF:[a-z0-9_]+]] = linalg.generic
// CHECK-SAME: ins(%[[X]] : tensor<8x16xbf16>)
// CHECK: %[[WF:[a-z0-9_]+]] = linalg.generic
// CHECK-SAME: ins(%[[W]] : tensor<32x16xf16>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME: ins(%[[XF]], %[[WF]] : tensor<8x16xf32>, tensor<32x16xf32>)
// CHECK: return %[[R]]
func.func @mixed_narrow_types(%x: tensor<8x16xbf16>, %w: tensor<32x16xf16>) -> tensor<8x32xf32> {
  %cst = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<8x16xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x16xbf16>) outs(%ex : tensor<8x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %ew = tensor.empty() : tensor<32x16xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<32x16xf16>) outs(%ew : tensor<32x16xf32>) {
  ^bb0(%in: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    linalg.yield %0 : f32
  } -> tensor<32x16xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%wf : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%xf, %t : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A transpose with another user: the matmul reads the source, the transpose
// stays for the other user.

// CHECK-LABEL: func.func @shared_transpose
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xf32>, %[[W:[a-z0-9_]+]]: tensor<32x16xf32>)
// CHECK: %[[T:[a-z0-9_]+]] = linalg.transpose ins(%[[W]] : tensor<32x16xf32>) outs(%{{.+}} : tensor<16x32xf32>) permutation = [1, 0]
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<8x16xf32>, tensor<32x16xf32>)
// CHECK: return %[[R]], %[[T]] : tensor<8x32xf32>, tensor<16x32xf32>
func.func @shared_transpose(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) -> (tensor<8x32xf32>, tensor<16x32xf32>) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%x, %t : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r, %t : tensor<8x32xf32>, tensor<16x32xf32>
}

// -----

// Nothing to fold: the matmul is left as it is.

// CHECK-LABEL: func.func @plain
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-z0-9_]+]]: tensor<16x32xf32>, %[[C:[a-z0-9_]+]]: tensor<8x32xf32>)
// CHECK-NEXT: %[[R:[a-z0-9_]+]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<8x16xf32>, tensor<16x32xf32>) outs(%[[C]] : tensor<8x32xf32>)
// CHECK-NEXT: return %[[R]]
func.func @plain(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A bf16 linear as torch-mlir writes it: bf16 operands, an f32 product from
// a zero fill, rounded to bf16 by a truncf generic. The product gets the
// bf16 result itself (a bf16 zero fill of the truncation's init); the f32
// product and the generic are gone.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @bf16_linear
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<32x16xbf16>)
// CHECK: %[[E:[a-z0-9_]+]] = tensor.empty() : tensor<8x32xbf16>
// CHECK: %[[ZERO:[a-z0-9_]+]] = arith.constant 0.000000e+00 : bf16
// CHECK: %[[Z:[a-z0-9_]+]] = linalg.fill ins(%[[ZERO]] : bf16) outs(%[[E]] : tensor<8x32xbf16>)
// CHECK: %[[R:[a-z0-9_]+]] = linalg.matmul
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<8x16xbf16>, tensor<32x16xbf16>) outs(%[[Z]] : tensor<8x32xbf16>) -> tensor<8x32xbf16>
// CHECK-NOT: linalg.generic
// CHECK-NOT: xf32>
// CHECK: return %[[R]]
func.func @bf16_linear(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>) -> tensor<8x32xbf16> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xbf16>
  %t = linalg.transpose ins(%w : tensor<32x16xbf16>) outs(%e : tensor<16x32xbf16>) permutation = [1, 0]
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%x, %t : tensor<8x16xbf16>, tensor<16x32xbf16>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  %o0 = tensor.empty() : tensor<8x32xbf16>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<8x32xf32>) outs(%o0 : tensor<8x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<8x32xbf16>
  return %o : tensor<8x32xbf16>
}

// -----

// The f32 product is read elsewhere too (or accumulates into a non-zero
// init): the truncation stays.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @bf16_product_read_twice
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK: linalg.generic
// CHECK: arith.truncf
// CHECK-LABEL: func.func @bf16_product_with_bias
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK: arith.truncf
func.func @bf16_product_read_twice(%x: tensor<8x16xbf16>, %w: tensor<16x32xbf16>) -> (tensor<8x32xbf16>, tensor<8x32xf32>) {
  %cst = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%cst : f32) outs(%z0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%x, %w : tensor<8x16xbf16>, tensor<16x32xbf16>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  %o0 = tensor.empty() : tensor<8x32xbf16>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<8x32xf32>) outs(%o0 : tensor<8x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<8x32xbf16>
  return %o, %r : tensor<8x32xbf16>, tensor<8x32xf32>
}
func.func @bf16_product_with_bias(%x: tensor<8x16xbf16>, %w: tensor<16x32xbf16>, %b: tensor<8x32xf32>) -> tensor<8x32xbf16> {
  %r = linalg.matmul ins(%x, %w : tensor<8x16xbf16>, tensor<16x32xbf16>) outs(%b : tensor<8x32xf32>) -> tensor<8x32xf32>
  %o0 = tensor.empty() : tensor<8x32xbf16>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<8x32xf32>) outs(%o0 : tensor<8x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<8x32xbf16>
  return %o : tensor<8x32xbf16>
}
