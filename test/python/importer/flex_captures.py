# RUN: %PYTHON %s | FileCheck %s
# Captured tensors (score_mod_other_buffers / mask_mod_other_buffers):
# constants (buffers, parameters) become literals inside the modifier and the
# upstream 6-operand torch.hop_flex_attention is kept; runtime tensors (graph
# inputs) become trailing operands of torch.operator
# "torch_mlir_flex.hop_flex_attention" and trailing modifier arguments.

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.importer import export_and_import

torch.manual_seed(0)
B, H, S, D = 1, 4, 32, 16


class Alibi(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", torch.exp2(-torch.arange(1, H + 1).float()))

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        return flex_attention(q, k, v, score_mod=alibi)


class DocMask(torch.nn.Module):
    def forward(self, q, k, v, doc):
        def same_doc(b, h, q_idx, kv_idx):
            return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)

        bm = create_block_mask(same_doc, 1, 1, S, S, device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


class BiasAndDoc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale_h = torch.nn.Parameter(torch.randn(H))

    def forward(self, q, k, v, bias, doc):
        def score_mod(score, b, h, q_idx, kv_idx):
            return score * self.scale_h[h] + bias[h]

        def mask_mod(b, h, q_idx, kv_idx):
            return doc[q_idx] == doc[kv_idx]

        bm = create_block_mask(mask_mod, 1, 1, S, S, device="cpu")
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=bm)


def qkv():
    return tuple(torch.randn(B, H, S, D) for _ in range(3))


doc = torch.arange(S) // 8  # 4 documents of 8 tokens
print("TEST: alibi_buffer")
print(export_and_import(Alibi(), *qkv()))
print("TEST: doc_mask_runtime")
print(export_and_import(DocMask(), *qkv(), doc))
print("TEST: bias_and_doc_runtime")
print(export_and_import(BiasAndDoc(), *qkv(), torch.randn(H), doc))

# Constant buffer: upstream op, modifier arity 5, slopes materialized inside.
# CHECK-LABEL: TEST: alibi_buffer
# CHECK-LABEL: func.func @main(
# CHECK:         %[[OUT:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} : !torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32],f32>, !torch.vtensor<[1,4,32],f32>
# CHECK-NEXT:    return %[[OUT]]
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:[^:]*]]: !torch.vtensor<[],f32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %[[H:[^:]*]]: !torch.vtensor<[],si32>, %[[QI:[^:]*]]: !torch.vtensor<[],si32>, %[[KI:[^:]*]]: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32> {
# CHECK:         %[[SL:.*]] = torch.vtensor.literal(dense_resource<{{.*}}> : tensor<4xf32>) : !torch.vtensor<[4],f32>
# CHECK:         %[[IDX:.*]] = torch.prim.ListConstruct %[[H]] : (!torch.vtensor<[],si32>) -> !torch.list<optional<vtensor>>
# CHECK:         %[[SH:.*]] = torch.aten.index.Tensor %[[SL]], %[[IDX]] : !torch.vtensor<[4],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],f32>
# CHECK:         %[[D:.*]] = torch.aten.sub.Tensor %[[KI]], %[[QI]], %{{.*}} : !torch.vtensor<[],si32>, !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],si32>
# CHECK:         %[[M:.*]] = torch.aten.mul.Tensor %[[SH]], %[[D]] : !torch.vtensor<[],f32>, !torch.vtensor<[],si32> -> !torch.vtensor<[],f32>
# CHECK:         %[[A:.*]] = torch.aten.add.Tensor %[[S]], %[[M]], %{{.*}} : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[],f32>
# CHECK:         return %[[A]] : !torch.vtensor<[],f32>

# Runtime document ids: torch.operator form, one mask buffer.
# CHECK-LABEL: TEST: doc_mask_runtime
# CHECK-LABEL: func.func @main(
# CHECK-SAME:      %[[Q:[^:]*]]: !torch.vtensor<[1,4,32,16],f32>, %[[K:[^:]*]]: !torch.vtensor<[1,4,32,16],f32>, %[[V:[^:]*]]: !torch.vtensor<[1,4,32,16],f32>, %[[DOC:[^:]*]]: !torch.vtensor<[32],si64>)
# CHECK-NOT:     sort
# CHECK:         %[[R:.*]]:3 = torch.operator "torch_mlir_flex.hop_flex_attention"(%[[Q]], %[[K]], %[[V]], %{{.*}}, %{{.*}}, %{{.*}}, %[[DOC]]) {mask_mod_fn = @sdpa_mask0, num_mask_buffers = 1 : i64, num_score_buffers = 0 : i64, score_mod_fn = @sdpa_score0} : (!torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32,16],f32>, !torch.float, !torch.bool, !torch.bool, !torch.vtensor<[32],si64>) -> (!torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32],f32>, !torch.vtensor<[1,4,32],f32>)
# CHECK-NEXT:    return %[[R]]#0
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      -> !torch.vtensor<[],f32>
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK-SAME:      %{{[^:]*}}: !torch.vtensor<[],si32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %[[QI:[^:]*]]: !torch.vtensor<[],si32>, %[[KI:[^:]*]]: !torch.vtensor<[],si32>, %[[D:[^:]*]]: !torch.vtensor<[32],si64>) -> !torch.vtensor<[],i1> {
# CHECK:         %[[L0:.*]] = torch.prim.ListConstruct %[[QI]]
# CHECK:         %[[DQ:.*]] = torch.aten.index.Tensor %[[D]], %[[L0]] : !torch.vtensor<[32],si64>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],si64>
# CHECK:         %[[L1:.*]] = torch.prim.ListConstruct %[[KI]]
# CHECK:         %[[DK:.*]] = torch.aten.index.Tensor %[[D]], %[[L1]] : !torch.vtensor<[32],si64>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],si64>
# CHECK:         %[[EQ:.*]] = torch.aten.eq.Tensor %[[DQ]], %[[DK]]
# CHECK:         %[[GE:.*]] = torch.aten.ge.Tensor %[[QI]], %[[KI]]
# CHECK:         %[[AND:.*]] = torch.aten.bitwise_and.Tensor %[[EQ]], %[[GE]]
# CHECK:         return %[[AND]] : !torch.vtensor<[],i1>

# Parameter (constant, literal) + runtime bias in score_mod, runtime doc ids in
# mask_mod: operands are score buffers then mask buffers.
# CHECK-LABEL: TEST: bias_and_doc_runtime
# CHECK-LABEL: func.func @main(
# CHECK-SAME:      %[[BIAS:[^:]*]]: !torch.vtensor<[4],f32>, %[[DOC:[^:]*]]: !torch.vtensor<[32],si64>)
# CHECK:         torch.operator "torch_mlir_flex.hop_flex_attention"(%arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]], %[[DOC]]) {mask_mod_fn = @sdpa_mask0, num_mask_buffers = 1 : i64, num_score_buffers = 1 : i64, score_mod_fn = @sdpa_score0} : (!torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32,16],f32>, !torch.float, !torch.bool, !torch.bool, !torch.vtensor<[4],f32>, !torch.vtensor<[32],si64>) -> (!torch.vtensor<[1,4,32,16],f32>, !torch.vtensor<[1,4,32],f32>, !torch.vtensor<[1,4,32],f32>)
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:[^:]*]]: !torch.vtensor<[],f32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %[[H:[^:]*]]: !torch.vtensor<[],si32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %{{[^:]*}}: !torch.vtensor<[],si32>, %[[B:[^:]*]]: !torch.vtensor<[4],f32>) -> !torch.vtensor<[],f32> {
# CHECK:         %[[P:.*]] = torch.vtensor.literal(dense_resource<{{.*}}> : tensor<4xf32>) : !torch.vtensor<[4],f32>
# CHECK:         %[[PH:.*]] = torch.aten.index.Tensor %[[P]], %{{.*}} : !torch.vtensor<[4],f32>
# CHECK:         %[[MUL:.*]] = torch.aten.mul.Tensor %[[S]], %[[PH]]
# CHECK:         %[[BH:.*]] = torch.aten.index.Tensor %[[B]], %{{.*}} : !torch.vtensor<[4],f32>
# CHECK:         %[[ADD:.*]] = torch.aten.add.Tensor %[[MUL]], %[[BH]], %{{.*}}
# CHECK:         return %[[ADD]] : !torch.vtensor<[],f32>
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK-SAME:      %{{[^:]*}}: !torch.vtensor<[32],si64>) -> !torch.vtensor<[],i1> {
# CHECK:         torch.aten.eq.Tensor
