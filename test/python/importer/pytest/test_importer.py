"""pytest: flex_attention import contract (run: pytest test/python/importer/pytest)."""

import re

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir_flex.importer import (
    CAPTURE_OP,
    FlexFxImporter,
    FlexImportError,
    export_and_import,
    verify_flex_calls,
)

B, H, S, D = 1, 2, 32, 16
BLOCK_MASK_OPS = ("sort", "index_put", "arange", "vmap", "_assert_tensor_metadata")


def causal(b, h, q, k):
    return q >= k


OUTSIDE = create_block_mask(causal, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)


class Model(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.register_buffer("slopes", torch.tensor([0.5, 0.25]))

    def forward(self, q, k, v, doc):
        kind = self.kind
        if kind == "default":
            return flex_attention(q, k, v)
        if kind == "softcap":
            return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: torch.tanh(s / 20) * 20)
        if kind == "causal_inside":
            bm = create_block_mask(causal, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)
            return flex_attention(q, k, v, block_mask=bm)
        if kind == "causal_outside":
            return flex_attention(q, k, v, block_mask=OUTSIDE)
        if kind == "alibi":
            return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + self.slopes[h] * (ki - qi))
        if kind == "doc":
            bm = create_block_mask(lambda b, h, qi, ki: doc[qi] == doc[ki], 1, 1, S, S, device="cpu")
            return flex_attention(q, k, v, block_mask=bm)
        if kind == "gqa_lse":
            out, lse = flex_attention(q, k[:, :1], v[:, :1], enable_gqa=True, return_lse=True, scale=0.3)
            return out, lse
        if kind == "two_calls":
            a = flex_attention(q, k, v, block_mask=OUTSIDE)
            return flex_attention(a, k, v, block_mask=OUTSIDE)
        raise AssertionError(kind)


KINDS = ["default", "softcap", "causal_inside", "causal_outside", "alibi", "doc", "gqa_lse", "two_calls"]


def inputs():
    g = torch.Generator().manual_seed(0)
    qkv = [torch.randn(B, H, S, D, generator=g) for _ in range(3)]
    return (*qkv, torch.arange(S) // 8)


def _flex_lines(text):
    return [l for l in text.splitlines() if "hop_flex_attention" in l]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mutation", [False, True], ids=["frozen", "program"])
def test_raw_verifies(kind, mutation):
    m = export_and_import(Model(kind), *inputs(), experimental_support_mutation=mutation)
    assert m.operation.verify()
    n = verify_flex_calls(m)
    assert n == (2 if kind == "two_calls" else 1)
    text = str(m)
    main = text.split("func.func private")[0]
    for bad in BLOCK_MASK_OPS:
        assert bad not in main, bad
    for line in _flex_lines(text):
        if CAPTURE_OP in line:
            operands = re.search(r'\((%[^)]*)\) \{', line).group(1).split(", ")
            ns = int(re.search(r"num_score_buffers = (\d+)", line).group(1))
            nm = int(re.search(r"num_mask_buffers = (\d+)", line).group(1))
            nb = re.search(r"num_block_tensors = (\d+)", line)
            nb = int(nb.group(1)) if nb else 0
            assert len(operands) == 6 + ns + nm + nb
        else:
            assert "num_score_buffers" not in line
    # A BlockMask built outside forward keeps its (constant) block tensors.
    assert (CAPTURE_OP in text) == (kind in ("doc", "causal_outside", "two_calls"))
    assert ("num_block_tensors = 4" in text) == (kind in ("causal_outside", "two_calls"))
    if kind == "gqa_lse":
        assert "enable_gqa = true" in text
    else:
        assert "enable_gqa" not in text


@pytest.mark.parametrize("kind", KINDS)
def test_torch_backend(kind):
    m = export_and_import(Model(kind), *inputs(), output_type="torch")
    assert m.operation.verify()
    verify_flex_calls(m)
    text = str(m)
    for bad in BLOCK_MASK_OPS:
        assert bad not in text, bad
    assert _flex_lines(text)


def _exported(kind="alibi"):
    ep = torch.export.export(Model(kind), inputs())
    return ep.run_decompositions(get_decomposition_table())


def _importer():
    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    return FlexFxImporter(context=ctx)


def _flex_node(ep):
    return next(n for n in ep.graph.nodes if "flex_attention" in str(n.target))


def test_unexpected_hop_layout():
    ep = _exported()
    node = _flex_node(ep)
    node.args = node.args[:8]
    with pytest.raises(FlexImportError, match="expected 9"):
        _importer().import_frozen_program(ep)


def test_non_tensor_capture():
    ep = _exported("doc")
    node = _flex_node(ep)
    args = list(node.args)
    args[8] = (3,)
    node.args = tuple(args)
    with pytest.raises(FlexImportError, match="only tensors can be captured"):
        _importer().import_frozen_program(ep)


def test_non_scalar_score_mod():
    ep = _exported()
    gm = getattr(ep.graph_module, _flex_node(ep).args[3].target)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    cap = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]  # slopes [2]
    out.args = (cap,)
    gm.recompile()
    with pytest.raises(FlexImportError, match="0-d"):
        _importer().import_frozen_program(ep)


def test_verify_detects_arity_mismatch():
    m = export_and_import(Model("doc"), *inputs())
    text = str(m).replace("num_mask_buffers = 1", "num_mask_buffers = 2")
    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    bad = ir.Module.parse(text, ctx)
    with pytest.raises(FlexImportError, match="operands"):
        verify_flex_calls(bad)
    text = str(m).replace(
        "%arg4: !torch.vtensor<[32],si64>) -> !torch.vtensor<[],i1>",
        "%arg4: !torch.vtensor<[32],si64>, %arg5: !torch.vtensor<[],si32>) -> !torch.vtensor<[],i1>",
    )
    bad = ir.Module.parse(text, ctx)
    with pytest.raises(FlexImportError, match="takes 6 arguments"):
        verify_flex_calls(bad)
