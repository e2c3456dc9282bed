// Crash reproducer (guarded): linalg.transpose's parser leaves a null
// attribute after failing on `?` in its permutation and NamedAttrList::set
// asserts (MLIR 22.1.8). Fuzz mutant of test/Dialect/Flex/fold-matmul-operands.mlir.
func.func @transposed(%w: tensor<32x16xf32>) -> tensor<16x32xf32> {
  %e = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [?, 0]
  return %t : tensor<16x32xf32>
}
