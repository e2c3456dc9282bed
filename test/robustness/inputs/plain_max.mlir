// Seed input for the robustness fuzzer: no modifiers, Ev != E, M != N,
// key batch broadcast, logsumexp and max_scores.
func.func @main(%q: tensor<2x2x5x16xf32>, %k: tensor<1x2x7x16xf32>, %v: tensor<1x2x7x24xf32>) -> (tensor<2x2x5x24xf32>, tensor<2x2x5xf32>, tensor<2x2x5xf32>) {
  %o = tensor.empty() : tensor<2x2x5x24xf32>
  %l = tensor.empty() : tensor<2x2x5xf32>
  %x = tensor.empty() : tensor<2x2x5xf32>
  %r:3 = flex.attention ins(%q, %k, %v : tensor<2x2x5x16xf32>, tensor<1x2x7x16xf32>, tensor<1x2x7x24xf32>)
      outs(%o : tensor<2x2x5x24xf32>) logsumexp(%l : tensor<2x2x5xf32>) max_scores(%x : tensor<2x2x5xf32>) scale(0.25)
      -> tensor<2x2x5x24xf32>, tensor<2x2x5xf32>, tensor<2x2x5xf32>
  return %r#0, %r#1, %r#2 : tensor<2x2x5x24xf32>, tensor<2x2x5xf32>, tensor<2x2x5xf32>
}
