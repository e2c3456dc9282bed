"""The joint graph of a score_mod, as the backward op's `joint` function.

torch traces the gradient of score_mod (`create_fw_bw_graph`) into a graph

    joint(score, b, h, q_idx, kv_idx, grad, *captured)
        -> [grad_score, None, None, None, None, *grad_captured]

whose gradient into a captured tensor is `flex_lib.zeros_and_scatter(shape,
[i0, i1, ...], value)`: a zero tensor of the capture's shape with `value`
added at `[i0, i1, ...]` (a 0-d tensor captured whole: its gradient value
itself). Summed over every (b, h, q_idx, kv_idx), that is a scatter-add.
`flattened_joint` rewrites a copy of the graph to return, per point,

    (grad_score, value_0, i0_0, i0_1, ..., value_1, i1_0, ...)

for the captured tensors whose gradient the backward graph uses, in the
order of `grad_captures`: what `flex.attention_backward`'s joint region
yields.
"""

import copy
from typing import Sequence

import torch
from torch import fx

from .errors import FlexImportError

NUM_LEADING = 6  # score, b, h, q_idx, kv_idx, grad


def _val(n):
    return n.meta.get("val", n.meta.get("example_value")) if isinstance(n, fx.Node) else n


def _is_scatter(n) -> bool:
    return isinstance(n, fx.Node) and n.op == "call_function" and \
        str(n.target).startswith("flex_lib.zeros_and_scatter")


def flattened_joint(gm: fx.GraphModule, grad_captures: Sequence[int], where: str) -> fx.GraphModule:
    g = copy.deepcopy(gm)
    out = next(n for n in g.graph.nodes if n.op == "output")
    ret = out.args[0]
    if not isinstance(ret, (list, tuple)) or len(ret) < 5:
        raise FlexImportError(f"flex_attention_backward {where}: the joint graph returns {ret!r}; "
                              "expected [grad_score, None x 4, captured gradients...] (torch 2.13)")
    phs = [n for n in g.graph.nodes if n.op == "placeholder"]
    grad_score = ret[0]
    if not isinstance(grad_score, fx.Node):
        raise FlexImportError(f"flex_attention_backward {where}: the joint graph's score gradient "
                              f"is {grad_score!r}, not a tensor")
    flat = [grad_score]
    for j in grad_captures:
        r = ret[5 + j] if 5 + j < len(ret) else None
        cap = _val(phs[NUM_LEADING + j]) if NUM_LEADING + j < len(phs) else None
        if r is None or not isinstance(cap, torch.Tensor):
            raise FlexImportError(
                f"flex_attention_backward {where}: the backward uses the gradient of captured "
                f"tensor #{j} of score_mod, but the joint graph gives none")
        if _is_scatter(r):
            shape, indices, value = r.args
            if len(indices) != cap.dim() or not all(isinstance(i, fx.Node) for i in indices):
                raise FlexImportError(
                    f"flex_attention_backward {where}: score_mod reads captured tensor #{j} "
                    f"(shape {tuple(cap.shape)}) with {len(indices)} indices; its gradient needs "
                    "one 0-d index per dimension (index it down to a scalar)")
            flat += [value] + list(indices)
        elif cap.dim() == 0 and isinstance(r, fx.Node) and _val(r).dim() == 0:
            flat.append(r)
        else:
            raise FlexImportError(
                f"flex_attention_backward {where}: the gradient of captured tensor #{j} of "
                f"score_mod is {r.target if isinstance(r, fx.Node) else r!r}; supported: a "
                "captured tensor indexed down to a scalar, or a 0-d captured tensor")
    for v in flat:
        val = _val(v)
        if not isinstance(val, torch.Tensor) or val.dim() != 0:
            raise FlexImportError(f"flex_attention_backward {where}: joint graph value {v} is not a "
                                  "0-d tensor")
    out.args = (tuple(flat),)
    g.graph.eliminate_dead_code()
    g.recompile()
    return g
