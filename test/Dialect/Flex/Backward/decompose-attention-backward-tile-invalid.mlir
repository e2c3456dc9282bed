// RUN: flex-opt %s -split-input-file --flex-decompose-attention-backward-tile -verify-diagnostics

// Not a (b, hkv) tile: two kv heads.
func.func @two_kv_heads(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %lse: tensor<1x2x16xf32>, %do: tensor<1x2x16x8xf32>, %dq0: tensor<1x2x16x8xf32>, %dk0: tensor<1x2x16x8xf32>, %dv0: tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected a tile with one kv head}}
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      scale(0.353553385)
      -> tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
  return %dq, %dk, %dv : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
}

// -----

// Dynamic head dimension: left to flex-to-loops by the driver, an error here.
func.func @dynamic_e(%q: tensor<1x1x16x?xf32>, %k: tensor<1x1x16x?xf32>, %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>, %lse: tensor<1x1x16xf32>, %do: tensor<1x1x16x8xf32>, %dq0: tensor<1x1x16x?xf32>, %dk0: tensor<1x1x16x?xf32>, %dv0: tensor<1x1x16x8xf32>) -> (tensor<1x1x16x?xf32>, tensor<1x1x16x?xf32>, tensor<1x1x16x8xf32>) {
  // expected-error @+1 {{cannot decompose into key blocks: dynamic head dimension E/Ev}}
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x1x16x?xf32>, tensor<1x1x16x?xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16xf32>, tensor<1x1x16x8xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x1x16x?xf32>, tensor<1x1x16x?xf32>, tensor<1x1x16x8xf32>)
      scale(0.353553385)
      -> tensor<1x1x16x?xf32>, tensor<1x1x16x?xf32>, tensor<1x1x16x8xf32>
  return %dq, %dk, %dv : tensor<1x1x16x?xf32>, tensor<1x1x16x?xf32>, tensor<1x1x16x8xf32>
}
