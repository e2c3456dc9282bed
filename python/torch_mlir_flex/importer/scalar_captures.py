"""SymInts a score_mod / mask_mod captures, as 0-d tensors.

A modifier may close over a Python int that is dynamic in the exported
program (transformers' decode mask: ``kv_idx <= q_idx + offset`` with the
past length as `offset`; a sliding window that changes per call). The
flex_attention HOP then carries a SymInt among its modifier buffers and the
modifier graph a ``Sym(s6)`` placeholder. `scalar_captures_to_tensors`
turns each into a runtime 0-d int64 tensor (``aten.scalar_tensor`` before
the call), which the importer passes like any captured tensor: an operand
of ``flex.attention`` whose value is read per call. Inside the modifier the
int is then a 0-d tensor: ``q_idx + offset`` computes in int64 instead of
int32 (the same values for any offset below 2**31).
"""

import torch
from torch import fx

from .block_mask import is_flex_node
from .hop_layout import layout_of


def _val(n):
    return n.meta.get("val", n.meta.get("example_value")) if isinstance(n, fx.Node) else n


def _fake_mode(graph):
    from torch._guards import detect_fake_mode

    return detect_fake_mode([_val(n) for n in graph.nodes if isinstance(_val(n), torch.Tensor)])


# Leading (score/index) arguments of the modifier the buffers of a slot feed.
_NUM_LEADING = {"score": 5, "mask": 4}


def scalar_captures_to_tensors(gm: fx.GraphModule) -> int:
    """Rewrites every SymInt modifier buffer of the flex_attention calls of
    `gm`; returns how many."""
    done = 0
    fake_mode = None
    for node in list(gm.graph.nodes):
        if not is_flex_node(node):
            continue
        args = list(node.args)
        lay = layout_of(node)
        for kind, slot in (("score", lay.score_bufs), ("mask", lay.mask_bufs)):
            if slot >= len(args):
                continue
            bufs = list(args[slot])
            sub = _modifier(gm, args, lay, kind)
            changed = False
            for i, b in enumerate(bufs):
                if not isinstance(b, fx.Node) or not isinstance(_val(b), torch.SymInt):
                    continue
                if fake_mode is None:
                    fake_mode = _fake_mode(gm.graph)
                with gm.graph.inserting_before(node):
                    t = gm.graph.call_function(torch.ops.aten.scalar_tensor.default, (b,),
                                               {"dtype": torch.int64})
                with fake_mode:
                    t.meta["val"] = torch.empty((), dtype=torch.int64)
                bufs[i] = t
                changed = True
                if sub is not None:
                    _placeholder_to_tensor(sub, _NUM_LEADING[kind] + i, fake_mode)
                done += 1
            if changed:
                args[slot] = tuple(bufs)
        node.args = tuple(args)
    if done:
        gm.recompile()
    return done


def _modifier(gm, args, lay, kind):
    """The modifier submodule whose placeholders the `kind` buffers feed."""
    ref = args[lay.score_mod] if kind == "score" else args[lay.block_mask][-1]
    if isinstance(ref, fx.Node) and ref.op == "get_attr":
        return getattr(gm, ref.target, None)
    return None


def _placeholder_to_tensor(sub, index, fake_mode):
    phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
    if index < len(phs):
        with fake_mode:
            phs[index].meta["val"] = torch.empty((), dtype=torch.int64)
        sub.recompile()
