"""Erasing dead mask construction from an exported graph before its re-trace.

After ``strip_block_mask_tensors``, the nodes of a ``create_block_mask``
inside ``forward`` (or of the dense BlockMask that ``block_mask=None``
builds) compute nothing an output uses, yet some stay: vmap's bookkeeping
calls (``_vmap_decrement_nesting`` has no users, so no backward slice reaches
it) and ``index_put_`` into a fresh tensor (a mutation, hence a root of the
strip's liveness).  ``run_decompositions`` would re-trace all of them through
AOTAutograd only for them to be dropped again: about half of the import of a
document mask (0.25 -> 0.15 s at S=1024, D=256).

``erase_dead_code`` erases every ``call_function`` node that the graph's
output does not need (then the ``get_attr`` nodes left unread), when each
side effect among them is harmless:
in-place ops on dead tensors that no live node aliases, and asserts.  When
any node of vmap's bookkeeping (``torch._functorch.predispatch``) is live,
or a dead node has another side effect, it erases nothing.
"""

import operator
from typing import Set

import torch
from torch import fx

from .block_mask import _ASSERT_TARGETS, backward_closure

_VMAP_MODULE = "torch._functorch.predispatch"


def erase_dead_code(graph: fx.Graph) -> int:
    """Erases the nodes of ``graph`` its output does not need (see the module
    docstring for when); returns how many."""
    live = backward_closure(n for n in graph.nodes if n.op == "output")
    if any(_is_vmap(n) for n in live):
        return 0
    dead = [n for n in graph.nodes if n.op == "call_function" and n not in live]
    dead_set = set(dead)
    if not all(_harmless(n, dead_set) for n in dead):
        return 0
    for n in reversed(dead):
        graph.erase_node(n)
    # then the constants only they read (flat_apply's function specs)
    unread = [n for n in graph.nodes if n.op == "get_attr" and not n.users]
    for n in unread:
        graph.erase_node(n)
    return len(dead) + len(unread)


def _is_vmap(n: fx.Node) -> bool:
    return n.op == "call_function" and getattr(n.target, "__module__", None) == _VMAP_MODULE


def _harmless(n: fx.Node, dead: Set[fx.Node]) -> bool:
    """True if erasing the dead node ``n`` drops no effect anything observes."""
    if n.target in _ASSERT_TARGETS or _is_vmap(n):
        return True
    if isinstance(n.target, torch._ops.OpOverload):
        if torch.Tag.nondeterministic_seeded in n.target.tags:
            return False  # erasing it would move the random stream
        if n.target._schema.is_mutable:
            return all(_fresh_and_dead(a, dead) for a in _written_args(n))
    try:
        return not n.is_impure()
    except Exception:  # pragma: no cover - conservative
        return False


def _fresh_and_dead(a, dead: Set[fx.Node]) -> bool:
    """True if ``a`` is a dead tensor whose storage no live node sees: its
    chain of views (and multi-result getitems) ends at a dead op that
    allocates, e.g. ``new_zeros``; not a slice of a captured mask tensor
    that ``keep[:8] = True`` fills."""
    while isinstance(a, fx.Node) and a in dead:
        t = a.target
        if t is operator.getitem:
            a = a.args[0]
        elif not isinstance(t, torch._ops.OpOverload):
            return False  # e.g. vmap's _add_batch_dim: may alias its input
        elif any(r.alias_info is not None for r in t._schema.returns):
            a = a.args[0]  # a view or an in-place result: its base
        else:
            return True
    return False


def _written_args(n: fx.Node):
    schema = n.target._schema
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        if i < len(n.args):
            yield n.args[i]
        elif arg.name in n.kwargs:
            yield n.kwargs[arg.name]
