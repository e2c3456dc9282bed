// Seed input for the robustness fuzzer: bf16, tanh soft-cap score_mod,
// a document mask reading a captured i64 tensor twice.
func.func @main(%q: tensor<1x2x8x16xbf16>, %k: tensor<1x2x8x16xbf16>, %v: tensor<1x2x8x16xbf16>, %doc: tensor<8xi64>) -> tensor<1x2x8x16xbf16> {
  %o = tensor.empty() : tensor<1x2x8x16xbf16>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>)
      captures(%doc : tensor<8xi64>)
      outs(%o : tensor<1x2x8x16xbf16>) scale(0.25)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %c = arith.constant 3.000000e+01 : f32
        %d = arith.divf %s, %c : f32
        %t = math.tanh %d : f32
        %u = arith.mulf %t, %c : f32
        flex.yield %u : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %dm = tensor.extract %doc[%m] : tensor<8xi64>
        %dn = tensor.extract %doc[%n] : tensor<8xi64>
        %same = arith.cmpi eq, %dm, %dn : i64
        %causal = arith.cmpi sge, %m, %n : index
        %keep = arith.andi %same, %causal : i1
        flex.yield %keep : i1
      } -> tensor<1x2x8x16xbf16>
  return %r : tensor<1x2x8x16xbf16>
}
