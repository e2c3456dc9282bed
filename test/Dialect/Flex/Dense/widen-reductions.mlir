// RUN: flex-opt %s -split-input-file -flex-widen-reductions --mlir-print-local-scope | FileCheck %s

// flex-widen-reductions: bf16/f16 sum reductions accumulate in f32 and are
// rounded once.

// A row sum from a zero fill (torch-mlir's sum / mean): an f32 fill, an
// f32 accumulator, one truncation.
// CHECK-LABEL: func.func @row_sum_bf16
// CHECK-SAME:    (%[[X:.*]]: tensor<8x1024xbf16>)
// CHECK:         %[[C:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK:         %[[W:.*]] = arith.extf %[[C]] : bf16 to f32
// CHECK:         %[[Z:.*]] = linalg.fill ins(%[[W]] : f32) outs(%[[E]] : tensor<8xf32>)
// CHECK:         %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      ins(%[[X]] : tensor<8x1024xbf16>) outs(%[[Z]] : tensor<8xf32>)
// CHECK:         ^bb0(%[[IN:.*]]: bf16, %[[OUT:.*]]: f32):
// CHECK:           %[[XW:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK:           %[[A:.*]] = arith.addf %[[XW]], %[[OUT]] : f32
// CHECK:           linalg.yield %[[A]] : f32
// CHECK:         %[[R:.*]] = linalg.generic {{.*}}iterator_types = ["parallel"]
// CHECK-SAME:      ins(%[[S]] : tensor<8xf32>) outs(%{{.*}} : tensor<8xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:         return %[[R]] : tensor<8xbf16>
func.func @row_sum_bf16(%x: tensor<8x1024xbf16>) -> tensor<8xbf16> {
  %c0 = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<8xbf16>
  %z = linalg.fill ins(%c0 : bf16) outs(%e : tensor<8xbf16>) -> tensor<8xbf16>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x1024xbf16>) outs(%z : tensor<8xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %a = arith.addf %out, %in : bf16
    linalg.yield %a : bf16
  } -> tensor<8xbf16>
  return %s : tensor<8xbf16>
}

// -----

// An f16 init that is not a fill is extended; a summand computed in the
// body (a square) stays in f16 and is extended before the addition.
// CHECK-LABEL: func.func @sum_of_squares_f16
// CHECK-SAME:    (%[[X:.*]]: tensor<4x64xf16>, %[[I:.*]]: tensor<4xf16>)
// CHECK:         %[[WI:.*]] = linalg.generic {{.*}}ins(%[[I]] : tensor<4xf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:           arith.extf %{{.*}} : f16 to f32
// CHECK:         linalg.generic {{.*}}ins(%[[X]] : tensor<4x64xf16>) outs(%[[WI]] : tensor<4xf32>)
// CHECK:         ^bb0(%[[IN:.*]]: f16, %[[OUT:.*]]: f32):
// CHECK:           %[[SQ:.*]] = arith.mulf %[[IN]], %[[IN]] : f16
// CHECK:           %[[SW:.*]] = arith.extf %[[SQ]] : f16 to f32
// CHECK:           arith.addf %[[SW]], %[[OUT]] : f32
// CHECK:         arith.truncf %{{.*}} : f32 to f16
func.func @sum_of_squares_f16(%x: tensor<4x64xf16>, %init: tensor<4xf16>) -> tensor<4xf16> {
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x64xf16>) outs(%init : tensor<4xf16>) {
  ^bb0(%in: f16, %out: f16):
    %sq = arith.mulf %in, %in : f16
    %a = arith.addf %sq, %out : f16
    linalg.yield %a : f16
  } -> tensor<4xf16>
  return %s : tensor<4xf16>
}

// -----

// Left alone: an f32 sum, a bf16 max, an elementwise bf16 op, a reduction
// whose accumulator is read twice.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     arith.extf
// CHECK-NOT:     arith.truncf
// CHECK:         return
func.func @left_alone(%x: tensor<8x16xf32>, %z: tensor<8xf32>, %y: tensor<8x16xbf16>, %zb: tensor<8xbf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8x16xbf16>, tensor<8xbf16>) {
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<8x16xbf16>) outs(%zb : tensor<8xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %r = arith.maximumf %in, %out : bf16
    linalg.yield %r : bf16
  } -> tensor<8xbf16>
  %c = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x16xbf16>) outs(%y : tensor<8x16xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %r = arith.addf %in, %out : bf16
    linalg.yield %r : bf16
  } -> tensor<8x16xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<8x16xbf16>) outs(%zb : tensor<8xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %m = arith.mulf %in, %out : bf16
    %r = arith.addf %m, %out : bf16
    linalg.yield %r : bf16
  } -> tensor<8xbf16>
  return %a, %b, %c, %d : tensor<8xf32>, tensor<8xbf16>, tensor<8x16xbf16>, tensor<8xbf16>
}
