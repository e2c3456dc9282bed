// Crash reproducer (guarded): a bool tensor captured by mask_mod becomes a
// memref<4x4xi1> load (same upstream assertion as i1_memref_output.mlir).
func.func @main(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>, %keep: tensor<4x4xi1>) -> tensor<1x1x4x8xf32> {
  %o = tensor.empty() : tensor<1x1x4x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
      captures(%keep : tensor<4x4xi1>) outs(%o : tensor<1x1x4x8xf32>) scale(0.35)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %keep[%m, %n] : tensor<4x4xi1>
        flex.yield %x : i1
      } -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}
