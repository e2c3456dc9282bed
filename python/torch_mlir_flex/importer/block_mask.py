"""BlockMask tensors of flex HOP nodes: which are kept, and removal of the rest.

``torch.ops.higher_order.flex_attention`` receives the BlockMask as a 17-tuple
(``BlockMask.as_tuple()``): slots 2..5 are the forward block tensors
(``kv_num_blocks``, ``kv_indices``, ``full_kv_num_blocks``,
``full_kv_indices``), slots 6..13 the backward ones (q-side and dq orders),
14/15 the block sizes, 16 the mask_mod.

Rule (``keeps_block_tensors``): the forward block tensors are kept, and become
operands of the flex call (docs/importer.md), when

* they are given to the graph: graph inputs (a BlockMask passed to
  ``forward``), lifted constants, parameters/buffers or tensor attributes
  (a BlockMask built outside ``forward``, e.g. ``BlockMask.from_kv_blocks``);
* or they are computed in the graph but the mask_mod is the noop mask and the
  block sizes are not torch's dense sentinel (1 << 30): the tensors are then
  the only meaning of the mask (``from_kv_blocks(..., mask_mod=None)`` on a
  top-k block selection inside ``forward``).

Otherwise (``create_block_mask(mask_mod, ...)`` inside ``forward``, and the
dense mask that ``block_mask=None`` builds) they are dropped: mask_mod alone
gives the meaning, and the dead computation (arange, vmap artifacts,
``aten.sort.stable``, ``aten.index_put``) would make
``torchdynamo-export-to-torch-backend-pipeline`` fail. The backward slots are
always dropped.

``strip_block_mask_tensors`` replaces dropped slots by ``None`` and erases
every node that only existed to compute them (including the
``_assert_tensor_metadata`` checks on those values).  Nodes that are still
used elsewhere are kept; nodes unrelated to block masks are never touched.
"""

from typing import List, Set

import torch
from torch import fx

from .errors import FlexImportError, node_where

from .hop_layout import FLEX_HOP, layout_of  # noqa: F401  (FLEX_HOP re-exported)
BLOCK_MASK_TUPLE_LEN = 17
BLOCK_MASK_TENSOR_SLOTS = range(2, 14)
# kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices.
KV_BLOCK_SLOTS = range(2, 6)
Q_BLOCK_SIZE_SLOT, KV_BLOCK_SIZE_SLOT, MASK_MOD_SLOT = 14, 15, 16
# torch's block size of the dense BlockMask that block_mask=None builds.
DENSE_BLOCK_SIZE = 1 << 30

# Side-effect-only checks that may be erased together with the value they check.
_ASSERT_TARGETS = {
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_async.msg,
    torch.ops.aten._assert_async.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
}


def is_flex_node(node: fx.Node) -> bool:
    """A flex_attention or flex_attention_backward call (hop_layout.py)."""
    return layout_of(node) is not None


def flex_nodes(graph: fx.Graph) -> List[fx.Node]:
    return [n for n in graph.nodes if is_flex_node(n)]


def _block_mask_arg(node: fx.Node):
    slot = layout_of(node).block_mask
    if len(node.args) <= slot or not isinstance(node.args[slot], tuple):
        raise FlexImportError(
            f"flex_attention {node_where(node)}: expected the BlockMask as a "
            f"{BLOCK_MASK_TUPLE_LEN}-tuple in argument {slot}, got "
            f"{type(node.args[slot]).__name__ if len(node.args) > slot else 'nothing'}. "
            "This importer supports the torch 2.13 flex_attention HOP layout."
        )
    bm = node.args[slot]
    if len(bm) != BLOCK_MASK_TUPLE_LEN:
        raise FlexImportError(
            f"flex_attention {node_where(node)}: BlockMask tuple has {len(bm)} "
            f"entries, expected {BLOCK_MASK_TUPLE_LEN} (torch 2.13 layout). "
            "Update torch_mlir_flex.importer for this torch version."
        )
    return bm


def _given(v) -> bool:
    """A value that is not computed in the graph: an input, a lifted
    constant, a parameter/buffer or a tensor attribute."""
    return isinstance(v, torch.Tensor) or (
        isinstance(v, fx.Node) and v.op in ("placeholder", "get_attr"))


def _has_noop_mask(node: fx.Node, bm) -> bool:
    from .modifiers import is_noop_mask

    mask = bm[MASK_MOD_SLOT]
    if mask is None:
        return True
    root = node.graph.owning_module
    gm = getattr(root, mask.target, None) if isinstance(mask, fx.Node) and mask.op == "get_attr" else None
    return isinstance(gm, fx.GraphModule) and is_noop_mask(gm)


def keeps_block_tensors(node: fx.Node) -> bool:
    """True when the forward block tensors of the flex node ``node`` are kept
    (see the module docstring for the rule)."""
    bm = _block_mask_arg(node)
    kv = [bm[i] for i in KV_BLOCK_SLOTS if bm[i] is not None]
    if not kv or not all(isinstance(v, (fx.Node, torch.Tensor)) for v in kv):
        return False
    dense = all(bm[i] == DENSE_BLOCK_SIZE for i in (Q_BLOCK_SIZE_SLOT, KV_BLOCK_SIZE_SLOT))
    if dense and _has_noop_mask(node, bm):
        # block_mask=None: one block keeps every point, also when the
        # tensors are inputs (AOTAutograd's graphs save and pass them).
        return False
    if all(_given(v) for v in kv):
        return True
    return not dense and _has_noop_mask(node, bm)


def strip_block_mask_tensors(graph: fx.Graph) -> int:
    """Drops the BlockMask tensors that are not kept (``keeps_block_tensors``)
    from every flex HOP node and erases their now-dead producers.
    Idempotent.  Returns the number of erased nodes."""
    dropped: List[fx.Node] = []
    for node in flex_nodes(graph):
        bm = _block_mask_arg(node)
        new_bm = list(bm)
        changed = False
        keep = KV_BLOCK_SLOTS if keeps_block_tensors(node) else ()
        for i in BLOCK_MASK_TENSOR_SLOTS:
            if i in keep:
                continue
            v = bm[i]
            if isinstance(v, fx.Node):
                dropped.append(v)
            if isinstance(v, (fx.Node, torch.Tensor)):
                new_bm[i] = None
                changed = True
        if changed:
            args = list(node.args)
            args[layout_of(node).block_mask] = tuple(new_bm)
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
    roots = [
        n
        for n in graph.nodes
        if n.op == "output"
        or (n.op == "call_function" and n.target not in _ASSERT_TARGETS and _impure(n))
    ]
    live = backward_closure(roots)

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


def backward_closure(roots) -> Set[fx.Node]:
    """``roots`` and every node they depend on."""
    closure: Set[fx.Node] = set()
    work = list(roots)
    while work:
        n = work.pop()
        if n not in closure:
            closure.add(n)
            work.extend(n.all_input_nodes)
    return closure


def _impure(n: fx.Node) -> bool:
    try:
        return n.is_impure()
    except Exception:  # pragma: no cover - conservative
        return True
