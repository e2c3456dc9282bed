# RUN: %PYTHON %s | FileCheck %s
# BlockMask import (rule in importer/block_mask.py): a mask built inside
# forward by create_block_mask is carried by mask_mod only, and its dead
# computation (arange, vmap artifacts, sort.stable, index_put) must be gone;
# block tensors given to the graph (a BlockMask built outside forward) are
# kept as operands, as are the block tensors of a noop-mask BlockMask
# (from_kv_blocks(..., mask_mod=None)) computed inside forward.

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

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


# Top-k block selection: 2 of the 4 kv blocks of 16 per query block.
KVN = torch.full((1, 1, 4), 2, dtype=torch.int32)
KVI = torch.tensor([[[[3, 1, 0, 2], [0, 2, 1, 3], [1, 0, 2, 3], [2, 3, 0, 1]]]], dtype=torch.int32)
KV_BLOCKS = BlockMask.from_kv_blocks(KVN, KVI, BLOCK_SIZE=16, seq_lengths=(S, S))


class KvBlocksOutside(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, block_mask=KV_BLOCKS)


class TopkInside(torch.nn.Module):
    def forward(self, q, k, v):
        qp = q.reshape(B, H, 4, 16, D).mean(3)
        kp = k.reshape(B, H, 4, 16, D).mean(3)
        idx = (qp @ kp.transpose(-1, -2)).argsort(-1, descending=True).to(torch.int32)
        num = torch.full((B, H, 4), 2, dtype=torch.int32)
        bm = BlockMask.from_kv_blocks(num, idx.contiguous(), BLOCK_SIZE=16, seq_lengths=(S, S))
        return flex_attention(q, k, v, block_mask=bm)


class NoBlockMask(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v)


def run(name, model, **kw):
    print(f"TEST: {name}")
    args = tuple(torch.randn(B, H, S, D) for _ in range(3))
    print(export_and_import(model, *args, **kw))


run("causal_inside", CausalInside())
run("window_outside", WindowOutside())
run("window_outside_import_program", WindowOutside(), experimental_support_mutation=True)
run("window_inside_torch_backend", WindowInside(), output_type="torch")
run("kv_blocks_outside", KvBlocksOutside())
run("topk_inside", TopkInside())
run("no_block_mask", NoBlockMask())

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

# Built outside: the four kv block tensors are kept (constants), the q-side
# ones are dropped.
# CHECK-LABEL: TEST: window_outside
# CHECK-LABEL: func.func @main(
# CHECK:         %[[N:.+]] = torch.vtensor.literal({{.*}}) : !torch.vtensor<[1,1,4],si32>
# CHECK-NEXT:    %[[I:.+]] = torch.vtensor.literal({{.*}}) : !torch.vtensor<[1,1,4,4],si32>
# CHECK-NEXT:    %[[FN:.+]] = torch.vtensor.literal({{.*}}) : !torch.vtensor<[1,1,4],si32>
# CHECK-NEXT:    %[[FI:.+]] = torch.vtensor.literal({{.*}}) : !torch.vtensor<[1,1,4,4],si32>
# CHECK-NEXT:    torch.operator "torch_mlir_flex.hop_flex_attention"(%arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}}, %[[N]], %[[I]], %[[FN]], %[[FI]]) {kv_block_size = 16 : i64, mask_mod_fn = @sdpa_mask0, num_block_tensors = 4 : i64, num_mask_buffers = 0 : i64, num_score_buffers = 0 : i64, q_block_size = 16 : i64, score_mod_fn = @sdpa_score0}
# CHECK-NOT:     torch.vtensor.literal
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK-SAME:      %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %[[QI:.*]]: !torch.vtensor<[],si32>, %[[KI:.*]]: !torch.vtensor<[],si32>) -> !torch.vtensor<[],i1>
# CHECK:         %[[GE:.*]] = torch.aten.ge.Tensor %[[QI]], %[[KI]]
# CHECK:         %[[SUB:.*]] = torch.aten.sub.Tensor %[[QI]], %[[KI]], %{{.*}} : !torch.vtensor<[],si32>, !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],si32>
# CHECK:         %[[LE:.*]] = torch.aten.le.Scalar %[[SUB]], %{{.*}} : !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],i1>
# CHECK:         %[[AND:.*]] = torch.aten.bitwise_and.Tensor %[[GE]], %[[LE]] : !torch.vtensor<[],i1>, !torch.vtensor<[],i1> -> !torch.vtensor<[],i1>
# CHECK:         return %[[AND]] : !torch.vtensor<[],i1>

# import_program binds lifted constants eagerly; the unused (q-side) ones are
# erased.
# CHECK-LABEL: TEST: window_outside_import_program
# CHECK-LABEL: func.func @main(
# CHECK-COUNT-4: torch.vtensor.literal
# CHECK-NOT:     torch.vtensor.literal
# CHECK:         torch.operator "torch_mlir_flex.hop_flex_attention"({{.*}}) {kv_block_size = 16 : i64, mask_mod_fn = @sdpa_mask0, num_block_tensors = 4 : i64,
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

# from_kv_blocks(mask_mod=None) outside forward: the block tensors are the
# only meaning of the mask; no mask_mod_fn.
# CHECK-LABEL: TEST: kv_blocks_outside
# CHECK-LABEL: func.func @main(
# CHECK:         %[[N:.+]] = torch.vtensor.literal({{.*}}) : !torch.vtensor<[1,1,4],si32>
# CHECK-NEXT:    %[[I:.+]] = torch.vtensor.literal({{.*}}) : !torch.vtensor<[1,1,4,4],si32>
# CHECK-NEXT:    torch.operator "torch_mlir_flex.hop_flex_attention"(%arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}}, %[[N]], %[[I]]) {kv_block_size = 16 : i64, num_block_tensors = 2 : i64, num_mask_buffers = 0 : i64, num_score_buffers = 0 : i64, q_block_size = 16 : i64, score_mod_fn = @sdpa_score0}
# CHECK-NOT:     sdpa_mask

# Computed inside forward with a noop mask_mod: kept (their computation
# too); the q-side (transposed) computation is erased.
# CHECK-LABEL: TEST: topk_inside
# CHECK-LABEL: func.func @main(
# CHECK:         %[[IDX:.+]] = torch.aten.sort
# CHECK-NOT:     torch.aten.sort
# CHECK:         torch.operator "torch_mlir_flex.hop_flex_attention"(%arg0, %arg1, %arg2, {{.*}}) {kv_block_size = 16 : i64, num_block_tensors = 2 : i64,
# CHECK-NOT:     sdpa_mask

# block_mask=None: torch's dense block mask (block size 1 << 30) is dropped.
# CHECK-LABEL: TEST: no_block_mask
# CHECK-LABEL: func.func @main(
# CHECK-NOT:     torch.vtensor.literal
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} :
