"""Argument positions of the two flex higher-order ops (torch 2.13).

    flex_attention(q, k, v, score_mod, block_mask, scale, kernel_options,
                   score_mod_other_buffers, mask_mod_other_buffers)
    flex_attention_backward(q, k, v, out, logsumexp, grad_out, grad_logsumexp,
                   fw_graph, joint_graph, block_mask, scale, kernel_options,
                   score_mod_other_buffers, mask_mod_other_buffers)

The forward's score_mod and the backward's fw_graph are the same function;
the passes that look at modifiers and their buffers read both ops through
`layout_of`.
"""

from dataclasses import dataclass
from typing import Optional

import torch
from torch import fx

FLEX_HOP = torch.ops.higher_order.flex_attention
FLEX_BACKWARD_HOP = torch.ops.higher_order.flex_attention_backward


@dataclass(frozen=True)
class HopLayout:
    num_args: int
    score_mod: int
    block_mask: int
    scale: int
    kernel_options: int
    score_bufs: int
    mask_bufs: int
    joint: Optional[int] = None


FORWARD = HopLayout(num_args=9, score_mod=3, block_mask=4, scale=5, kernel_options=6,
                    score_bufs=7, mask_bufs=8)
BACKWARD = HopLayout(num_args=14, score_mod=7, block_mask=9, scale=10, kernel_options=11,
                     score_bufs=12, mask_bufs=13, joint=8)


def layout_of(node: fx.Node) -> Optional[HopLayout]:
    """The layout of a flex HOP call, or None for any other node."""
    if node.op != "call_function":
        return None
    if node.target is FLEX_HOP:
        return FORWARD
    if node.target is FLEX_BACKWARD_HOP:
        return BACKWARD
    return None


def is_backward(node: fx.Node) -> bool:
    return layout_of(node) is BACKWARD
