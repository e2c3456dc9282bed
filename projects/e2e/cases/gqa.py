"""Grouped-query and multi-query attention (Hq = G * Hkv)."""

import torch

from ..registry import alibi_slopes, qkv, register_case
from .common import Flex, block_mask, causal_mask, flex_attention


@register_case(inputs=lambda: qkv(1, 8, 64, 32, Hkv=2))
def gqa_4to1_causal():
    """GQA 4:1 (Hq=8, Hkv=2) with a causal mask."""
    return Flex(block_mask=block_mask(causal_mask, 64), enable_gqa=True)


@register_case(inputs=lambda: qkv(2, 8, 32, 16, Hkv=1 * 1))
def mqa():
    """MQA (Hkv=1), dense, B=2."""
    return Flex(enable_gqa=True)


@register_case(inputs=lambda: qkv(1, 16, 48, 16, Hkv=2))
def gqa_8to1_causal():
    """GQA 8:1 (Hq=16, Hkv=2) with a causal mask."""
    return Flex(block_mask=block_mask(causal_mask, 48), enable_gqa=True)


class GqaAlibi(torch.nn.Module):
    """GQA 4:1 with ALiBi: the score_mod sees the query head h."""

    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(8))
        self.bm = block_mask(causal_mask, 64)

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        return flex_attention(q, k, v, score_mod=alibi, block_mask=self.bm, enable_gqa=True)


@register_case(inputs=lambda: qkv(1, 8, 64, 32, Hkv=2))
def gqa_alibi_causal():
    """GQA 4:1 + ALiBi by query head + causal."""
    return GqaAlibi()


def _head_mask(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) | (h >= 4)


@register_case(inputs=lambda: qkv(1, 8, 32, 16, Hkv=2))
def gqa_head_dependent_mask():
    """GQA 4:1 with a mask_mod depending on the query head."""
    return Flex(block_mask=block_mask(_head_mask, 32, H=8), enable_gqa=True, aux="lse")
