"""Size arithmetic the upstream FxImporter has no mapping for
(importer/symbolic_ops.py): torch.sym_max / sym_min / sym_sum in an
exported program with dynamic sizes, rewritten before import and compiled
end to end against eager.

    PYTHONPATH=python pytest -q test/python/importer/pytest/test_symbolic_ops.py
"""

import operator

import torch_mlir_flex
import torch
from torch.export import Dim

from torch_mlir_flex.importer.symbolic_ops import retarget_symbolic_ops

DYN = (({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),)


def sizes(x, y):
    total = torch.sym_sum([x.shape[0], y.shape[0], 3])
    widest = torch.sym_max(x.shape[0], y.shape[0])
    narrowest = torch.sym_min(x.shape[0], y.shape[0])
    return torch.arange(total) * widest + narrowest


class Sizes(torch.nn.Module):
    def forward(self, x, y):
        return sizes(x, y)


def test_rewrite_leaves_no_symbolic_calls():
    ep = torch.export.export(Sizes(), (torch.randn(5), torch.randn(7)), dynamic_shapes=DYN[0])
    targets = lambda: [n.target for n in ep.graph.nodes if n.op == "call_function"]  # noqa: E731
    assert torch.sym_sum in targets() and torch.sym_max in targets()
    assert retarget_symbolic_ops(ep.graph_module) == 3
    after = targets()
    assert not {torch.sym_sum, torch.sym_max, torch.sym_min} & set(after)
    assert after.count(operator.add) >= 2
    assert torch.ops.prim.max.int in after and torch.ops.prim.min.int in after


def test_compiled_sizes_match_eager_for_every_size():
    fn = torch_mlir_flex.compile(sizes, (torch.randn(5), torch.randn(7)), dynamic_shapes=DYN)
    for a, b in ((5, 7), (2, 9), (11, 3)):
        x, y = torch.randn(a), torch.randn(b)
        torch.testing.assert_close(fn(x, y), sizes(x, y))
