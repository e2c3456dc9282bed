// RUN: flex-opt %s -split-input-file -flex-decompose-attention-tile -verify-diagnostics

// Only row tiles (query [1, 1, M, E]) decompose into key blocks.
func.func @not_a_row_tile(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{expected a row tile with query [1, 1, M, E], M <= tile-m = 16 (tile B, Hq and M first), got 'tensor<1x2x16x8xf32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

func.func @dynamic_rows(%q: tensor<1x1x?x8xf32>, %k: tensor<1x1x16x8xf32>, %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x?x8xf32>) -> tensor<1x1x?x8xf32> {
  // expected-error @+1 {{flex-decompose-attention-tile: the row tile has a dynamic M; set tile-m to its upper bound}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x?x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x?x8xf32>) scale(0.125) -> tensor<1x1x?x8xf32>
  return %r : tensor<1x1x?x8xf32>
}

// -----

func.func @dynamic_head_dim(%q: tensor<1x1x4x?xf32>, %k: tensor<1x1x16x?xf32>, %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  // expected-error @+1 {{cannot decompose into key blocks: dynamic head dimension E/Ev}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x4x?xf32>, tensor<1x1x16x?xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x4x8xf32>) scale(0.125) -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}
