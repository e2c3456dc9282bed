"""pytest: export_and_import skips run_decompositions only where it changes
nothing (importer/decomposition_check.py): the imported Torch IR equals the
IR of the path that always re-traces (also where the importer first renames
or expands what the re-trace would: `&`, captured-tensor indexing in
modifiers, `new_ones` of torch's noop mask), and
programs that need decomposing (CompositeImplicitAutograd or table ops, a
live vmap, in-place ops, dynamic shapes) take it."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.importer import cleanups, export_and_import
from torch_mlir_flex.importer.decomposition_check import decompositions_change_nothing
from torch_mlir_flex.importer.decompositions import flex_decomposition_table

B, H, S, D = 1, 4, 32, 16


def causal(b, h, q, k):
    return q >= k


CAUSAL = create_block_mask(causal, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)


def softcap(s, b, h, q, k):
    return torch.tanh(s / 20.0) * 20.0


class Flex(torch.nn.Module):
    """flex_attention with the keyword arguments of `kind`."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.register_buffer("slopes", torch.linspace(0.1, 0.8, H))
        self.lin = torch.nn.Linear(D, D)
        self.w = torch.nn.Parameter(torch.randn(D))
        self.register_buffer("nb", torch.randn(D), persistent=False)
        self.c = torch.randn(D)  # a lifted constant
        self.register_buffer("rel", torch.randn(H, S))

    def forward(self, q, k, v, doc):
        kind = self.kind
        if kind == "softcap_causal":
            return flex_attention(q, k, v, score_mod=softcap, block_mask=CAUSAL)
        if kind == "state":  # a parameter, a non-persistent buffer, a constant
            return flex_attention(q * self.w, k + self.nb, v * self.c, block_mask=CAUSAL)
        if kind == "gqa_lse":
            return flex_attention(q, k, v, block_mask=CAUSAL, enable_gqa=True, return_lse=True, scale=0.3)
        if kind == "captured_buffer":
            return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + self.slopes[h] * (j - i),
                                  block_mask=CAUSAL)
        if kind == "mask_in_forward":
            bm = create_block_mask(lambda b, h, i, j: (doc[i] == doc[j]) & (i >= j), 1, 1, S, S, device="cpu")
            return flex_attention(q, k, v, block_mask=bm)
        if kind == "and_mask":
            return flex_attention(q, k, v, block_mask=create_block_mask(
                lambda b, h, i, j: (i >= j) & (i - j < 8), 1, 1, S, S, device="cpu"))
        if kind == "bias_2d":  # a captured 2-D table read with two computed indices
            return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + self.rel[h, (i - j).abs()],
                                  block_mask=CAUSAL)
        if kind == "or_xor_scalar":  # aten.__or__/__xor__/__and__ .Tensor and .Scalar
            return flex_attention(q, k, v, block_mask=create_block_mask(
                lambda b, h, i, j: (i >= j) & (((j & 3) == 0) | ((i ^ j) < 4) | (j ^ 5 == 1) | ((j | 1) == 3)),
                1, 1, S, S, device="cpu"))
        if kind == "no_mask":  # torch's noop_mask: aten.new_ones in the mask graph
            return flex_attention(q, k, v)
        if kind == "decode_gqa_score":  # one query row, GQA, a score_mod and no mask
            return flex_attention(q[:, :, :1], k[:, :1], v[:, :1], score_mod=softcap, enable_gqa=True)
        if kind == "new_ones":  # new_ones forms beside the noop mask's
            ones = q.new_ones([D]) + doc.new_ones([S, 1], dtype=torch.float32)[3] + doc.new_ones(())
            return flex_attention(q * ones, k, v * q.new_ones((), dtype=torch.bool), block_mask=CAUSAL)
        if kind == "linear_block":
            return F.gelu(self.lin(flex_attention(q, k, v, block_mask=CAUSAL)), approximate="tanh")
        raise AssertionError(kind)


# kind -> whether run_decompositions is skipped
KINDS = {"softcap_causal": True, "state": True, "gqa_lse": True, "captured_buffer": True,
         "mask_in_forward": True, "and_mask": True, "or_xor_scalar": True, "bias_2d": True,
         "no_mask": True, "decode_gqa_score": True, "new_ones": True, "linear_block": False}


def inputs(kind):
    g = torch.Generator().manual_seed(0)
    hkv = 1 if kind == "gqa_lse" else H
    q = torch.randn(B, H, S, D, generator=g)
    k, v = (torch.randn(B, hkv, S, D, generator=g) for _ in range(2))
    return q, k, v, torch.arange(S) // 8


def _import(kind, mutation, monkeypatch, always_retrace):
    decisions = []

    def check(prog, table):
        decisions.append(False if always_retrace else decompositions_change_nothing(prog, table))
        return decisions[-1]

    torch.manual_seed(0)  # the same weights on both paths
    model = Flex(kind).eval()
    with monkeypatch.context() as m:
        m.setattr(cleanups, "decompositions_change_nothing", check)
        module = export_and_import(model, *inputs(kind), experimental_support_mutation=mutation)
    assert len(decisions) == 1
    return str(module), decisions[0]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("mutation", [False, True], ids=["frozen", "program"])
def test_same_ir_with_and_without_retrace(kind, mutation, monkeypatch):
    retraced, _ = _import(kind, mutation, monkeypatch, always_retrace=True)
    text, skipped = _import(kind, mutation, monkeypatch, always_retrace=False)
    assert skipped == KINDS[kind]
    assert text == retraced


def _exported(module, args, **kw):
    with torch.no_grad():
        return torch.export.export(module, args, **kw)


def _skips(module, args, **kw):
    return decompositions_change_nothing(_exported(module, args, **kw), flex_decomposition_table())


class InPlace(torch.nn.Module):
    def forward(self, q, k, v):
        q = q.clone()
        q.mul_(2.0)
        return flex_attention(q, k, v, block_mask=CAUSAL)


class BufferUpdate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, q, k, v):
        self.calls.add_(1)
        return flex_attention(q, k, v, block_mask=CAUSAL)


class Plain(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=softcap, block_mask=CAUSAL)


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


def test_needs_decomposition():
    qkv = inputs("softcap_causal")[:3]
    assert _skips(Plain(), qkv)
    assert not _skips(InPlace(), qkv)
    assert not _skips(BufferUpdate(), qkv)
    # Symbolic shapes (flex_attention with a dynamic dim always has a
    # BlockMask computation to decompose, so a plain op shows this).
    x = torch.randn(4, 8)
    assert _skips(Scale(), (x,))
    assert not _skips(Scale(), (x,), dynamic_shapes=({0: Dim("rows")},))


def test_table_op_takes_retrace():
    """An op of the table (here one ours decomposes) is never skipped, even
    when it is the only reason to re-trace."""
    ep = _exported(Plain(), inputs("softcap_causal")[:3])
    table = flex_decomposition_table()
    assert decompositions_change_nothing(ep, table)
    assert not decompositions_change_nothing(ep, {**table, torch.ops.aten.tanh.default: torch.tanh})


def test_callers_program_kept():
    """Without the re-trace the importer works on a copy: the caller's
    ExportedProgram still runs as exported (import drops BlockMask tensors
    from the graph it imports)."""
    args = inputs("softcap_causal")[:3]
    ep = _exported(Plain(), args)
    before = str(ep.graph)
    export_and_import(ep)
    assert str(ep.graph) == before
    torch.testing.assert_close(ep.module()(*args), Plain()(*args))
