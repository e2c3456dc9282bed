# RUN: %PYTHON %s | FileCheck %s
# Call options: GQA (enable_gqa attr), return_lse (OUTPUT_LOGSUMEXP), a
# non-default scale, and dynamic batch / sequence dims (symbolic sizes).

import torch
from torch.export import Dim
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex.importer import export_and_import

torch.manual_seed(0)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class Gqa(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, enable_gqa=True)


class Lse(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, return_lse=True, scale=0.125)


class Dyn(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + (qi - ki))


print("TEST: gqa")
print(export_and_import(Gqa(), torch.randn(1, 4, 16, 16), torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16)))
print("TEST: lse_scale")
print(export_and_import(Lse(), *(torch.randn(2, 2, 16, 16) for _ in range(3))))
print("TEST: dynamic")
BATCH, SEQ = Dim("batch", min=1, max=8), Dim("seq", min=2, max=4096)
dyn = {0: BATCH, 2: SEQ}
print(export_and_import(Dyn(), *(torch.randn(2, 2, 32, 16) for _ in range(3)), dynamic_shapes=(dyn, dyn, dyn)))

# CHECK-LABEL: TEST: gqa
# CHECK-LABEL: func.func @main(
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {enable_gqa = true, score_mod_fn = @sdpa_score0} : !torch.vtensor<[1,4,16,16],f32>, !torch.vtensor<[1,2,16,16],f32>, !torch.vtensor<[1,2,16,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[1,4,16,16],f32>, !torch.vtensor<[1,4,16],f32>, !torch.vtensor<[1,4,16],f32>
# CHECK-LABEL: func.func private @sdpa_score0(

# lse is returned in log2 units by the HOP; the graph's own ln2 rescale follows.
# CHECK-LABEL: TEST: lse_scale
# CHECK-LABEL: func.func @main(
# CHECK-DAG:     %[[SCALE:.*]] = torch.constant.float 1.250000e-01
# CHECK-DAG:     %[[TRUE:.*]] = torch.constant.bool true
# CHECK-DAG:     %[[FALSE:.*]] = torch.constant.bool false
# CHECK:         %[[OUT:.*]], %[[LSE:.*]], %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %[[SCALE]], %[[TRUE]], %[[FALSE]] {score_mod_fn = @sdpa_score0} : !torch.vtensor<[2,2,16,16],f32>, !torch.vtensor<[2,2,16,16],f32>, !torch.vtensor<[2,2,16,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[2,2,16,16],f32>, !torch.vtensor<[2,2,16],f32>, !torch.vtensor<[2,2,16],f32>
# CHECK:         %[[LN2:.*]] = torch.aten.mul.Scalar %[[LSE]], %{{.*}} : !torch.vtensor<[2,2,16],f32>, !torch.float -> !torch.vtensor<[2,2,16],f32>
# CHECK:         return %[[OUT]], %[[LN2]]
# CHECK-LABEL: func.func private @sdpa_score0(

# CHECK-LABEL: TEST: dynamic
# CHECK-LABEL: func.func @main(
# CHECK-SAME:      !torch.vtensor<[?,2,?,16],f32>
# CHECK:         %[[OUT:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} : !torch.vtensor<[?,2,?,16],f32>, !torch.vtensor<[?,2,?,16],f32>, !torch.vtensor<[?,2,?,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[?,2,?,16],f32>, !torch.vtensor<[?,2,?],f32>, !torch.vtensor<[?,2,?],f32>
# CHECK:         return %[[OUT]] : !torch.vtensor<[?,2,?,16],f32>
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:[^:]*]]: !torch.vtensor<[],f32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %[[QI:[^:]*]]: !torch.vtensor<[],si32>, %[[KI:[^:]*]]: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32>
# CHECK:         %[[D:.*]] = torch.aten.sub.Tensor %[[QI]], %[[KI]]
# CHECK:         %[[A:.*]] = torch.aten.add.Tensor %[[S]], %[[D]]
# CHECK:         return %[[A]]
