// RUN: flex-opt %s -split-input-file -flex-reassociate-sums --mlir-print-local-scope | FileCheck %s

// flex-reassociate-sums: the addition that accumulates a reduction generic
// into its init gets `reassoc` (LLVM may then vectorize the sum); other
// additions, other combiners and ops inside loops keep strict order.

// log_softmax's sum of exponentials: the accumulating addf is reassociable,
// whichever side the accumulator is on.
// CHECK-LABEL: func.func @exp_row_sum
// CHECK:         ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK:           %[[E:.*]] = math.exp %[[IN]] : f32
// CHECK:           %[[A:.*]] = arith.addf %[[E]], %[[OUT]] fastmath<reassoc> : f32
// CHECK:           linalg.yield %[[A]] : f32
// CHECK:         ^bb0(%[[IN2:.*]]: f32, %[[OUT2:.*]]: f32):
// CHECK:           %[[A2:.*]] = arith.addf %[[OUT2]], %[[IN2]] fastmath<reassoc> : f32
func.func @exp_row_sum(%x: tensor<8x1024xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x1024xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %ex = math.exp %in : f32
    %a = arith.addf %ex, %out : f32
    linalg.yield %a : f32
  } -> tensor<8xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x1024xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  } -> tensor<8xf32>
  return %s, %t : tensor<8xf32>, tensor<8xf32>
}

// -----

// A column sum on buffers (a norm weight's gradient) and an f32 sum of bf16
// values (after flex-widen-reductions): both reassociable. The addition
// that computes the summand is not.
// CHECK-LABEL: func.func @column_sum_buffers
// CHECK:         ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK:           %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK:           %[[R:.*]] = arith.addf %[[S]], %[[OUT]] fastmath<reassoc> : f32
// CHECK:         ^bb0(%[[IN:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK:           %[[W:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK:           arith.addf %[[W]], %[[ACC]] fastmath<reassoc> : f32
func.func @column_sum_buffers(%x: memref<1024x64xf32>, %y: memref<1024x64xf32>, %s: memref<64xf32>,
                              %h: memref<4x256xbf16>, %t: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                   affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %y : memref<1024x64xf32>, memref<1024x64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %sum = arith.addf %a, %b : f32
    %r = arith.addf %sum, %out : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<4x256xbf16>) outs(%t : memref<4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    %r = arith.addf %w, %out : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Left alone: an elementwise generic (no reduction loop), a max reduction,
// an accumulator read twice (out * 2 + x: not a plain sum), a sum inside a
// loop (flex-to-flash's tiles) and a matmul.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     reassoc
// CHECK:         return
func.func @left_alone(%x: tensor<8x1024xf32>, %a: tensor<8x16xf32>, %b: tensor<16x4xf32>)
    -> (tensor<8x1024xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x4xf32>) {
  %c0 = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<8x1024xf32>
  %ew = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x1024xf32>) outs(%e2 : tensor<8x1024xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<8x1024xf32>
  %e = tensor.empty() : tensor<8xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x1024xf32>) outs(%m0 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %twice = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                           iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x1024xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.addf %out, %out : f32
    %r = arith.addf %d, %in : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %c0i = arith.constant 0 : index
  %c1i = arith.constant 1 : index
  %c2i = arith.constant 2 : index
  %looped = scf.for %k = %c0i to %c2i step %c1i iter_args(%acc = %z) -> (tensor<8xf32>) {
    %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<8x1024xf32>) outs(%acc : tensor<8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.addf %in, %out : f32
      linalg.yield %r : f32
    } -> tensor<8xf32>
    scf.yield %s : tensor<8xf32>
  }
  %e3 = tensor.empty() : tensor<8x4xf32>
  %z3 = linalg.fill ins(%c0 : f32) outs(%e3 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z3 : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %ew, %m, %twice, %looped, %mm : tensor<8x1024xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x4xf32>
}
