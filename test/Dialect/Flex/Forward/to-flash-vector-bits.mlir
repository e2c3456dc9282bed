// flex-to-flash's vector-bits: the micro-kernels block for 32 zmm registers
// of 16 f32 lanes (512, the default) or 16 ymm registers of 8 lanes (256,
// AVX2+FMA hosts), where the 512-bit blocking would need twice the
// registers there are.
// RUN: flex-opt %s -split-input-file -flex-to-flash -canonicalize -cse | FileCheck %s --check-prefix=V512
// RUN: flex-opt %s -split-input-file -flex-to-flash="vector-bits=256" -canonicalize -cse | FileCheck %s --check-prefix=V256
// RUN: not flex-opt %s -split-input-file -flex-to-flash="vector-bits=256 bf16-dot=1" 2>&1 | FileCheck %s --check-prefix=ERR-DOT
// RUN: not flex-opt %s -split-input-file -flex-to-flash="vector-bits=256 amx=1" 2>&1 | FileCheck %s --check-prefix=ERR-AMX
// RUN: not flex-opt %s -split-input-file -flex-to-flash="vector-bits=128" 2>&1 | FileCheck %s --check-prefix=ERR-BITS

// ERR-DOT: error: flex-to-flash: vector-bits=256 (AVX2) excludes bf16-dot
// ERR-AMX: error: flex-to-flash: vector-bits=256 (AVX2) excludes amx
// ERR-BITS: error: flex-to-flash: vector-bits must be 256 or 512, got 128

// Causal, E = Ev = 64, 64 x 64 tiles.
// 512: K^T in 16 x 16 blocks; Q.K^T in two chunks of 32 columns, 8 rows x
// 2 zmm (vector<32xf32>) per step; P.V one chunk of 64, 4 rows x 4 zmm.
// V512-LABEL: func.func @causal
// V512: scf.for %{{.*}} = %c0 to %c128 step %c16 iter_args(%{{.*}}) -> (tensor<2x64x64xf32>)
// V512-COUNT-16: vector.transfer_read {{.*}} : tensor<128x64xf32>, vector<16xf32>
// V512: scf.for %[[COL:.*]] = %c0 to %c64 step %c32 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V512-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V512-NEXT: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// V512: vector.fma {{.*}} : vector<32xf32>
// V512: scf.for {{.*}} = %c0 to %c64 step %c4 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V512: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<64xf32>, vector<64xf32>, vector<64xf32>, vector<64xf32>)
// V512: vector.fma {{.*}} : vector<64xf32>
// V512-NOT: vector<24xf32>
// V512: scf.forall.in_parallel
//
// 256: K^T in 8 x 8 blocks; both contractions in chunks of whole ymm
// registers, 64 -> 24 + 24 (one kernel in a loop over the column offset)
// + 16, each 4 rows per step carried as one-register pieces
// (vector<8xf32>): 4 x 3 ymm (12 accumulators), then 4 x 2.
// V256-LABEL: func.func @causal
// V256: scf.for %{{.*}} = %c0 to %c128 step %c8 iter_args(%{{.*}}) -> (tensor<2x64x64xf32>)
// V256-NEXT: arith.divui
// V256-NEXT: arith.remui
// V256-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (tensor<2x64x64xf32>)
// V256-COUNT-8: vector.transfer_read {{.*}} : tensor<128x64xf32>, vector<8xf32>
// V256-NOT: vector.transfer_read {{.*}} : tensor<128x64xf32>, vector<8xf32>
// V256: vector.from_elements
// Q.K^T (scaled as it is written):
// V256: scf.for %[[COL:.*]] = %c0 to %c48 step %c24 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c4 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256-NEXT: scf.for %[[K:.*]] = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256-NEXT: vector.transfer_read {{.*}}[%[[K]], %[[COL]]], {{.*}} : tensor<64x64xf32>, vector<8xf32>
// V256-COUNT-12: vector.fma {{.*}} : vector<8xf32>
// V256: arith.mulf {{.*}} : vector<8xf32>
// V256: scf.for %{{.*}} = %c0 to %c64 step %c4 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256-NEXT: scf.for %[[K2:.*]] = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256-NEXT: vector.transfer_read {{.*}}[%[[K2]], %c48], {{.*}} : tensor<64x64xf32>, vector<8xf32>
// V256-NEXT: vector.transfer_read {{.*}}[%[[K2]], %c56], {{.*}} : tensor<64x64xf32>, vector<8xf32>
// V256-COUNT-8: vector.fma {{.*}} : vector<8xf32>
// P.V (acc * corr as the initial accumulators):
// V256: scf.for %{{.*}} = %c0 to %c48 step %c24 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c4 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256-COUNT-12: vector.fma {{.*}} : vector<8xf32>
// V256: scf.for {{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256-NOT: vector<24xf32>
// V256-NOT: vector<32xf32>
// V256: scf.forall.in_parallel
func.func @causal(%q: tensor<1x2x128x64xf32>, %k: tensor<1x2x128x64xf32>, %v: tensor<1x2x128x64xf32>) -> tensor<1x2x128x64xf32> {
  %o = tensor.empty() : tensor<1x2x128x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32>)
      outs(%o : tensor<1x2x128x64xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x128x64xf32>
  return %r : tensor<1x2x128x64xf32>
}

// -----

// Decode (one query row, K read as rows): the key-row dots take 16 keys
// per step folded in 16-lane vectors (512) or 8 keys in 8-lane vectors,
// three shuffle levels (256); P.V's single row is carried as one-register
// pieces: 4 x vector<16xf32> or 8 x vector<8xf32>.
// V512-LABEL: func.func @decode
// V512: scf.for %{{.*}} = %c0 to %c128 step %c16 iter_args(%{{.*}}) -> (tensor<1x128xf32>)
// V512: vector.fma {{.*}} : vector<16xf32>
// V512: vector.shuffle {{.*}} : vector<16xf32>, vector<16xf32>
// V512: vector.transfer_write {{.*}} : vector<16xf32>, tensor<1x128xf32>
// V512: scf.for {{.*}} = %c0 to %c128 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// V256-LABEL: func.func @decode
// V256: scf.for %{{.*}} = %c0 to %c128 step %c8 iter_args(%{{.*}}) -> (tensor<1x128xf32>)
// V256: vector.fma {{.*}} : vector<8xf32>
// V256: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
// V256: vector.shuffle {{.*}} [0, 1, 4, 5, 8, 9, 12, 13] : vector<8xf32>, vector<8xf32>
// V256: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14] : vector<8xf32>, vector<8xf32>
// V256: vector.transfer_write {{.*}} : vector<8xf32>, tensor<1x128xf32>
// V256: scf.for {{.*}} = %c0 to %c128 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256-COUNT-8: vector.fma {{.*}} : vector<8xf32>
// V256-NOT: vector<16xf32>
// V256: return
func.func @decode(%q: tensor<1x2x1x64xf32>, %k: tensor<1x2x256x64xf32>, %v: tensor<1x2x256x64xf32>) -> tensor<1x2x1x64xf32> {
  %o = tensor.empty() : tensor<1x2x1x64xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x1x64xf32>, tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>)
      outs(%o : tensor<1x2x1x64xf32>) scale(0.125) -> tensor<1x2x1x64xf32>
  return %r : tensor<1x2x1x64xf32>
}
