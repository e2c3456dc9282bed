"""Decompositions of ``torch.library`` custom ops found in an exported program.

torch-mlir imports an op it does not know as an opaque ``torch.operator``,
which cannot be lowered.  Before import, every custom op (namespace other
than aten / prims / higher_order) of the graph and of its submodules (flex
modifiers) that has a decomposition gets it added to the decomposition table:
* one registered with ``torch._decomp.register_decomposition`` (any table);
* a ``CompositeImplicitAutograd`` kernel (``Library.impl(..., "CompositeImplicitAutograd")``),
  run through ``OpOverload.decompose``.
Ops without either stay opaque; the frontend then names them and says how to
register a decomposition (``CUSTOM_OP_HINT``).
"""

from typing import Any, Callable, Dict, Iterator

import torch
from torch import fx

from .graph_walk import call_nodes

BUILTIN_NAMESPACES = ("aten", "prims", "higher_order")
CUSTOM_OP_HINT = (
    "register a decomposition with torch._decomp.register_decomposition(<op>) or a "
    "CompositeImplicitAutograd kernel (torch.library.Library(ns, 'FRAGMENT')"
    ".impl(name, fn, 'CompositeImplicitAutograd'))")


def _custom_ops(gm: fx.GraphModule) -> Iterator[torch._ops.OpOverload]:
    for _, n in call_nodes(gm):
        t = n.target
        if isinstance(t, torch._ops.OpOverload) and t.namespace not in BUILTIN_NAMESPACES:
            yield t


def _registered_decomposition(op) -> Callable:
    from torch._decomp import global_decomposition_table

    for table in global_decomposition_table.values():
        if op in table:
            return table[op]
    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return op.decompose
    return None


def custom_op_decompositions(gm: fx.GraphModule) -> Dict[Any, Callable]:
    """{op: decomposition} for the custom ops of ``gm`` that have one."""
    table = {}
    for op in _custom_ops(gm):
        fn = _registered_decomposition(op)
        if fn is not None:
            table[op] = fn
    return table
