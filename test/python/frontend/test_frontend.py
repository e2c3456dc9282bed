"""Tests for torch_mlir_flex.frontend (Torch IR -> linalg text, flex outlined).

Run (from the repository root, venv active): pytest -q test/python/frontend
"""

import math
import subprocess

import pytest
import torch
from torch.export import Dim
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch_mlir import fx, ir
from torch_mlir.dialects import torch as torch_d

from torch_mlir_flex.frontend import FlexFrontendError, lower_to_linalg_with_flex_outlined
from torch_mlir_flex.tools import find_tool

MODIFIER_DIALECTS = {"linalg", "arith", "math", "tensor"}
B, H, S, E = 1, 4, 16, 8


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * torch.tanh(score / 30.0)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


CAUSAL_BM = create_block_mask(causal, 1, 1, S, S, device="cpu")


class Flex(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, q, k, v):
        return flex_attention(q, k, v, **self.kw)


class FlexLse(torch.nn.Module):
    def forward(self, q, k, v):
        out, lse = flex_attention(q, k, v, score_mod=softcap, return_lse=True)
        return out, lse


class TwoFlex(torch.nn.Module):
    def forward(self, q, k, v):
        o = flex_attention(q, k, v, score_mod=softcap)
        return flex_attention(o, k, v, block_mask=CAUSAL_BM)


class Transformerish(torch.nn.Module):
    def __init__(self, d=H * E):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(x).view(b, s, 3, H, E).permute(2, 0, 3, 1, 4)
        o = flex_attention(qkv[0], qkv[1], qkv[2], score_mod=softcap, block_mask=CAUSAL_BM)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))


def qkv(hkv=H):
    torch.manual_seed(0)
    return (torch.randn(B, H, S, E), torch.randn(B, hkv, S, E), torch.randn(B, hkv, S, E))


# ----------------------------------------------------------------- helpers


def lower(model, *args, **kw):
    return lower_to_linalg_with_flex_outlined(
        fx.export_and_import(model, *args, output_type="raw", **kw))


def mlir_opt_parses(text):
    r = subprocess.run([find_tool("mlir-opt"), "--allow-unregistered-dialect", "-o", "/dev/null"],
                       input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return True


def funcs_of(module):
    return {ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in module.body.operations if op.operation.name == "func.func"}


def walk(op):
    out = []
    op.walk(lambda o: (out.append(o), ir.WalkResult.ADVANCE)[1])
    return out


def analyze(text):
    """Parses emitted text; returns [(call, decl_attrs)], funcs, context."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(text, ctx)
    funcs = funcs_of(module)
    calls = [o for o in walk(module.operation) if o.name == "func.call"
             and ir.FlatSymbolRefAttr(o.attributes["callee"]).value.startswith("__flex_attention_")]
    result = []
    for c in calls:
        decl = funcs[ir.FlatSymbolRefAttr(c.attributes["callee"]).value]
        names = [a if isinstance(a, str) else a.name for a in decl.attributes]
        attrs = {n: decl.attributes[n] for n in names if n.startswith("flex.")}
        result.append((c, attrs))
    return result, funcs, module, ctx


def check_common(text, n_calls, n_operands=3):
    assert "!torch." not in text
    mlir_opt_parses(text)
    calls, funcs, module, ctx = analyze(text)
    leftover = [o.name for o in walk(module.operation)
                if o.name.split(".")[0] in ("torch", "torch_c", "tm_tensor")]
    assert not leftover, leftover
    assert len(calls) == n_calls
    assert len({ir.FlatSymbolRefAttr(c.attributes["callee"]).value for c, _ in calls}) == n_calls
    for call, attrs in calls:
        assert len(call.operands) == n_operands
        assert len(call.results) == 3
        nbuf = ir.IntegerAttr(attrs["flex.num_score_buffers"]).value + \
            ir.IntegerAttr(attrs["flex.num_mask_buffers"]).value
        assert nbuf == n_operands - 3
        for key in ("flex.score_mod", "flex.mask_mod"):
            if key in attrs:
                check_modifier(funcs[ir.FlatSymbolRefAttr(attrs[key]).value])
    return calls, funcs, (module, ctx)


def check_modifier(fn):
    assert len(fn.regions[0].blocks) == 1
    for op in walk(fn):
        if op.name == "func.func":
            continue
        dialect = op.name.split(".")[0]
        assert dialect in MODIFIER_DIALECTS or op.name == "func.return", op.name
    args = [str(a.type) for a in fn.regions[0].blocks[0].arguments]
    assert len(args) >= 4 and all(t in ("tensor<f32>", "tensor<i32>", "tensor<i64>")
                                  for t in args[:4]), args


def scale_of(attrs):
    return ir.FloatAttr(attrs["flex.scale"]).value


def bool_of(attrs, key):
    return ir.BoolAttr(attrs[key]).value


def body_ops(funcs, name):
    return [o.name for o in walk(funcs[name])]


# ----------------------------------------------------------------- models


def test_no_mods():
    text = lower(Flex(), *qkv())
    calls, funcs, _ = check_common(text, 1)
    attrs = calls[0][1]
    assert scale_of(attrs) == pytest.approx(1 / math.sqrt(E))
    assert "flex.enable_gqa" not in attrs
    assert not bool_of(attrs, "flex.return_lse") and not bool_of(attrs, "flex.return_max_scores")


def test_softcap_score_mod():
    calls, funcs, _ = check_common(lower(Flex(score_mod=softcap), *qkv()), 1)
    attrs = calls[0][1]
    score = ir.FlatSymbolRefAttr(attrs["flex.score_mod"]).value
    assert "math.tanh" in body_ops(funcs, score)
    assert [str(t) for t in funcs[score].type.inputs] == \
        ["tensor<f32>"] + ["tensor<i32>"] * 4
    assert [str(t) for t in funcs[score].type.results] == ["tensor<f32>"]


def test_causal_block_mask():
    calls, funcs, _ = check_common(lower(Flex(block_mask=CAUSAL_BM), *qkv()), 1)
    mask = ir.FlatSymbolRefAttr(calls[0][1]["flex.mask_mod"]).value
    assert "arith.cmpi" in body_ops(funcs, mask)
    assert [str(t) for t in funcs[mask].type.results] == ["tensor<i1>"]


def test_causal_softcap_and_explicit_scale():
    m = Flex(score_mod=softcap, block_mask=CAUSAL_BM, scale=0.25)
    calls, funcs, _ = check_common(lower(m, *qkv()), 1)
    attrs = calls[0][1]
    assert scale_of(attrs) == 0.25
    assert "flex.score_mod" in attrs and "flex.mask_mod" in attrs


def test_transformerish_linear_before_attention():
    x = torch.randn(B, S, H * E)
    text = lower(Transformerish().requires_grad_(False), x)
    calls, funcs, _ = check_common(text, 1)
    call = calls[0][0]
    # q/k/v come from the lowered linear layer, not from function arguments.
    assert all(not isinstance(v, ir.BlockArgument) for v in call.operands)
    assert "linalg.matmul" in text or "linalg.batch_matmul" in text or "linalg.generic" in text


def test_gqa():
    calls, _, _ = check_common(lower(Flex(enable_gqa=True), *qkv(hkv=2)), 1)
    call, attrs = calls[0]
    assert "flex.enable_gqa" in attrs and isinstance(attrs["flex.enable_gqa"], ir.UnitAttr)
    assert str(call.operands[1].type) == f"tensor<{B}x2x{S}x{E}xf32>"


def test_return_lse():
    calls, _, _ = check_common(lower(FlexLse(), *qkv()), 1)
    call, attrs = calls[0]
    assert bool_of(attrs, "flex.return_lse")
    assert str(call.results[1].type) == f"tensor<{B}x{H}x{S}xf32>"
    assert len(list(call.results[1].uses)) >= 1


def test_two_flex_calls():
    calls, _, _ = check_common(lower(TwoFlex(), *qkv()), 2)
    assert "flex.score_mod" in calls[0][1] or "flex.score_mod" in calls[1][1]


def test_dynamic_seq_len():
    s = Dim("s", min=2, max=4096)
    dyn = {"q": {2: s}, "k": {2: s}, "v": {2: s}}
    text = lower(Flex(score_mod=softcap), *qkv(), dynamic_shapes=dyn)
    calls, _, _ = check_common(text, 1)
    call = calls[0][0]
    assert str(call.operands[0].type) == f"tensor<{B}x{H}x?x{E}xf32>"
    assert str(call.results[1].type) == f"tensor<{B}x{H}x?xf32>"


# ------------------------------------------------- hand-built form (b) IR

FORM_B = """
module {
  func.func private @sdpa_score0(%s: !torch.vtensor<[],f32>, %b: !torch.vtensor<[],si32>, %h: !torch.vtensor<[],si32>, %m: !torch.vtensor<[],si32>, %n: !torch.vtensor<[],si32>, %bias: !torch.vtensor<[4],f32>) -> !torch.vtensor<[],f32> {
    %idx = torch.prim.ListConstruct %h : (!torch.vtensor<[],si32>) -> !torch.list<optional<vtensor>>
    %bh = torch.aten.index.Tensor %bias, %idx : !torch.vtensor<[4],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],f32>
    %int1 = torch.constant.int 1
    %0 = torch.aten.add.Tensor %s, %bh, %int1 : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[],f32>
    return %0 : !torch.vtensor<[],f32>
  }
  func.func private @sdpa_mask0(%b: !torch.vtensor<[],si32>, %h: !torch.vtensor<[],si32>, %m: !torch.vtensor<[],si32>, %n: !torch.vtensor<[],si32>, %doc: !torch.vtensor<[16],si64>) -> !torch.vtensor<[],i1> {
    %im = torch.prim.ListConstruct %m : (!torch.vtensor<[],si32>) -> !torch.list<optional<vtensor>>
    %dm = torch.aten.index.Tensor %doc, %im : !torch.vtensor<[16],si64>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],si64>
    %in = torch.prim.ListConstruct %n : (!torch.vtensor<[],si32>) -> !torch.list<optional<vtensor>>
    %dn = torch.aten.index.Tensor %doc, %in : !torch.vtensor<[16],si64>, !torch.list<optional<vtensor>> -> !torch.vtensor<[],si64>
    %0 = torch.aten.eq.Tensor %dm, %dn : !torch.vtensor<[],si64>, !torch.vtensor<[],si64> -> !torch.vtensor<[],i1>
    return %0 : !torch.vtensor<[],i1>
  }
  func.func @main(%q: !torch.vtensor<[1,4,16,8],f32>, %k: !torch.vtensor<[1,2,16,8],f32>, %v: !torch.vtensor<[1,2,16,8],f32>, %doc: !torch.vtensor<[16],si64>) -> (!torch.vtensor<[1,4,16,8],f32>, !torch.vtensor<[1,4,16],f32>) {
    %bias = torch.vtensor.literal(dense<[0.5, -0.25, 1.0, 2.0]> : tensor<4xf32>) : !torch.vtensor<[4],f32>
    %none = torch.constant.none
    %true = torch.constant.bool true
    %false = torch.constant.bool false
    %0:3 = torch.operator "torch_mlir_flex.hop_flex_attention"(%q, %k, %v, %none, %true, %false, %bias, %doc) {score_mod_fn = @sdpa_score0, mask_mod_fn = @sdpa_mask0, enable_gqa = true, num_score_buffers = 1 : i64, num_mask_buffers = 1 : i64} : (!torch.vtensor<[1,4,16,8],f32>, !torch.vtensor<[1,2,16,8],f32>, !torch.vtensor<[1,2,16,8],f32>, !torch.none, !torch.bool, !torch.bool, !torch.vtensor<[4],f32>, !torch.vtensor<[16],si64>) -> (!torch.vtensor<[1,4,16,8],f32>, !torch.vtensor<[1,4,16],f32>, !torch.vtensor<[1,4,16],f32>)
    return %0#0, %0#1 : !torch.vtensor<[1,4,16,8],f32>, !torch.vtensor<[1,4,16],f32>
  }
}
"""


def lower_text(src):
    with ir.Context() as ctx:
        torch_d.register_dialect(ctx)
        return lower_to_linalg_with_flex_outlined(ir.Module.parse(src))


def test_form_b_captured_buffers():
    calls, funcs, _ = check_common(lower_text(FORM_B), 1, n_operands=5)
    call, attrs = calls[0]
    assert ir.IntegerAttr(attrs["flex.num_score_buffers"]).value == 1
    assert ir.IntegerAttr(attrs["flex.num_mask_buffers"]).value == 1
    assert "flex.enable_gqa" in attrs and bool_of(attrs, "flex.return_lse")
    assert [str(v.type) for v in call.operands[3:]] == ["tensor<4xf32>", "tensor<16xi64>"]
    score = funcs[ir.FlatSymbolRefAttr(attrs["flex.score_mod"]).value]
    assert [str(t) for t in score.type.inputs][-1] == "tensor<4xf32>"
    assert "tensor.extract" in [o.name for o in walk(score)]


# ----------------------------------------------------------------- errors


class KthAfter(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.kthvalue(flex_attention(q, k, v), 2, dim=-1).values


def test_tm_tensor_op_is_reported():
    # scan/sort/scatter are lowered (frontend/tm_tensor/); topk is not.
    with pytest.raises(FlexFrontendError, match=r"'tm_tensor.topk' \(from aten.kthvalue\)"):
        lower(KthAfter(), *qkv())


def _single_op(op):
    return f"""func.func @f(%a: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {{
  %0 = {op} : (!torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}}"""


def test_leftover_torch_op_is_reported():
    src = _single_op('"torch.aten.erfinv"(%a)')
    with pytest.raises(FlexFrontendError, match=r"'aten.erfinv'.*not lowered"):
        lower_text(src)


def test_unknown_torch_operator_is_reported():
    src = _single_op('torch.operator "torch.aten.frobnicate"(%a)')
    with pytest.raises(FlexFrontendError, match=r"'aten.frobnicate' \(torch.operator\)"):
        lower_text(src)


def test_torch_backend_level_input():
    """Input already at torch-backend level (hop still present) also works."""
    from torch_mlir.compiler_utils import run_pipeline_with_repro_report
    from torch_mlir_flex.frontend.cleanup import prune_dead_torch_ops
    from torch_mlir_flex.frontend.pipeline import TORCH_BACKEND_PIPELINE

    module = fx.export_and_import(Flex(score_mod=softcap), *qkv(), output_type="raw")
    prune_dead_torch_ops(module)  # upstream leaves a dead block-mask graph
    run_pipeline_with_repro_report(module, TORCH_BACKEND_PIPELINE, "to torch backend")
    assert "torch.hop_flex_attention" in str(module)
    check_common(lower_to_linalg_with_flex_outlined(module), 1)
