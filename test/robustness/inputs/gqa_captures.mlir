// Seed input for the robustness fuzzer (not a lit test): GQA, a captured
// bias, score_mod + causal mask_mod, logsumexp.
func.func @main(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x8xf32>, %bias: tensor<4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) {
  %o = tensor.empty() : tensor<1x4x16x8xf32>
  %l = tensor.empty() : tensor<1x4x16xf32>
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>)
      captures(%bias : tensor<4xf32>)
      outs(%o : tensor<1x4x16x8xf32>) logsumexp(%l : tensor<1x4x16xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h] : tensor<4xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  return %r#0, %r#1 : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
}
