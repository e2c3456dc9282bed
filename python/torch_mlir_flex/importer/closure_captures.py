"""Rewrites of an ExportedProgram that avoid torch.export failures on tensors
captured by flex_attention modifiers through Python closures.

``run_decompositions`` (torch 2.13) mishandles two forms of closure capture:
* a closure tensor becomes a *lifted tensor constant* passed to the modifier;
  nested lookups on it (``offs[doc[q]]``) then import with garbage indices,
  nondeterministically, and chained ones (``bias[b][q]``) fail in
  ``setStorage``.  The same tensor as a buffer works, so
  ``lift_modifier_constants_to_buffers`` turns those inputs into
  non-persistent buffers (the value stays in ``ExportedProgram.constants``).
* a Python number next to tensor indices (``c2[h, 2]``) becomes a 0-d tensor
  constant *inside* the modifier (``get_attr`` + ``lift_fresh_copy``), which
  fails with "Attempting to use FunctionalTensor on its own".
  ``inline_scalar_constants`` replaces such a constant by
  ``aten.scalar_tensor(value, dtype=...)``.
"""

import torch
from torch import fx
from torch.export import ExportedProgram

from .block_mask import flex_nodes
from .hop_layout import layout_of
from .modifier_ops import modifier_submodules


def _modifier_buffer_names(graph: fx.Graph) -> set:
    names = set()
    for n in flex_nodes(graph):
        lay = layout_of(n)
        for bufs in (n.args[lay.score_bufs], n.args[lay.mask_bufs]):
            names.update(b.name for b in bufs if isinstance(b, fx.Node))
    return names


def forget_capture_constant_values(prog: ExportedProgram) -> int:
    """Clears the recorded real value (``FakeTensor.constant``) of the fake
    tensors of modifier-captured placeholders, in place; returns how many."""
    used = _modifier_buffer_names(prog.graph)
    count = 0
    for n in prog.graph.nodes:
        val = n.meta.get("val") if n.op == "placeholder" and n.name in used else None
        if getattr(val, "constant", None) is not None:
            val.constant = None
            count += 1
    return count


def inline_scalar_constants(prog) -> int:
    """0-d tensor constants read by ``get_attr`` inside flex modifiers (of an
    ExportedProgram or a GraphModule) become ``aten.scalar_tensor`` calls;
    returns how many."""
    count = 0
    for _, _, gm in modifier_submodules(prog.graph):
        for n in list(gm.graph.nodes):
            if n.op != "get_attr":
                continue
            t = getattr(gm, n.target, None)
            if not isinstance(t, torch.Tensor) or t.dim() != 0:
                continue
            with gm.graph.inserting_before(n):
                new = gm.graph.call_function(torch.ops.aten.scalar_tensor.default, (t.item(),),
                                             {"dtype": t.dtype})
            new.meta = dict(n.meta)
            n.replace_all_uses_with(new)
            gm.graph.erase_node(n)
            if not any(u.op == "get_attr" and u.target == n.target for u in gm.graph.nodes):
                _delete_attr(gm, n.target)
            count += 1
        _drop_unread_tensors(gm)
        gm.recompile()
    return count


def _drop_unread_tensors(gm: fx.GraphModule):
    """Deletes the tensor attributes of a modifier that no ``get_attr`` reads:
    torch's flex backward traces the joint graph under its fake mode and may
    leave the forward's constant there as a fake tensor nothing uses, which
    would reach the compile caches' keys as a buffer."""
    read = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for name, _ in list(gm.named_buffers(recurse=False)):
        if name not in read:
            delattr(gm, name)


def _delete_attr(gm: fx.GraphModule, target: str):
    *path, name = target.split(".")
    owner = gm
    for p in path:
        owner = getattr(owner, p)
    delattr(owner, name)
