// RUN: flex-opt %s -split-input-file -flex-insert-checks | FileCheck %s

// Guarded reads of captured tensors and gathers, cf.assert -> flex.check.

// score_mod `s + tab[ids[kv]]` as flex-materialize gives it (torch-mlir's
// negative-index wrap on both reads). ids[kv] is provably in range
// (kv < N = 16 = size), tab[x] is not: check -8 <= x < 8, report x, read
// at a clamped index.
// CHECK-LABEL: func.func @score_capture
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x16x8xf32>, %{{.*}}: tensor<1x2x16x8xf32>, %{{.*}}: tensor<1x2x16x8xf32>, %[[IDS:.*]]: tensor<16xi64>
// CHECK: score_mod
// CHECK: %[[E1:.*]] = tensor.extract %[[IDS]][%{{.*}}] : tensor<16xi64>
// CHECK: %[[LT0:.*]] = arith.cmpi slt, %[[E1]], %{{.*}} : i64
// CHECK: %[[ADD:.*]] = arith.addi %[[E1]], %{{.*}} : i64
// CHECK: %[[SEL:.*]] = arith.select %[[LT0]], %[[ADD]], %[[E1]] : i64
// CHECK: %[[IX:.*]] = arith.index_cast %[[SEL]] : i64 to index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK: %[[LOW:.*]] = arith.subi %[[C0]], %[[C8]] : i64
// CHECK: %[[GE:.*]] = arith.cmpi sge, %[[E1]], %[[LOW]] : i64
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[E1]], %[[C8]] : i64
// CHECK: %[[OK:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK: %[[D0:.*]] = arith.constant 0 : i64
// CHECK: flex.check %[[OK]], "index {0} is out of bounds for dimension {1} with size {2} in score_mod, reading captured tensor #1 (tensor<8xf32>)" details(%[[E1]], %[[D0]], %[[C8]])
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[IX]], %{{.*}} : index
// CHECK: tensor.extract %{{.*}}[%[[SAFE]]] : tensor<8xf32>
// CHECK-NOT: flex.check
// CHECK: flex.yield
func.func @score_capture(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %ids: tensor<16xi64>) -> tensor<1x2x16x8xf32> {
  %tab = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]> : tensor<8xf32>
  %init = tensor.empty() : tensor<1x2x16x8xf32>
  %o = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) captures(%ids, %tab : tensor<16xi64>, tensor<8xf32>) outs(%init : tensor<1x2x16x8xf32>) scale(0.353553385) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
    %0 = arith.index_cast %n : index to i32
    %c0 = arith.constant 0 : i64
    %c16 = arith.constant 16 : i64
    %c8 = arith.constant 8 : i64
    %1 = arith.extsi %0 : i32 to i64
    %2 = arith.cmpi slt, %1, %c0 : i64
    %3 = arith.addi %1, %c16 : i64
    %4 = arith.select %2, %3, %1 : i64
    %5 = arith.index_cast %4 : i64 to index
    %e = tensor.extract %ids[%5] : tensor<16xi64>
    %6 = arith.cmpi slt, %e, %c0 : i64
    %7 = arith.addi %e, %c8 : i64
    %8 = arith.select %6, %7, %e : i64
    %9 = arith.index_cast %8 : i64 to index
    %t = tensor.extract %tab[%9] : tensor<8xf32>
    %r = arith.addf %s, %t : f32
    flex.yield %r : f32
  } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// mask_mod `tab[m + 3] > 0` (no wrap: a plain index): 0 <= i < 16 fails
// for m >= 13 of M = 16. bias[h] (h < Hq = 2 = size) stays unchecked.
// CHECK-LABEL: func.func @mask_capture
// CHECK: mask_mod
// CHECK: ^bb0(%{{.*}}: index, %[[H:.*]]: index, %[[M:.*]]: index, %{{.*}}: index):
// CHECK: %[[I:.*]] = arith.addi %[[M]], %{{.*}} : index
// CHECK-DAG: %[[N:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-DAG: %[[Z:.*]] = arith.constant 0 : i64
// CHECK: %[[GE:.*]] = arith.cmpi sge, %[[I64]], %[[Z]] : i64
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[I64]], %[[N]] : i64
// CHECK: %[[OK:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK: flex.check %[[OK]], "index {0} is out of bounds for dimension {1} with size {2} in mask_mod, reading captured tensor #0 (tensor<16xf32>, input #3 of @mask_capture)" details(%[[I64]], %{{.*}}, %[[N]])
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[I]], %{{.*}} : index
// CHECK: tensor.extract %{{.*}}[%[[SAFE]]] : tensor<16xf32>
// CHECK-NOT: flex.check
// CHECK: tensor.extract %{{.*}}[%[[H]]] : tensor<2xf32>
// CHECK: flex.yield
func.func @mask_capture(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %tab: tensor<16xf32>, %bias: tensor<2xf32>) -> tensor<1x2x16x8xf32> {
  %init = tensor.empty() : tensor<1x2x16x8xf32>
  %o = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) captures(%tab, %bias : tensor<16xf32>, tensor<2xf32>) outs(%init : tensor<1x2x16x8xf32>) scale(1.0) mask_mod {
  ^bb0(%b: index, %h: index, %m: index, %n: index):
    %c3 = arith.constant 3 : index
    %i = arith.addi %m, %c3 : index
    %t = tensor.extract %tab[%i] : tensor<16xf32>
    %bh = tensor.extract %bias[%h] : tensor<2xf32>
    %x = arith.addf %t, %bh : f32
    %zero = arith.constant 0.0 : f32
    %keep = arith.cmpf ogt, %x, %zero : f32
    flex.yield %keep : i1
  } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// torch-mlir's embedding: the guard on the token index comes right after
// the index is computed, before torch-mlir's own asserts, which become
// flex.check; the embedding column (linalg.index 2 < 16) is not checked.
// CHECK-LABEL: func.func @embedding
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[IX:.*]] = arith.index_cast %[[IN]] : i64 to index
// CHECK: flex.check %{{.*}}, "index {0} is out of bounds for dimension {1} with size {2} in a gather from tensor<10x16xf32> in @embedding" details(%{{.*}}, %{{.*}}, %{{.*}})
// CHECK: %[[SAFE:.*]] = arith.select %{{.*}}, %[[IX]], %{{.*}} : index
// CHECK: %[[COL:.*]] = linalg.index 2 : index
// CHECK: flex.check %{{.*}}, "index must be smaller than dim size (runtime assert in @embedding)"
// CHECK: flex.check %{{.*}}, "index must be larger or equal to 0 (runtime assert in @embedding)"
// CHECK-NOT: cf.assert
// CHECK: tensor.extract %{{.*}}[%[[SAFE]], %[[COL]]] : tensor<10x16xf32>
#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @embedding(%tok: tensor<1x2xi64>) -> tensor<1x2x16xf32> {
  %c10 = arith.constant 10 : index
  %c0_i64 = arith.constant 0 : i64
  %tab = arith.constant dense<1.0> : tensor<10x16xf32>
  %0 = tensor.empty() : tensor<1x2x16xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%tok : tensor<1x2xi64>) outs(%0 : tensor<1x2x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %5 = arith.index_cast %in : i64 to index
    %6 = linalg.index 2 : index
    %7 = arith.cmpi slt, %5, %c10 : index
    cf.assert %7, "index must be smaller than dim size"
    %8 = arith.cmpi sge, %in, %c0_i64 : i64
    cf.assert %8, "index must be larger or equal to 0"
    %e = tensor.extract %tab[%5, %6] : tensor<10x16xf32>
    linalg.yield %e : f32
  } -> tensor<1x2x16xf32>
  return %1 : tensor<1x2x16xf32>
}

// -----

// A dynamic dim may be 0: the size is taken once in front of the op and
// the read happens under scf.if (zero otherwise).
// CHECK-LABEL: func.func @dynamic_capture
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<?xf32>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[D:.*]] = tensor.dim %[[T]], %[[C0]] : tensor<?xf32>
// CHECK: %[[D64:.*]] = arith.index_cast %[[D]] : index to i64
// CHECK: flex.attention
// CHECK: %[[LT:.*]] = arith.cmpi slt, %{{.*}}, %[[D64]] : i64
// CHECK: %[[OK:.*]] = arith.andi %{{.*}}, %[[LT]] : i1
// CHECK: flex.check %[[OK]], "index {0} is out of bounds for dimension {1} with size {2} in score_mod, reading captured tensor #0 (tensor<?xf32>, input #3 of @dynamic_capture)" details(%{{.*}}, %{{.*}}, %[[D64]])
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]]
// CHECK: %[[R:.*]] = scf.if %[[OK]] -> (f32) {
// CHECK-NEXT: %[[E:.*]] = tensor.extract %[[T]][%[[SAFE]]] : tensor<?xf32>
// CHECK-NEXT: scf.yield %[[E]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: scf.yield %[[Z]] : f32
// CHECK: arith.addf %{{.*}}, %[[R]] : f32
func.func @dynamic_capture(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %t: tensor<?xf32>) -> tensor<1x2x16x8xf32> {
  %init = tensor.empty() : tensor<1x2x16x8xf32>
  %o = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) captures(%t : tensor<?xf32>) outs(%init : tensor<1x2x16x8xf32>) scale(1.0) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
    %e = tensor.extract %t[%n] : tensor<?xf32>
    %r = arith.addf %s, %e : f32
    flex.yield %r : f32
  } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// A size-0 dim: nothing can be read; the check (always false) stays and
// the read becomes a zero.
// CHECK-LABEL: func.func @empty_capture
// CHECK: flex.check %{{.*}}, "index {0} is out of bounds for dimension {1} with size {2} in score_mod
// CHECK-NOT: tensor.extract
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: arith.addf %{{.*}}, %[[Z]] : f32
func.func @empty_capture(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %t: tensor<0xf32>) -> tensor<1x2x16x8xf32> {
  %init = tensor.empty() : tensor<1x2x16x8xf32>
  %o = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) captures(%t : tensor<0xf32>) outs(%init : tensor<1x2x16x8xf32>) scale(1.0) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
    %e = tensor.extract %t[%n] : tensor<0xf32>
    %r = arith.addf %s, %e : f32
    flex.yield %r : f32
  } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// A top-level cf.assert becomes a check; braces are escaped for str.format.
// Reads outside flex.attention / linalg.generic are left alone.
// CHECK-LABEL: func.func @assert_top_level
// CHECK: flex.check %{{.*}}, "size {{[{][{]}}0{{[}][}]}} mismatch (runtime assert in @assert_top_level)"
// CHECK-NOT: cf.assert
// CHECK: tensor.extract %{{.*}}[%{{.*}}] : tensor<4xf32>
func.func @assert_top_level(%c: i1, %t: tensor<4xf32>, %i: index) -> f32 {
  cf.assert %c, "size {0} mismatch"
  %e = tensor.extract %t[%i] : tensor<4xf32>
  return %e : f32
}

// -----

// Remainder / quotient by a positive constant: (n + 3) % 16 and n / 2 are
// in range (no check); (m - n) % 16 may be negative (checked).
// CHECK-LABEL: func.func @rem_div
// CHECK: score_mod
// CHECK: %[[R:.*]] = arith.remsi %{{.*}}, %{{.*}} : index
// CHECK-NEXT: tensor.extract %{{.*}}[%[[R]]] : tensor<16xf32>
// CHECK: %[[D:.*]] = arith.divui %{{.*}}, %{{.*}} : index
// CHECK-NEXT: tensor.extract %{{.*}}[%[[D]]] : tensor<8xf32>
// CHECK: %[[NEG:.*]] = arith.remsi %{{.*}}, %{{.*}} : index
// CHECK: flex.check
// CHECK: %[[SAFE:.*]] = arith.select %{{.*}}, %[[NEG]], %{{.*}} : index
// CHECK: tensor.extract %{{.*}}[%[[SAFE]]] : tensor<16xf32>
// CHECK-NOT: flex.check
func.func @rem_div(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %t: tensor<16xf32>, %u: tensor<8xf32>) -> tensor<1x2x16x8xf32> {
  %init = tensor.empty() : tensor<1x2x16x8xf32>
  %o = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) captures(%t, %u : tensor<16xf32>, tensor<8xf32>) outs(%init : tensor<1x2x16x8xf32>) scale(1.0) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c16 = arith.constant 16 : index
    %a = arith.addi %n, %c3 : index
    %r = arith.remsi %a, %c16 : index
    %e1 = tensor.extract %t[%r] : tensor<16xf32>
    %d = arith.divui %n, %c2 : index
    %e2 = tensor.extract %u[%d] : tensor<8xf32>
    %diff = arith.subi %m, %n : index
    %neg = arith.remsi %diff, %c16 : index
    %e3 = tensor.extract %t[%neg] : tensor<16xf32>
    %x = arith.addf %e1, %e2 : f32
    %y = arith.addf %x, %e3 : f32
    %z = arith.addf %s, %y : f32
    flex.yield %z : f32
  } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// Block tensors: every count of kv_num_blocks / full_kv_num_blocks is
// checked against [0, NB] in a loop in front of the op; with a dynamic M,
// MB * QBS >= M is checked too.
// CHECK-LABEL: func.func @block_checks
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x2x?x8xf32>, %{{.+}}, %{{.+}}, %[[N:[^:]+]]: tensor<1x2x2xi32>, %{{.+}}, %[[FN:[^:]+]]: tensor<1x2x2xi32>
// CHECK: %[[M:.+]] = tensor.dim %[[Q]], %{{.+}} : tensor<1x2x?x8xf32>
// CHECK: %[[ROWS:.+]] = arith.muli %{{.+}}, %{{.+}} : index
// CHECK: %[[COVER:.+]] = arith.cmpi sge, %[[ROWS]], %[[M]] : index
// CHECK: flex.check %[[COVER]], "block tensors cover {0} query blocks of {1} rows, fewer than M = {2}"
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[QB:.+]] = %{{.+}} to %{{.+}} step
// CHECK: %[[C:.+]] = tensor.extract %[[N]][%{{.+}}, %{{.+}}, %[[QB]]] : tensor<1x2x2xi32>
// CHECK: %[[CI:.+]] = arith.index_cast %[[C]] : i32 to index
// CHECK: %[[GE:.+]] = arith.cmpi sge, %[[CI]], %{{.+}} : index
// CHECK: %[[LE:.+]] = arith.cmpi sle, %[[CI]], %[[NB:.+]] : index
// CHECK: %[[OK:.+]] = arith.andi %[[GE]], %[[LE]] : i1
// CHECK: flex.check %[[OK]], "kv_num_blocks value {0} at query block {1} is out of range [0, {2}] (the number of blocks in the indices)"
// CHECK: tensor.extract %[[FN]]
// CHECK: flex.check %{{.+}}, "full_kv_num_blocks value {0}
// CHECK: flex.attention
func.func @block_checks(%q: tensor<1x2x?x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>, %fn: tensor<1x2x2xi32>, %fi: tensor<1x2x2x2xi32>, %o: tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x?x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>)
      kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>)
      full_kv_blocks(%fn, %fi : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32, 32]
      outs(%o : tensor<1x2x?x8xf32>) scale(0.125) -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}
