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

``inline_flat_apply_calls`` writes the same call in place, and also a
``flat_apply`` whose function is an aten OpOverload (``op(*args,
**kwargs)``). Any other ``flat_apply`` is left to the re-trace.
test_decomposition_skip.py checks that the imported IR is the same.
"""

import torch
import torch.utils._pytree as pytree
from torch import fx

FLAT_APPLY = torch.ops.higher_order.flat_apply
MOD_INDEX = "torch._dynamo._trace_wrapped_higher_order_op.ModIndex"


def _constant(gm: fx.GraphModule, arg):
    """The value of a get_attr argument, or the argument itself."""
    if isinstance(arg, fx.Node):
        return getattr(gm, arg.target, None) if arg.op == "get_attr" else None
    return arg


def _function(gm: fx.GraphModule, spec):
    """What a flat_apply's function argument holds: an OpOverload or the
    held function, else None."""
    value = _constant(gm, spec)
    if isinstance(value, torch._ops.OpOverload):
        return value
    if isinstance(value, pytree.TreeSpec):
        try:
            return getattr(pytree.tree_unflatten([], value), "func", None)
        except Exception:
            return None
    return None


def _direct_call(gm: fx.GraphModule, node: fx.Node):
    """(op, args, kwargs) that ``node`` stands for, or None."""
    if len(node.args) < 2 or set(node.kwargs) - {"checked_output"}:
        return None
    func = _function(gm, node.args[0])
    in_spec = _constant(gm, node.args[1])
    if func is None or not isinstance(in_spec, pytree.TreeSpec):
        return None
    try:
        args, kwargs = pytree.tree_unflatten(list(node.args[2:]), in_spec)
    except Exception:  # not the (args, kwargs) pair it should be
        return None
    if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
        return None
    if isinstance(func, torch._ops.OpOverload):
        return func, tuple(args), kwargs
    from torch.export.custom_ops import _call_custom_autograd_function_in_pre_dispatch as custom

    if (func is custom and not kwargs and len(args) == 3 and args[0] == MOD_INDEX
            and isinstance(args[2], (list, tuple))):
        return torch.ops.aten.index.Tensor, (args[1], list(args[2])), {}
    return None


def inline_flat_apply_calls(gm: fx.GraphModule) -> int:
    """Rewrites those flat_apply calls of ``gm`` and its submodules as direct
    calls and erases the get_attr constants only they used; returns how many
    (their graph modules are recompiled)."""
    inlined = 0
    for sub in gm.modules():
        if not isinstance(sub, fx.GraphModule):
            continue
        here = 0
        for n in list(sub.graph.nodes):
            if n.op != "call_function" or n.target is not FLAT_APPLY:
                continue
            call = _direct_call(sub, n)
            if call is None:
                continue
            specs = [a for a in n.args[:2] if isinstance(a, fx.Node)]
            n.target, n.args, n.kwargs = call
            for spec in specs:
                if spec.op == "get_attr" and not spec.users:
                    sub.graph.erase_node(spec)
            here += 1
        if here:
            sub.recompile()
        inlined += here
    return inlined
