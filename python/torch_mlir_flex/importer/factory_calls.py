"""``aten.new_ones`` written as the two ops the re-trace records for it.

``flex_attention`` without a ``block_mask`` uses torch's ``noop_mask``,
``batch.new_ones(size=(), dtype=torch.bool, device=batch.device)``, so the
mask graph of every such call (decode, and score_mod-only calls) holds an
``aten.new_ones``. That op is in the decomposition table, which alone made
``run_decompositions`` re-trace the whole program (0.2-0.4 s of a 0.8-1.3 s
decode compile). The table's decomposition (torch._refs ``new_ones``, then
``full``) always records

    e = aten.empty_strided(size, <contiguous strides>, dtype=D,
                           layout=torch.strided, device=V, pin_memory=False)
    aten.full_like(e, True if D is torch.bool else 1, pin_memory=False)

with ``D`` / ``V`` the call's dtype / device, else those of its tensor.
``expand_new_ones_calls`` writes exactly that in place of each plain call
(strided layout, no pinned memory, no gradient); other forms are left to
the re-trace. test_decomposition_skip.py checks that the imported IR is the
same either way.
"""

import torch
from torch import fx
from torch._prims_common import make_contiguous_strides_for

from .graph_walk import rewrite_calls

aten = torch.ops.aten


def _plain_new_ones(n: fx.Node):
    """(size, dtype, device) of a plain ``new_ones`` call, or None."""
    if n.target is not aten.new_ones.default or len(n.args) != 2:
        return None
    tensor, size = n.args
    kw = dict(n.kwargs)
    like = tensor.meta.get("val") if isinstance(tensor, fx.Node) else None
    if (not isinstance(like, torch.Tensor) or not all(isinstance(s, int) for s in size)
            or kw.pop("layout", None) not in (None, torch.strided) or kw.pop("pin_memory", False)
            or kw.pop("requires_grad", False)):
        return None
    dtype, device = kw.pop("dtype", None) or like.dtype, kw.pop("device", None) or like.device
    if kw or not isinstance(n.meta.get("val"), torch.Tensor):
        return None
    return list(size), dtype, torch.device(device)


def _expand(gm: fx.GraphModule, n: fx.Node) -> bool:
    call = _plain_new_ones(n)
    if call is None:
        return False
    size, dtype, device = call
    strides = list(make_contiguous_strides_for(size))  # the decomposition's own
    g = gm.graph
    with g.inserting_before(n):
        empty = g.call_function(aten.empty_strided.default, (size, strides),
                                dict(dtype=dtype, layout=torch.strided, device=device, pin_memory=False))
        full = g.call_function(aten.full_like.default, (empty, True if dtype == torch.bool else 1),
                               dict(pin_memory=False))
    for new in (empty, full):
        new.meta = dict(n.meta)
    n.replace_all_uses_with(full)
    g.erase_node(n)
    return True


def expand_new_ones_calls(gm: fx.GraphModule) -> int:
    """Expands the plain ``aten.new_ones`` calls of ``gm`` and of its
    submodules; returns how many."""
    return rewrite_calls(gm, _expand)
