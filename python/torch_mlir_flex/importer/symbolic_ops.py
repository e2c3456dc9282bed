"""Size arithmetic the upstream FxImporter has no mapping for.

With dynamic shapes, torch.export records Python-level size arithmetic as
calls on SymInts; the FxImporter maps `operator.add` and the like to Torch
ops, but not ``torch.sym_max`` / ``torch.sym_min`` (create_block_mask:
``max(1, ceil(kv_len / 128) + 1)``), and fails with "Unimplemented
call_function". `retarget_symbolic_ops` points those calls at
``prim.max.int`` / ``prim.min.int``, which the importer knows, and splits
``torch.sym_sum([a, b, c])`` (transformers' mask sizes: past length plus
query length) into ``operator.add`` calls.
"""

import operator

import torch
from torch import fx

_RETARGET = {
    torch.sym_max: torch.ops.prim.max.int,
    torch.sym_min: torch.ops.prim.min.int,
}


def retarget_symbolic_ops(gm: fx.GraphModule) -> int:
    n = 0
    for node in list(gm.graph.nodes):  # sym_sum nodes are replaced
        if node.op == "call_function" and node.target in _RETARGET and not node.kwargs and \
                all(isinstance(a, (int, fx.Node)) and not isinstance(a, bool) for a in node.args) and \
                isinstance(node.meta.get("val"), (int, torch.SymInt)):
            node.target = _RETARGET[node.target]
            n += 1
        elif node.op == "call_function" and node.target is torch.sym_sum and not node.kwargs and \
                len(node.args) == 1 and isinstance(node.args[0], (list, tuple)) and \
                any(isinstance(t, fx.Node) for t in node.args[0]) and \
                isinstance(node.meta.get("val"), (int, torch.SymInt)):
            _split_sum(gm, node)
            n += 1
    if n:
        gm.recompile()
    return n


def _split_sum(gm: fx.GraphModule, node: fx.Node) -> None:
    """`sym_sum(terms)` as a chain of `operator.add` (each with the sum so
    far as its value)."""
    terms = list(node.args[0])
    total, value = terms[0], _value(terms[0])
    with gm.graph.inserting_before(node):
        for t in terms[1:]:
            value = value + _value(t)
            total = gm.graph.call_function(operator.add, (total, t))
            total.meta["val"] = value
    node.replace_all_uses_with(total)
    gm.graph.erase_node(node)


def _value(x):
    return x.meta["val"] if isinstance(x, fx.Node) else x
