// flex-backward-to-flash's vector-bits: the five contractions of a block
// (S, dP, dV, dK, dQ) on the broadcast-FMA micro-kernel blocked for 32 zmm
// registers (512, the default) or 16 ymm (256, AVX2+FMA hosts).
// RUN: flex-opt %s -split-input-file -flex-backward-to-flash -canonicalize -cse | FileCheck %s --check-prefix=V512
// RUN: flex-opt %s -split-input-file -flex-backward-to-flash="vector-bits=256" -canonicalize -cse | FileCheck %s --check-prefix=V256
// RUN: not flex-opt %s -split-input-file -flex-backward-to-flash="vector-bits=256 bf16-dot=1" 2>&1 | FileCheck %s --check-prefix=ERR-DOT
// RUN: not flex-opt %s -split-input-file -flex-backward-to-flash="vector-bits=300" 2>&1 | FileCheck %s --check-prefix=ERR-BITS

// ERR-DOT: error: flex-backward-to-flash: vector-bits=256 (AVX2) excludes bf16-dot
// ERR-BITS: error: flex-backward-to-flash: vector-bits must be 256 or 512, got 300

// E = Ev = 64, 64 x 64 blocks.
// 512: K^T and V^T in 16 x 16 blocks; S and dP in chunks of 32 columns,
// 8 rows x 2 zmm; dV, dK, dQ one chunk of 64, 4 rows x 4 zmm.
// V512-LABEL: func.func @bwd
// V512: scf.for %{{.*}} = %c0 to %c64 step %c16 iter_args(%{{.*}}) -> (tensor<1x64x64xf32>)
// V512: scf.for %{{.*}} = %c0 to %c64 step %c32 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V512-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V512-NEXT: scf.for {{.*}} -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// V512: scf.for %{{.*}} = %c0 to %c64 step %c32 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V512-COUNT-3: -> (vector<64xf32>, vector<64xf32>, vector<64xf32>, vector<64xf32>)
// V512-NOT: vector<24xf32>
// V512: scf.forall.in_parallel
//
// 256: K^T and V^T in 8 x 8 blocks; every contraction in chunks of whole
// ymm registers, 64 -> 24 + 24 + 16, 4 rows per step in one-register
// pieces (4 x 3 and 4 x 2 vector<8xf32> accumulators).
// V256-LABEL: func.func @bwd
// V256: scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (tensor<1x64x64xf32>)
// V256-COUNT-8: vector.transfer_read {{.*}} vector<8xf32>
// S, dP (scaled S first):
// V256: scf.for %{{.*}} = %c0 to %c48 step %c24 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c4 iter_args(%{{.*}}) -> (tensor<64x64xf32>)
// V256-NEXT: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// dV, dK, dQ (accumulating):
// V256-COUNT-3: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// V256-NOT: vector<24xf32>
// V256-NOT: vector<32xf32>
// V256-NOT: vector<64xf32>
// V256: scf.forall.in_parallel
func.func @bwd(%q: tensor<1x2x64x64xf32>, %k: tensor<1x2x64x64xf32>, %v: tensor<1x2x64x64xf32>, %o: tensor<1x2x64x64xf32>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xf32>, %dq0: tensor<1x2x64x64xf32>, %dk0: tensor<1x2x64x64xf32>, %dv0: tensor<1x2x64x64xf32>) -> (tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64xf32>, tensor<1x2x64x64xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>)
      scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>
  return %dq, %dk, %dv : tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>
}
