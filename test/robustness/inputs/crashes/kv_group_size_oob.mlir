// Crash reproducer (fixed): kv_group_size too small for Hkv; the lowering
// read key/value head (h / 1) = 63 of a 1-head tensor: SIGSEGV at run time.
// Now a verifier error.
func.func @main(%q: tensor<1x64x4x64xf32>, %k: tensor<1x1x1024x64xf32>, %v: tensor<1x1x1024x64xf32>) -> tensor<1x64x4x64xf32> {
  %o = tensor.empty() : tensor<1x64x4x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x64x4x64xf32>, tensor<1x1x1024x64xf32>, tensor<1x1x1024x64xf32>)
      outs(%o : tensor<1x64x4x64xf32>) scale(0.125) {kv_group_size = 1 : i64} -> tensor<1x64x4x64xf32>
  return %r : tensor<1x64x4x64xf32>
}
