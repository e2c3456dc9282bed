// RUN: flex-opt %s -split-input-file --flex-amx-contractions -cse | FileCheck %s

// A marked contraction on memrefs (lhs [M, K] bf16, rhs [K/2, 2 N] bf16 in
// pairs, dest [M, N] f32) becomes AMX tile loops: 2 x 2 tiles of dest per
// step (M = 64, N = 32: 2 row steps, 1 column step), K = 64 as 2 unrolled
// steps of 2 lhs and 2 rhs tile loads and 4 tile_mulf; rhs tiles at pair
// row 16 s and pair column 2 n. The zero fill of dest right before is
// folded into tile_zero.

#lhs = affine_map<(d0, d1, d2) -> (d0, d1)>
#rhs = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
#dst = affine_map<(d0, d1, d2) -> (d0, d2)>

// CHECK-LABEL: func.func @zero_filled
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.generic
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c64 step %c32
// CHECK: scf.for %[[COL:.+]] = %{{.+}} to %c32 step %c32
// CHECK: %[[PC:.+]] = arith.muli %[[COL]], %c2
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: amx.tile_load %arg0[%[[ROW]], %c0{{.*}}] : memref<64x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %arg0[%{{.+}}, %c0{{.*}}] : memref<64x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %arg1[%c0{{.*}}, %[[PC]]] : memref<32x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %arg1[%c0{{.*}}, %{{.+}}] : memref<32x64xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-4: amx.tile_mulf {{.+}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// CHECK: amx.tile_load %arg0[%[[ROW]], %c32{{.*}}]
// CHECK: amx.tile_load %arg1[%c16{{.*}}, %[[PC]]]
// CHECK-COUNT-4: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store %arg2
// CHECK-NOT: amx.tile_mulf
// CHECK: return
func.func @zero_filled(%a: memref<64x64xbf16>, %b: memref<32x64xbf16>, %c: memref<64x32xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<64x32xf32>)
  linalg.generic {indexing_maps = [#lhs, #rhs, #dst], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<64x64xbf16>, memref<32x64xbf16>) outs(%c : memref<64x32xf32>) attrs = {flex.amx} {
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

// Accumulating into a strided view (dest loaded, stored back); an odd
// number of 16-row tiles (M = 48) goes one tile row per step. Unmarked
// contractions are left alone.

#lhs = affine_map<(d0, d1, d2) -> (d0, d1)>
#rhs = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
#dst = affine_map<(d0, d1, d2) -> (d0, d2)>

// CHECK-LABEL: func.func @accumulate
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c48 step %c16
// CHECK: scf.for %[[COL:.+]] = %{{.+}} to %c32 step %c32
// CHECK: amx.tile_load %arg2[%[[ROW]], %[[COL]]] : memref<48x32xf32, strided<[64, 1], offset: ?>> into !amx.tile<16x16xf32>
// CHECK: amx.tile_load %arg2[%[[ROW]], %{{.+}}] : memref<48x32xf32, strided<[64, 1], offset: ?>> into !amx.tile<16x16xf32>
// CHECK-COUNT-2: amx.tile_mulf
// CHECK-COUNT-2: amx.tile_store %arg2
// CHECK: linalg.generic
// CHECK-NOT: amx
// CHECK: return
func.func @accumulate(%a: memref<48x32xbf16>, %b: memref<16x64xbf16>, %c: memref<48x32xf32, strided<[64, 1], offset: ?>>) {
  linalg.generic {indexing_maps = [#lhs, #rhs, #dst], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<48x32xbf16>, memref<16x64xbf16>) outs(%c : memref<48x32xf32, strided<[64, 1], offset: ?>>) attrs = {flex.amx} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#lhs, #rhs, #dst], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<48x32xbf16>, memref<16x64xbf16>) outs(%c : memref<48x32xf32, strided<[64, 1], offset: ?>>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
