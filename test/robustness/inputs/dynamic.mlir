// Seed input for the robustness fuzzer: dynamic B / M / N, f16.
func.func @main(%q: tensor<?x4x?x8xf16>, %k: tensor<?x4x?x8xf16>, %v: tensor<?x4x?x8xf16>, %o: tensor<?x4x?x8xf16>) -> tensor<?x4x?x8xf16> {
  %r = flex.attention ins(%q, %k, %v : tensor<?x4x?x8xf16>, tensor<?x4x?x8xf16>, tensor<?x4x?x8xf16>)
      outs(%o : tensor<?x4x?x8xf16>) scale(0.35)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c2 = arith.constant 2 : index
        %d = arith.subi %m, %n : index
        %r0 = arith.remsi %d, %c2 : index
        %c0 = arith.constant 0 : index
        %keep = arith.cmpi eq, %r0, %c0 : index
        flex.yield %keep : i1
      } -> tensor<?x4x?x8xf16>
  return %r : tensor<?x4x?x8xf16>
}
