# RUN: %PYTHON %s | FileCheck %s
# flex_attention score_mod import: default (identity) modifiers, non-default
# score_mods (tanh softcap, relative position bias) and two calls sharing one
# modifier (identical modifier graphs are imported once).

import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex.importer import export_and_import

torch.manual_seed(0)
B, H, S, D = 1, 2, 16, 16


def qkv():
    return tuple(torch.randn(B, H, S, D) for _ in range(3))


def run(name, model):
    print(f"TEST: {name}")
    print(export_and_import(model, *qkv()))


def softcap(score, b, h, q_idx, kv_idx):
    return torch.tanh(score / 20.0) * 20.0


def rel_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx)


class Default(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v)


class Softcap(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=softcap)


class RelBias(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=rel_bias)


class TwoCalls(torch.nn.Module):
    def forward(self, q, k, v):
        a = flex_attention(q, k, v, score_mod=softcap)
        return flex_attention(a, k, v, score_mod=softcap)


run("default", Default())
run("softcap", Softcap())
run("rel_bias", RelBias())
run("two_calls", TwoCalls())

# CHECK-LABEL: TEST: default
# CHECK-LABEL: func.func @main(
# CHECK-SAME:      %[[Q:.*]]: !torch.vtensor<[1,2,16,16],f32>, %[[K:.*]]: !torch.vtensor<[1,2,16,16],f32>, %[[V:.*]]: !torch.vtensor<[1,2,16,16],f32>)
# CHECK-DAG:     %[[SCALE:.*]] = torch.constant.float 2.500000e-01
# CHECK-DAG:     %[[LSE:.*]] = torch.constant.bool false
# CHECK-DAG:     %[[MAX:.*]] = torch.constant.bool false
# CHECK:         %[[OUT:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %[[Q]], %[[K]], %[[V]], %[[SCALE]], %[[LSE]], %[[MAX]] {score_mod_fn = @sdpa_score0} : !torch.vtensor<[1,2,16,16],f32>, !torch.vtensor<[1,2,16,16],f32>, !torch.vtensor<[1,2,16,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[1,2,16,16],f32>, !torch.vtensor<[1,2,16],f32>, !torch.vtensor<[1,2,16],f32>
# CHECK:         return %[[OUT]]
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:.*]]: !torch.vtensor<[],f32>, %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32>
# CHECK-NEXT:    return %[[S]] : !torch.vtensor<[],f32>
# CHECK-NOT:   func.func private @sdpa_mask

# CHECK-LABEL: TEST: softcap
# CHECK-LABEL: func.func @main(
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} :
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:.*]]: !torch.vtensor<[],f32>, %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>, %{{.*}}: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32>
# CHECK:         %[[D:.*]] = torch.aten.div.Scalar %[[S]], %{{.*}} : !torch.vtensor<[],f32>, !torch.float -> !torch.vtensor<[],f32>
# CHECK:         %[[T:.*]] = torch.aten.tanh %[[D]] : !torch.vtensor<[],f32> -> !torch.vtensor<[],f32>
# CHECK:         %[[M:.*]] = torch.aten.mul.Scalar %[[T]], %{{.*}} : !torch.vtensor<[],f32>, !torch.float -> !torch.vtensor<[],f32>
# CHECK:         return %[[M]] : !torch.vtensor<[],f32>

# CHECK-LABEL: TEST: rel_bias
# CHECK-LABEL: func.func @main(
# CHECK:         torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} :
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[S:.*]]: !torch.vtensor<[],f32>, %[[B:.*]]: !torch.vtensor<[],si32>, %[[H:.*]]: !torch.vtensor<[],si32>, %[[QI:.*]]: !torch.vtensor<[],si32>, %[[KI:.*]]: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32>
# CHECK:         %[[SUB:.*]] = torch.aten.sub.Tensor %[[QI]], %[[KI]], %{{.*}} : !torch.vtensor<[],si32>, !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],si32>
# CHECK:         %[[ADD:.*]] = torch.aten.add.Tensor %[[S]], %[[SUB]], %{{.*}} : !torch.vtensor<[],f32>, !torch.vtensor<[],si32>, !torch.int -> !torch.vtensor<[],f32>
# CHECK:         return %[[ADD]] : !torch.vtensor<[],f32>

# Both calls reference the same (deduplicated) modifier.
# CHECK-LABEL: TEST: two_calls
# CHECK-LABEL: func.func @main(
# CHECK:         %[[A:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} :
# CHECK:         %[[O:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %[[A]], %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {score_mod_fn = @sdpa_score0} :
# CHECK:         return %[[O]]
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK:         torch.aten.tanh
# CHECK-NOT:   func.func private @sdpa_score1
