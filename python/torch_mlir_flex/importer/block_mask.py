"""Removal of the dead BlockMask computation from FX graphs.

``torch.ops.higher_order.flex_attention`` receives the BlockMask as a 17-tuple
(``BlockMask.as_tuple()``): slots 2..13 are the block-sparsity tensors.  The
flex IR contract does not carry them: the meaning of the mask is fully given by
``mask_mod`` (the later tiled lowering re-derives block classes from it).  When
the mask is built inside ``forward`` (and even for ``block_mask=None``, which
builds a dense mask), the graph contains the whole computation (arange, vmap
artifacts, ``aten.sort.stable``, ``aten.index_put``) that later makes
``torchdynamo-export-to-torch-backend-pipeline`` fail.

``strip_block_mask_tensors`` replaces the tensor slots by ``None`` and then
erases every node that only existed to compute them (including the
``_assert_tensor_metadata`` checks on those values).  Nodes that are still used
elsewhere are kept; nodes unrelated to block masks are never touched.
"""

from typing import List, Set

import torch
from torch import fx

from .errors import FlexImportError, node_where

FLEX_HOP = torch.ops.higher_order.flex_attention
BLOCK_MASK_TUPLE_LEN = 17
BLOCK_MASK_TENSOR_SLOTS = range(2, 14)

# Side-effect-only checks that may be erased together with the value they check.
_ASSERT_TARGETS = {
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_async.msg,
    torch.ops.aten._assert_async.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
}


def is_flex_node(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is FLEX_HOP


def flex_nodes(graph: fx.Graph) -> List[fx.Node]:
    return [n for n in graph.nodes if is_flex_node(n)]


def _block_mask_arg(node: fx.Node):
    if len(node.args) < 5 or not isinstance(node.args[4], tuple):
        raise FlexImportError(
            f"flex_attention {node_where(node)}: expected the BlockMask as a "
            f"{BLOCK_MASK_TUPLE_LEN}-tuple in argument 4, got "
            f"{type(node.args[4]).__name__ if len(node.args) > 4 else 'nothing'}. "
            "This importer supports the torch 2.13 flex_attention HOP layout."
        )
    bm = node.args[4]
    if len(bm) != BLOCK_MASK_TUPLE_LEN:
        raise FlexImportError(
            f"flex_attention {node_where(node)}: BlockMask tuple has {len(bm)} "
            f"entries, expected {BLOCK_MASK_TUPLE_LEN} (torch 2.13 layout). "
            "Update torch_mlir_flex.importer for this torch version."
        )
    return bm


def strip_block_mask_tensors(graph: fx.Graph) -> int:
    """Drops BlockMask tensors from every flex HOP node and erases their
    now-dead producers.  Idempotent.  Returns the number of erased nodes."""
    dropped: List[fx.Node] = []
    for node in flex_nodes(graph):
        bm = _block_mask_arg(node)
        new_bm = list(bm)
        changed = False
        for i in BLOCK_MASK_TENSOR_SLOTS:
            v = bm[i]
            if isinstance(v, fx.Node):
                dropped.append(v)
            if isinstance(v, (fx.Node, torch.Tensor)):
                new_bm[i] = None
                changed = True
        if changed:
            args = list(node.args)
            args[4] = tuple(new_bm)
            node.args = tuple(args)
    if not dropped:
        return 0
    return _erase_dead_slice(graph, dropped)


def _erase_dead_slice(graph: fx.Graph, seeds: List[fx.Node]) -> int:
    # Candidates: the backward slice of the dropped values.
    candidates: Set[fx.Node] = set()
    work = list(seeds)
    while work:
        n = work.pop()
        if n in candidates or n.op in ("placeholder", "output"):
            continue
        candidates.add(n)
        work.extend(n.all_input_nodes)

    # Live: backward closure of the output and of side-effecting nodes that
    # are not mere asserts.
    live: Set[fx.Node] = set()
    roots = [
        n
        for n in graph.nodes
        if n.op == "output"
        or (n.op == "call_function" and n.target not in _ASSERT_TARGETS and _impure(n))
    ]
    work = roots
    while work:
        n = work.pop()
        if n in live:
            continue
        live.add(n)
        work.extend(n.all_input_nodes)

    # Asserts that check only dead candidates die with them.
    dead_asserts = [
        n
        for n in graph.nodes
        if n.op == "call_function"
        and n.target in _ASSERT_TARGETS
        and n.all_input_nodes
        and all(i in candidates and i not in live for i in n.all_input_nodes)
    ]
    erased = 0
    for n in dead_asserts:
        graph.erase_node(n)
        erased += 1
    for n in reversed(list(graph.nodes)):
        if n in candidates and n not in live and not n.users:
            graph.erase_node(n)
            erased += 1
    return erased


def _impure(n: fx.Node) -> bool:
    try:
        return n.is_impure()
    except Exception:  # pragma: no cover - conservative
        return True
