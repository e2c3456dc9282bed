# RUN: %PYTHON %s | FileCheck %s
# FlexFxImporter entry points: import_frozen_program, import_program (both on
# one ExportedProgram with a captured buffer) and import_stateless_graph on an
# aot_autograd forward graph from torch.compile (modifiers are imported too).

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir_flex.importer import FlexFxImporter

torch.manual_seed(0)
B, H, S, D = 1, 2, 32, 16


class Alibi(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", torch.tensor([0.5, 0.25]))

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        bm = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 1, S, S, device="cpu")
        return flex_attention(q, k, v, score_mod=alibi, block_mask=bm)


def new_importer():
    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    return FlexFxImporter(context=ctx)


def qkv():
    return tuple(torch.randn(B, H, S, D) for _ in range(3))


def exported():
    ep = torch.export.export(Alibi(), qkv())
    return ep.run_decompositions(get_decomposition_table())


for entry in ("import_frozen_program", "import_program"):
    imp = new_importer()
    getattr(imp, entry)(exported(), func_name="fwd")
    print(f"TEST: {entry}")
    print(imp.module)

graphs = []


def fw_compiler(gm, example_inputs):
    imp = new_importer()
    imp.import_stateless_graph(gm.graph, func_name="compiled")
    graphs.append(str(imp.module))
    return make_boxed_func(gm.forward)


with torch.no_grad():
    torch.compile(Alibi(), backend=aot_autograd(fw_compiler=fw_compiler), dynamic=False)(*qkv())
print("TEST: import_stateless_graph")
print(graphs[0])

# CHECK-LABEL: TEST: import_frozen_program
# CHECK-LABEL: func.func @fwd(
# CHECK-NOT:     sort
# CHECK:         %[[OUT:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_mod_fn = @sdpa_mask0, score_mod_fn = @sdpa_score0} : !torch.vtensor<[1,2,32,16],f32>, !torch.vtensor<[1,2,32,16],f32>, !torch.vtensor<[1,2,32,16],f32>, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[1,2,32,16],f32>, !torch.vtensor<[1,2,32],f32>, !torch.vtensor<[1,2,32],f32>
# CHECK-NEXT:    return %[[OUT]]
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %{{[^:]*}}: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32> {
# CHECK:         torch.vtensor.literal(dense_resource<{{.*}}> : tensor<2xf32>) : !torch.vtensor<[2],f32>
# CHECK:         torch.aten.index.Tensor
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK:         torch.aten.ge.Tensor

# CHECK-LABEL: TEST: import_program
# CHECK-LABEL: func.func @fwd(
# CHECK-NOT:     torch.vtensor.literal
# CHECK:         %[[OUT:.*]], %{{.*}}, %{{.*}} = torch.hop_flex_attention %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_mod_fn = @sdpa_mask0, score_mod_fn = @sdpa_score0} :
# CHECK-NEXT:    return %[[OUT]]
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %{{[^:]*}}: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32> {
# CHECK:         torch.vtensor.literal(dense_resource<{{.*}}> : tensor<2xf32>) : !torch.vtensor<[2],f32>
# CHECK-LABEL: func.func private @sdpa_mask0(

# aot_autograd lifts the buffer to a graph input: a runtime score buffer.
# CHECK-LABEL: TEST: import_stateless_graph
# CHECK-LABEL: func.func @compiled(
# CHECK-SAME:      %[[Q:[^:]*]]: !torch.vtensor<[1,2,32,16],f32>, %[[K:[^:]*]]: !torch.vtensor<[1,2,32,16],f32>, %[[V:[^:]*]]: !torch.vtensor<[1,2,32,16],f32>, %[[SL:[^:]*]]: !torch.vtensor<[2],f32>)
# CHECK-NOT:     sort
# CHECK:         %[[R:.*]]:3 = torch.operator "torch_mlir_flex.hop_flex_attention"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SL]]) {mask_mod_fn = @sdpa_mask0, num_mask_buffers = 0 : i64, num_score_buffers = 1 : i64, score_mod_fn = @sdpa_score0} : (!torch.vtensor<[1,2,32,16],f32>, !torch.vtensor<[1,2,32,16],f32>, !torch.vtensor<[1,2,32,16],f32>, !torch.float, !torch.bool, !torch.bool, !torch.vtensor<[2],f32>) -> (!torch.vtensor<[1,2,32,16],f32>, !torch.vtensor<[1,2,32],f32>, !torch.vtensor<[1,2,32],f32>)
# CHECK-LABEL: func.func private @sdpa_score0(
# CHECK-SAME:      %[[B:[^:]*]]: !torch.vtensor<[2],f32>) -> !torch.vtensor<[],f32> {
# CHECK:         torch.aten.index.Tensor %[[B]]
# CHECK-LABEL: func.func private @sdpa_mask0(
# CHECK:         torch.aten.ge.Tensor
