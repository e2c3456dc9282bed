"""pytest: importer/dead_code.py erases the dead BlockMask construction of a
forward before run_decompositions, and nothing whose effect is observed."""

import torch
from torch import fx
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.importer import export_and_import
from torch_mlir_flex.importer.block_mask import strip_block_mask_tensors
from torch_mlir_flex.importer.dead_code import erase_dead_code

aten = torch.ops.aten
B, H, S, D = 1, 2, 64, 16


class DocumentMask(torch.nn.Module):
    """create_block_mask inside forward, over document ids given at run time."""

    def forward(self, q, k, v, doc):
        def mask(b, h, i, j):
            return (doc[i] == doc[j]) & (i >= j)

        bm = create_block_mask(mask, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, block_mask=bm)


class LiveVmap(torch.nn.Module):
    """A vmap whose result the output uses, beside a dead mask construction."""

    def forward(self, q, k, v):
        q = torch.vmap(lambda x: x * 2.0)(q)
        bm = create_block_mask(lambda b, h, i, j: i >= j, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, block_mask=bm)


def _inputs():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, generator=g) for _ in range(3))
    return q, k, v, torch.arange(S) // 16


def _exported(module, args):
    with torch.no_grad():
        return torch.export.export(module, args)


def _targets(graph):
    return [n.target for n in graph.nodes if n.op == "call_function"]


def _is_vmap(t):
    return getattr(t, "__module__", None) == "torch._functorch.predispatch"


def test_dead_mask_construction_is_erased():
    prog = _exported(DocumentMask(), _inputs())
    g = prog.graph
    assert any(_is_vmap(t) for t in _targets(g))
    assert aten.index_put_.default in _targets(g)
    strip_block_mask_tensors(g)
    erased = erase_dead_code(g)
    assert erased > 50
    left = _targets(g)
    assert not any(_is_vmap(t) for t in left)
    assert aten.index_put_.default not in left
    assert torch.ops.higher_order.flex_attention in left
    prog.graph_module.recompile()
    # The pruned program still computes flex_attention with the mask.
    q, k, v, doc = _inputs()
    ref = DocumentMask()(q, k, v, doc)
    torch.testing.assert_close(prog.module()(q, k, v, doc), ref)


def test_imported_ir_has_no_dead_mask_ops():
    text = str(export_and_import(DocumentMask(), *_inputs()))
    assert "hop_flex_attention" in text
    for op in ("torch.aten.index_put", "torch.aten.arange", "torch.aten.sort", "torch.aten.argsort"):
        assert op not in text, op


def test_live_vmap_keeps_everything():
    prog = _exported(LiveVmap(), _inputs()[:3])
    strip_block_mask_tensors(prog.graph)
    before = _targets(prog.graph)
    assert erase_dead_code(prog.graph) == 0
    assert _targets(prog.graph) == before


def _graph(build):
    g = fx.Graph()
    x = g.placeholder("x")
    out = build(g, x)
    g.output(out)
    return g


def test_pure_dead_nodes_are_erased():
    def build(g, x):
        g.call_function(aten.add.Tensor, (g.call_function(aten.mul.Tensor, (x, x)), x))  # dead
        return g.call_function(aten.neg.default, (x,))

    g = _graph(build)
    assert erase_dead_code(g) == 2
    assert _targets(g) == [aten.neg.default]


def test_write_to_a_live_tensor_is_kept():
    def build(g, x):
        g.call_function(aten.add_.Tensor, (x, 1.0))  # dead, but writes the input
        g.call_function(aten.mul.Tensor, (x, x))  # dead and pure
        return g.call_function(aten.neg.default, (x,))

    g = _graph(build)
    assert erase_dead_code(g) == 0
    assert len(_targets(g)) == 3


def test_write_through_a_view_of_a_live_tensor_is_kept():
    def build(g, x):
        view = g.call_function(aten.slice.Tensor, (x, 0, 0, 8))  # dead itself
        g.call_function(aten.fill_.Scalar, (view, 1.0))  # writes x's storage
        return g.call_function(aten.neg.default, (x,))

    g = _graph(build)
    assert erase_dead_code(g) == 0
    assert len(_targets(g)) == 3


def test_write_to_a_dead_tensor_is_erased():
    def build(g, x):
        z = g.call_function(aten.zeros_like.default, (x,))
        g.call_function(aten.add_.Tensor, (z, 1.0))
        return g.call_function(aten.neg.default, (x,))

    g = _graph(build)
    assert erase_dead_code(g) == 2
    assert _targets(g) == [aten.neg.default]


def test_dead_random_op_is_kept():
    def build(g, x):
        g.call_function(aten.rand_like.default, (x,))  # moves the random stream
        return g.call_function(aten.neg.default, (x,))

    g = _graph(build)
    assert erase_dead_code(g) == 0
    assert len(_targets(g)) == 2
