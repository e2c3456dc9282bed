# RUN: %PYTHON %s | FileCheck %s
# The backward graph AOTAutograd makes for a flex_attention call: its
# flex_attention_backward HOP becomes torch.operator
# "torch_mlir_flex.hop_flex_attention_backward" with score_mod, mask_mod and
# the joint function (score_mod's gradient, flattened to value + indices per
# captured tensor whose gradient is used).

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.backend.compile import export_model, import_model
from torch_mlir_flex.dynamo import device_check
from torch_mlir_flex.dynamo.training import real_examples

B, H, S, D = 1, 2, 16, 8


def backward_ir(fn, *args):
    graphs = {}

    def keep(kind):
        def compile_(gm, fakes):
            graphs[kind] = (gm, real_examples(fakes))
            return make_boxed_func(gm.forward)

        return compile_

    backend = aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw"))
    with device_check.allow_cpu_backward():
        out = torch.compile(fn, backend=backend, fullgraph=True)(*args)
        out.sum().backward()
    gm, examples = graphs["bw"]
    return import_model(export_model(gm, examples))


def qkv():
    return [torch.randn(B, H, S, D, requires_grad=True) for _ in range(3)]


print("TEST: plain")
print(backward_ir(lambda q, k, v: flex_attention(q, k, v), *qkv()))
# CHECK-LABEL: TEST: plain
# CHECK: torch.operator "torch_mlir_flex.hop_flex_attention_backward"
# CHECK-SAME: {grad_captures = [], has_grad_lse = false, joint_fn = @joint_graph0
# CHECK-SAME: num_mask_buffers = 0 : i64, num_score_buffers = 0 : i64, score_mod_fn = @fw_graph0}
# CHECK-SAME: -> (!torch.vtensor<[1,2,16,8],f32>, !torch.vtensor<[1,2,16,8],f32>, !torch.vtensor<[1,2,16,8],f32>)
# CHECK: func.func private @fw_graph0(%[[S:.*]]: !torch.vtensor<[],f32>
# CHECK-NEXT: return %[[S]]
# CHECK: func.func private @joint_graph0({{.*}}, %[[G:.*]]: !torch.vtensor<[],f32>) -> !torch.vtensor<[],f32>
# CHECK-NEXT: return %[[G]]

bias = torch.randn(H, 2 * S - 1, requires_grad=True)


def biased(q, k, v):
    def score(s, b, h, qi, ki):
        return s + bias[h, qi - ki + S - 1]

    bm = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, S, S, device="cpu", BLOCK_SIZE=8)
    return flex_attention(q, k, v, score_mod=score, block_mask=bm)


print("TEST: learnable_bias")
print(backward_ir(biased, *qkv()))
# CHECK-LABEL: TEST: learnable_bias
# CHECK: %[[R:.*]]:4 = torch.operator "torch_mlir_flex.hop_flex_attention_backward"
# CHECK-SAME: {grad_captures = [0], has_grad_lse = false, joint_fn = @joint_graph0, kv_block_size = 8 : i64, mask_mod_fn = @mask_graph0
# CHECK-SAME: num_block_tensors = 4 : i64, num_mask_buffers = 0 : i64, num_score_buffers = 1 : i64
# CHECK-SAME: -> ({{.*}}, !torch.vtensor<[2,31],f32>)
# CHECK: return {{.*}}%[[R]]#3
# CHECK: func.func private @joint_graph0(%{{.*}}: !torch.vtensor<[],f32>, %{{.*}}: !torch.vtensor<[],si32>, %[[H:.*]]: !torch.vtensor<[],si32>, %[[Q:.*]]: !torch.vtensor<[],si32>, %[[K:.*]]: !torch.vtensor<[],si32>, %[[G:.*]]: !torch.vtensor<[],f32>, %{{.*}}: !torch.vtensor<[2,31],f32>)
# CHECK-SAME: -> (!torch.vtensor<[],f32>, !torch.vtensor<[],f32>, !torch.vtensor<[],si32>, !torch.vtensor<[],si32>)
# CHECK: %[[D:.*]] = torch.aten.sub.Tensor %[[Q]], %[[K]]
# CHECK: %[[E:.*]] = torch.aten.add.Scalar %[[D]]
# CHECK: %[[I:.*]] = torch.aten.sub.Scalar %[[E]]
# CHECK: return %[[G]], %[[G]], %[[H]], %[[I]]

# The frontend outlines it for flex-materialize (frontend/outline_backward.py).
from torch_mlir_flex.backend.compile import to_linalg  # noqa: E402

print("TEST: outlined")
print(to_linalg(backward_ir(biased, *qkv())))
# CHECK-LABEL: TEST: outlined
# CHECK: %{{.*}}:4 = call @__flex_backward_0(%{{.*}}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>, tensor<2x31xf32>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
# CHECK: func.func private @joint_graph0(%{{.*}}: tensor<f32>, {{.*}}: tensor<i32>, {{.*}}, %{{.*}}: tensor<2x31xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>)
# CHECK: func.func private @__flex_backward_0
# CHECK-SAME: flex.block_sizes = array<i64: 8, 8>, flex.grad_captures = array<i64: 0>, flex.has_grad_lse = false, flex.joint = @joint_graph0, flex.mask_mod = @mask_graph0
# CHECK-SAME: flex.num_block_tensors = 4 : i64, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64
