// Crash reproducer (guarded): the MLIR 22.1.8 parser asserts ("only integers
// and floats have a bitwidth") on a dense array of index elements. Fuzz
// mutant of test/Dialect/Flex/invalid.mlir (i32 -> index).
func.func @segment_sizes(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  %r = "flex.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<index: 1, 1, 1, 0, 0, 1, 1, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}
