# RUN: %PYTHON %s | FileCheck %s
#
# By hand (repository root, venv active, PYTHONPATH=python):
#   python test/python/frontend/outline.py | FileCheck test/python/frontend/outline.py
#   (FileCheck: `python -c "from torch_mlir_flex.tools import find_tool; print(find_tool('FileCheck'))"`)

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch_mlir import fx, ir
from torch_mlir.dialects import torch as torch_d

from torch_mlir_flex.frontend import lower_to_linalg_with_flex_outlined


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * torch.tanh(score / 30.0)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


BM = create_block_mask(causal, 1, 1, 16, 16, device="cpu")


class CausalSoftcap(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=softcap, block_mask=BM)


q, k, v = (torch.randn(1, 4, 16, 8) for _ in range(3))
print(lower_to_linalg_with_flex_outlined(
    fx.export_and_import(CausalSoftcap(), q, k, v, output_type="raw")))

# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:.*]]: tensor<f32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<i32>) -> tensor<f32>
# CHECK:         %[[C30:.*]] = arith.constant 3.000000e+01 : f32
# CHECK:         %[[D:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<f32>)
# CHECK:           arith.divf %{{.*}}, %[[C30]] : f32
# CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[D]] : tensor<f32>)
# CHECK:           math.tanh
# CHECK:         %[[M:.*]] = linalg.generic {{.*}} ins(%[[T]] : tensor<f32>)
# CHECK:           arith.mulf %{{.*}}, %[[C30]] : f32
# CHECK:         return %[[M]] : tensor<f32>
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK-SAME:      %{{.*}}: tensor<i32>, %{{.*}}: tensor<i32>, %[[QI:.*]]: tensor<i32>, %[[KI:.*]]: tensor<i32>) -> tensor<i1>
# CHECK:         linalg.generic {{.*}} ins(%[[QI]], %[[KI]] : tensor<i32>, tensor<i32>)
# CHECK:           arith.cmpi sge
# CHECK-LABEL: func.func @main(
# CHECK-SAME:      %[[Q:.*]]: tensor<1x4x16x8xf32>, %[[K:.*]]: tensor<1x4x16x8xf32>, %[[V:.*]]: tensor<1x4x16x8xf32>)
# CHECK:         %[[R:.*]]:3 = call @__flex_attention_0(%[[Q]], %[[K]], %[[V]]) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
# CHECK:         return %[[R]]#0 : tensor<1x4x16x8xf32>
# CHECK:       func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
# CHECK-SAME:    attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}

# Form (b): our importer's torch.operator with one captured score buffer.
FORM_B = """
func.func private @bias_score(%s: !torch.vtensor<[],f32>, %b: !torch.vtensor<[],si32>, %h: !torch.vtensor<[],si32>, %m: !torch.vtensor<[],si32>, %n: !torch.vtensor<[],si32>, %bias: !torch.vtensor<[4],f32>) -> !torch.vtensor<[],f32> {
  %idx = torch.prim.ListConstruct %h : (!torch.vtensor<[],si32>) -> !torch.list<optional<vtensor>>
  %bh = torch.aten.index.Tensor %bias, %idx : !torch.vtensor<[4],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],f32>
  %int1 = torch.constant.int 1
  %0 = torch.aten.add.Tensor %s, %bh, %int1 : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}
func.func @main(%q: !torch.vtensor<[1,4,?,8],f32>, %k: !torch.vtensor<[1,2,?,8],f32>, %v: !torch.vtensor<[1,2,?,8],f32>, %bias: !torch.vtensor<[4],f32>) -> !torch.vtensor<[1,4,?,8],f32> {
  %scale = torch.constant.float 1.250000e-01
  %false = torch.constant.bool false
  %0:3 = torch.operator "torch_mlir_flex.hop_flex_attention"(%q, %k, %v, %scale, %false, %false, %bias) {score_mod_fn = @bias_score, enable_gqa, num_score_buffers = 1 : i64, num_mask_buffers = 0 : i64} : (!torch.vtensor<[1,4,?,8],f32>, !torch.vtensor<[1,2,?,8],f32>, !torch.vtensor<[1,2,?,8],f32>, !torch.float, !torch.bool, !torch.bool, !torch.vtensor<[4],f32>) -> (!torch.vtensor<[1,4,?,8],f32>, !torch.vtensor<[1,4,?],f32>, !torch.vtensor<[1,4,?],f32>)
  return %0#0 : !torch.vtensor<[1,4,?,8],f32>
}
"""
with ir.Context() as ctx:
    torch_d.register_dialect(ctx)
    print(lower_to_linalg_with_flex_outlined(ir.Module.parse(FORM_B)))

# CHECK-LABEL: func.func private @bias_score(
# CHECK-SAME:      %{{.*}}: tensor<f32>, %{{.*}}: tensor<i32>, %[[H:.*]]: tensor<i32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<i32>, %[[BIAS:.*]]: tensor<4xf32>) -> tensor<f32>
# CHECK:           arith.extsi %{{.*}} : i32 to i64
# CHECK:           tensor.extract %[[BIAS]][%{{.*}}] : tensor<4xf32>
# CHECK-LABEL: func.func @main(
# CHECK-SAME:      %[[Q:.*]]: tensor<1x4x?x8xf32>, %[[K:.*]]: tensor<1x2x?x8xf32>, %[[V:.*]]: tensor<1x2x?x8xf32>, %[[B:.*]]: tensor<4xf32>)
# CHECK:         %[[R:.*]]:3 = call @__flex_attention_0(%[[Q]], %[[K]], %[[V]], %[[B]]) : (tensor<1x4x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<4xf32>) -> (tensor<1x4x?x8xf32>, tensor<1x4x?xf32>, tensor<1x4x?xf32>)
# CHECK:       func.func private @__flex_attention_0(tensor<1x4x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<4xf32>)
# CHECK-SAME:    attributes {flex.enable_gqa, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 1.250000e-01 : f64, flex.score_mod = @bias_score}
# CHECK-NOT:   flex.mask_mod
