// Crash reproducer (guarded): linalg.generic's custom parser casts each
// `iterator_types` entry to a string attribute and asserts on a float
// (MLIR 22.1.8; vector.contract's parser does the same). Token-fuzz mutant
// of test/Dialect/Flex/Dense/fold-matmul-operands.mlir.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%r: tensor<8x32xf32>, %o0: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = [0.35355339059327373, "parallel"]}
      ins(%r : tensor<8x32xf32>) outs(%o0 : tensor<8x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<8x32xf32>
  return %o : tensor<8x32xf32>
}
