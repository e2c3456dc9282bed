// RUN: flex-opt %s -split-input-file --flex-amx-contractions -verify-diagnostics

// A marked contraction whose reduction (K = 16) is not a whole AMX tile.
#lhs = affine_map<(d0, d1, d2) -> (d0, d1)>
#rhs = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
#dst = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @short_reduction(%a: memref<16x16xbf16>, %b: memref<8x32xbf16>, %c: memref<16x16xf32>) {
  // expected-error @+1 {{marked flex.amx but cannot run on AMX tiles: expected M, N multiples of 16 and K of 32}}
  linalg.generic {indexing_maps = [#lhs, #rhs, #dst], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<16x16xbf16>, memref<8x32xbf16>) outs(%c : memref<16x16xf32>) attrs = {flex.amx} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Marked, but on tensors (before bufferization).
#lhs = affine_map<(d0, d1, d2) -> (d0, d1)>
#rhs = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
#dst = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @tensors(%a: tensor<16x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<16x16xf32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{expected a linalg.generic on memrefs}}
  %r = linalg.generic {indexing_maps = [#lhs, #rhs, #dst], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : tensor<16x32xbf16>, tensor<16x32xbf16>) outs(%c : tensor<16x16xf32>) attrs = {flex.amx} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// Marked, but with transposed lhs maps.
#lhsT = affine_map<(d0, d1, d2) -> (d1, d0)>
#rhs = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
#dst = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @maps(%a: memref<32x16xbf16>, %b: memref<16x32xbf16>, %c: memref<16x16xf32>) {
  // expected-error @+1 {{expected lhs [M, K], rhs [K/2, 2 N], dest [M, N]}}
  linalg.generic {indexing_maps = [#lhsT, #rhs, #dst], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x16xbf16>, memref<16x32xbf16>) outs(%c : memref<16x16xf32>) attrs = {flex.amx} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
