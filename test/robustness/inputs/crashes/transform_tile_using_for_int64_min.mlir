// Crash reproducer (guarded): INT64_MIN is the dynamic-size sentinel; as a
// literal tile size it has no SSA operand and the verifier of
// transform.structured.tile_using_for indexed past its operands
// (assertion). Single-token fuzz mutant of test/Dialect/Flex/tiling.mlir.
func.func @main(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x12xf32>, %o: tensor<1x2x16x12xf32>) -> tensor<1x2x16x12xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x12xf32>)
      outs(%o : tensor<1x2x16x12xf32>) scale(0.125) -> tensor<1x2x16x12xf32>
  return %r : tensor<1x2x16x12xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["flex.attention"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %loops = transform.structured.tile_using_for %0 tile_sizes [0, 0, 0, 0, -9223372036854775808] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
