# RUN: %PYTHON %s | FileCheck %s
# BlockMask import: the mask meaning is carried by mask_mod only.  The dead
# block-mask computation (arange, vmap artifacts, sort.stable, index_put) must
# be gone whether the mask is built inside forward or outside (constants).

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.importer import export_and_import

torch.manual_seed(0)
B, H, S, D = 1, 2, 64, 16
WINDOW = 8


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= WINDOW)


OUTSIDE = create_block_mask(sliding_window, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)


class CausalInside(torch.nn.Module):
    def forward(self, q, k, v):
        bm = create_block_mask(causal, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, block_mask=bm)


class WindowOutside(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, block_mask=OUTSIDE)


class WindowInside(torch.nn.Module):
    def forward(self, q, k, v):
        bm = create_block_mask(sliding_window, B, H, S, S, device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, block_mask=bm)


def run(name, model, **kw):
    print(f"TEST: {name}")
    args = tuple(torch.randn(B, H, S, D) for _ in range(3))
    print(export_and_import(model, *args, **kw))


run("causal_inside", CausalInside())
run("window_outside", WindowOutside())
run("window_outside_import_program", WindowOutside(), experimental_support_mutation=True)
run("window_inside_torch_backend", WindowInside(), output_type="torch")

# CHECK-LABEL: TEST: causal_inside
# CHECK-LABEL: func.func @main(
# CHECK-NOT:     arange
# CHECK-NOT:     sort
# CHECK-NOT:     index_put
# CHECK-NOT:     torch.vtensor.literal
# CHECK:         %[[OUT:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_mod_fn = @sdpa_mask0, score_mod_fn = @sdpa_score0} : !torch.vtensor<[1,2,64,16],f32>, !torch.vtensor<[1,2,64,16],f32>, !torch.vtensor<[1,2,64,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[1,2,64,16],f32>, !torch.vtensor<[1,2,64],f32>, !torch.vtensor<[1,2,64],f32>
# CHECK-NEXT:    return %[[OUT]] : !torch.vtensor<[1,2,64,16],f32>
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK-SAME:      %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %[[QI:.*]]: !torch.vtensor<[],si32>, %[[KI:.*]]: !torch.vtensor<[],si32>) -> !torch.vtensor<[],i1>
# CHECK-NEXT:    %[[GE:.*]] = torch.aten.ge.Tensor %[[QI]], %[[KI]] : !torch.vtensor<[],si32>, !torch.vtensor<[],si32> -> !torch.vtensor<[],i1>
# CHECK-NEXT:    return %[[GE]] : !torch.vtensor<[],i1>

# CHECK-LABEL: TEST: window_outside
# CHECK-LABEL: func.func @main(
# CHECK-NOT:     torch.vtensor.literal
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_mod_fn = @sdpa_mask0, score_mod_fn = @sdpa_score0} :
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK-SAME:      %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %[[QI:.*]]: !torch.vtensor<[],si32>, %[[KI:.*]]: !torch.vtensor<[],si32>) -> !torch.vtensor<[],i1>
# CHECK:         %[[GE:.*]] = torch.aten.ge.Tensor %[[QI]], %[[KI]]
# CHECK:         %[[SUB:.*]] = torch.aten.sub.Tensor %[[QI]], %[[KI]], %{{.*}} : !torch.vtensor<[],si32>, !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],si32>
# CHECK:         %[[LE:.*]] = torch.aten.le.Scalar %[[SUB]], %{{.*}} : !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],i1>
# CHECK:         %[[AND:.*]] = torch.aten.bitwise_and.Tensor %[[GE]], %[[LE]] : !torch.vtensor<[],i1>, !torch.vtensor<[],i1> -> !torch.vtensor<[],i1>
# CHECK:         return %[[AND]] : !torch.vtensor<[],i1>

# import_program binds lifted constants eagerly; the unused ones are erased.
# CHECK-LABEL: TEST: window_outside_import_program
# CHECK-LABEL: func.func @main(
# CHECK-NOT:     torch.vtensor.literal
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_mod_fn = @sdpa_mask0, score_mod_fn = @sdpa_score0} :
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK:         torch.aten.le.Scalar

# After torchdynamo-export-to-torch-backend-pipeline nothing of the block
# mask survives either.
# CHECK-LABEL: TEST: window_inside_torch_backend
# CHECK-LABEL: func.func @main(
# CHECK-NOT:     sort
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_mod_fn = @sdpa_mask0, score_mod_fn = @sdpa_score0} :
# CHECK-NEXT:    return
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK:         torch.aten.bitwise_and.Tensor
