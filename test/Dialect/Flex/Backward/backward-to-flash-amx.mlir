// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=32 tile-n=32 amx=1" | FileCheck %s
// RUN: flex-opt %s -split-input-file --flex-backward-to-flash="tile-m=32 tile-n=32" | FileCheck %s --check-prefix=NOAMX

// amx: the bf16 pair layouts of bf16-dot (K^T, V^T in pairs of E per key
// block, K rows in pairs of keys), per tile Q^T and dO^T ([E|Ev, Mp], 16 x 16
// vector transposes) and dK_j, dV_j kept transposed ([E|Ev, Nt]). A live
// pair's five contractions are linalg.generic ops marked flex.amx (lhs bf16
// row-major at (m, k), rhs pair-packed at (k floordiv 2, 2 n + k mod 2)),
// lowered to AMX tiles by flex-amx-contractions after bufferization:
// S = Q.K^T unscaled (the score tile scales it), dP = dO.V^T; P and dS
// packed in pairs of query rows (rounded) for dV^T += dO^T.P and
// dK^T += Q^T.dS; dS rounded for dQ += dS.K. Key block end: grad_key /
// grad_value rows += the transposed accumulators.
// CHECK-DAG: #[[$LHS:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$PAIRS:.+]] = affine_map<(d0, d1, d2) -> (d1 floordiv 2, d2 * 2 + d1 mod 2)>
// CHECK-DAG: #[[$DST:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$TR:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @bf16_amx
// CHECK: %[[KP:.+]] = scf.forall ({{.+}}) in (1, 1) shared_outs({{.+}}) -> (tensor<1x1x64x64xbf16>)
// CHECK: %[[KR:.+]] = scf.forall ({{.+}}) in (1, 1) shared_outs({{.+}}) -> (tensor<1x1x32x128xbf16>)
// CHECK: %[[VP:.+]] = scf.forall ({{.+}}) in (1, 1) shared_outs({{.+}}) -> (tensor<1x1x32x64xbf16>)
// CHECK: scf.forall
// Q^T, dO^T.
// CHECK: bufferization.alloc_tensor() : tensor<1x1x64x64xbf16>
// CHECK: vector.transpose {{.+}} : vector<16x16xbf16> to vector<16x16xbf16>
// CHECK: bufferization.alloc_tensor() : tensor<1x1x32x64xbf16>
// CHECK: vector.transpose {{.+}} : vector<16x16xbf16> to vector<16x16xbf16>
// Transposed dK_j [E, Nt], dV_j [Ev, Nt].
// CHECK: linalg.fill {{.+}} -> tensor<64x32xf32>
// CHECK: linalg.fill {{.+}} -> tensor<32x32xf32>
// CHECK: scf.if
// S, dP.
// CHECK: linalg.fill {{.+}} -> tensor<32x32xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$LHS]], #[[$PAIRS]], #[[$DST]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<32x64xbf16>, tensor<32x64xbf16>) outs(%{{.+}} : tensor<32x32xf32>) attrs = {flex.amx}
// CHECK: linalg.fill {{.+}} -> tensor<32x32xf32>
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<32x32xbf16>, tensor<16x64xbf16>) outs(%{{.+}} : tensor<32x32xf32>) attrs = {flex.amx}
// The score tile scales S first.
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[S:[^:]+]]: f32
// CHECK-NEXT: arith.mulf %[[S]], %{{.+}} : f32
// P and dS in pairs of query rows, dS rounded.
// CHECK: vector.interleave {{.+}} : vector<32xbf16> -> vector<64xbf16>
// CHECK: vector.interleave {{.+}} : vector<32xbf16> -> vector<64xbf16>
// CHECK: arith.truncf {{.+}} : vector<32xf32> to vector<32xbf16>
// dV^T += dO^T.P, dK^T += Q^T.dS, dQ += dS.K.
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<32x32xbf16>, tensor<16x64xbf16>) outs(%{{.+}} : tensor<32x32xf32>) attrs = {flex.amx}
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<64x32xbf16>, tensor<16x64xbf16>) outs(%{{.+}} : tensor<64x32xf32>) attrs = {flex.amx}
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<32x32xbf16>, tensor<16x128xbf16>) outs(%{{.+}} : tensor<32x64xf32>) attrs = {flex.amx}
// CHECK-NOT: vector.fma
// CHECK-NOT: x86vector
// Key block end: rows of grad_key, grad_value += columns of dK_j^T, dV_j^T.
// CHECK: linalg.generic {indexing_maps = [#[[$TR]], {{.+}} ins(%{{.+}}, %{{.+}} : tensor<64x32xf32>, tensor<32x64xbf16>)
// CHECK: linalg.generic {indexing_maps = [#[[$TR]], {{.+}} ins(%{{.+}}, %{{.+}} : tensor<32x32xf32>, tensor<32x32xbf16>)
// CHECK: return
// NOAMX-LABEL: func.func @bf16_amx
// NOAMX-NOT: flex.amx
// NOAMX: vector.fma
// NOAMX-NOT: flex.amx
// NOAMX: return
func.func @bf16_amx(%q: tensor<1x1x64x64xbf16>, %k: tensor<1x1x64x64xbf16>, %v: tensor<1x1x64x32xbf16>, %o: tensor<1x1x64x32xbf16>, %lse: tensor<1x1x64xf32>, %do: tensor<1x1x64x32xbf16>, %dq0: tensor<1x1x64x64xbf16>, %dk0: tensor<1x1x64x64xbf16>, %dv0: tensor<1x1x64x32xbf16>) -> (tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>, tensor<1x1x64x32xbf16>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>, tensor<1x1x64x32xbf16>, tensor<1x1x64x32xbf16>, tensor<1x1x64xf32>, tensor<1x1x64x32xbf16>)
      outs(%dq0, %dk0, %dv0 : tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>, tensor<1x1x64x32xbf16>)
      scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>, tensor<1x1x64x32xbf16>
  return %dq, %dk, %dv : tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>, tensor<1x1x64x32xbf16>
}

// -----

// amx needs E, Ev and the tiles in multiples of 32 (here E = 48): the FMA
// kernels.
// CHECK-LABEL: func.func @bf16_amx_unfit
// CHECK-NOT: flex.amx
// CHECK: vector.fma
// CHECK-NOT: flex.amx
// CHECK: return
func.func @bf16_amx_unfit(%q: tensor<1x1x64x48xbf16>, %k: tensor<1x1x64x48xbf16>, %v: tensor<1x1x64x32xbf16>, %o: tensor<1x1x64x32xbf16>, %lse: tensor<1x1x64xf32>, %do: tensor<1x1x64x32xbf16>, %dq0: tensor<1x1x64x48xbf16>, %dk0: tensor<1x1x64x48xbf16>, %dv0: tensor<1x1x64x32xbf16>) -> (tensor<1x1x64x48xbf16>, tensor<1x1x64x48xbf16>, tensor<1x1x64x32xbf16>) {
  %dq, %dk, %dv = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x1x64x48xbf16>, tensor<1x1x64x48xbf16>, tensor<1x1x64x32xbf16>, tensor<1x1x64x32xbf16>, tensor<1x1x64xf32>, tensor<1x1x64x32xbf16>)
      outs(%dq0, %dk0, %dv0 : tensor<1x1x64x48xbf16>, tensor<1x1x64x48xbf16>, tensor<1x1x64x32xbf16>)
      scale(0.125)
      -> tensor<1x1x64x48xbf16>, tensor<1x1x64x48xbf16>, tensor<1x1x64x32xbf16>
  return %dq, %dk, %dv : tensor<1x1x64x48xbf16>, tensor<1x1x64x48xbf16>, tensor<1x1x64x32xbf16>
}
