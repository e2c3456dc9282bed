"""Size arithmetic the upstream FxImporter has no mapping for.

With dynamic shapes, torch.export records Python-level size arithmetic as
calls on SymInts; the FxImporter maps `operator.add` and the like to Torch
ops, but not ``torch.sym_max`` / ``torch.sym_min`` (create_block_mask:
``max(1, ceil(kv_len / 128) + 1)``), and fails with "Unimplemented
call_function". `retarget_symbolic_ops` points those calls at
``prim.max.int`` / ``prim.min.int``, which the importer knows.
"""

import torch
from torch import fx

_RETARGET = {
    torch.sym_max: torch.ops.prim.max.int,
    torch.sym_min: torch.ops.prim.min.int,
}


def retarget_symbolic_ops(gm: fx.GraphModule) -> int:
    n = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _RETARGET and not node.kwargs and \
                all(isinstance(a, (int, fx.Node)) and not isinstance(a, bool) for a in node.args) and \
                isinstance(node.meta.get("val"), (int, torch.SymInt)):
            node.target = _RETARGET[node.target]
            n += 1
    if n:
        gm.recompile()
    return n
