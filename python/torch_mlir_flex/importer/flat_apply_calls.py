"""``flat_apply`` calls that index a captured tensor, turned back into
``aten.index.Tensor``.

Non-strict ``torch.export`` (torch 2.13) traces ``buf[idx]`` inside a
flex_attention modifier (document ids ``doc[q_idx]``, ALiBi slopes
``slopes[h]``) through dynamo's ``ModIndex`` autograd function and records

    flat_apply(func_spec, in_spec, "torch._dynamo._trace_wrapped_higher_order_op.ModIndex", buf, idx)

where ``func_spec`` (a get_attr) holds torch.export's
``_call_custom_autograd_function_in_pre_dispatch`` and ``in_spec`` (a
get_attr) the pytree spec of ``(name, buf, [idx])``. ``ModIndex.forward`` is
``aten.index(buf, [idx])``, and that is what the re-trace of
``run_decompositions`` records in inference. That re-trace (about 0.2 s) was
the only one that document masks and ALiBi needed.

``inline_flat_apply_calls`` writes the same call in place. Any other
``flat_apply`` is left to the re-trace. test_decomposition_skip.py checks
that the imported IR is the same.
"""

import torch
import torch.utils._pytree as pytree
from torch import fx
from torch.export.custom_ops import _call_custom_autograd_function_in_pre_dispatch

from .graph_walk import rewrite_calls

FLAT_APPLY = torch.ops.higher_order.flat_apply
MOD_INDEX = "torch._dynamo._trace_wrapped_higher_order_op.ModIndex"


def _constant(gm: fx.GraphModule, arg):
    """The value of a get_attr argument, or the argument itself."""
    if isinstance(arg, fx.Node):
        return getattr(gm, arg.target, None) if arg.op == "get_attr" else None
    return arg


def _held_function(gm: fx.GraphModule, spec):
    """The function a flat_apply's spec argument holds, else None."""
    value = _constant(gm, spec)
    if not isinstance(value, pytree.TreeSpec):
        return None
    try:
        return getattr(pytree.tree_unflatten([], value), "func", None)
    except Exception:
        return None


def _index_call(gm: fx.GraphModule, node: fx.Node):
    """(buf, indices) when ``node`` is ModIndex's flat_apply, else None."""
    if len(node.args) < 2 or set(node.kwargs) - {"checked_output"}:
        return None
    in_spec = _constant(gm, node.args[1])
    if (_held_function(gm, node.args[0]) is not _call_custom_autograd_function_in_pre_dispatch
            or not isinstance(in_spec, pytree.TreeSpec)):
        return None
    try:
        args, kwargs = pytree.tree_unflatten(list(node.args[2:]), in_spec)
    except Exception:  # not the (args, kwargs) pair it should be
        return None
    if (not isinstance(args, (tuple, list)) or kwargs or len(args) != 3 or args[0] != MOD_INDEX
            or not isinstance(args[2], (list, tuple))):
        return None
    return args[1], list(args[2])


def _inline(gm: fx.GraphModule, n: fx.Node) -> bool:
    if n.target is not FLAT_APPLY:
        return False
    call = _index_call(gm, n)
    if call is None:
        return False
    specs = [a for a in n.args[:2] if isinstance(a, fx.Node)]
    n.target, n.args, n.kwargs = torch.ops.aten.index.Tensor, call, {}
    for spec in specs:
        if spec.op == "get_attr" and not spec.users:
            gm.graph.erase_node(spec)
    return True


def inline_flat_apply_calls(gm: fx.GraphModule) -> int:
    """Rewrites ModIndex's flat_apply calls in ``gm`` and its submodules as
    ``aten.index.Tensor`` and erases the get_attr constants only they used;
    returns how many (their graph modules are recompiled)."""
    return rewrite_calls(gm, _inline)
