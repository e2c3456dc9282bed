"""score_mod cases: ALiBi (captured buffer), relative position bias
(captured parameter), tanh softcap, modifiers using b/h/q_idx/kv_idx."""

import torch

from ..registry import alibi_slopes, qkv, register_case
from .common import Flex, block_mask, causal_mask, flex_attention


class Alibi(torch.nn.Module):
    """ALiBi with slopes held in a registered buffer."""

    def __init__(self, H, S, causal=True):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(H))
        self.bm = block_mask(causal_mask, S) if causal else None

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        return flex_attention(q, k, v, score_mod=alibi, block_mask=self.bm)


@register_case(inputs=lambda: qkv(1, 8, 64, 32))
def alibi_causal():
    """ALiBi (buffer slopes[h]) + causal mask."""
    return Alibi(8, 64)


@register_case(inputs=lambda: qkv(2, 4, 48, 16))
def alibi_dense():
    """ALiBi without a mask."""
    return Alibi(4, 48, causal=False)


class RelPosBias(torch.nn.Module):
    """T5-style relative position bias: a learned table[h, clamp(q-kv)+R]."""

    def __init__(self, H, R=16):
        super().__init__()
        self.R = R
        self.table = torch.nn.Parameter(torch.randn(H, 2 * R + 1) * 0.5)

    def forward(self, q, k, v):
        R = self.R

        def rel(score, b, h, q_idx, kv_idx):
            d = torch.clamp(q_idx - kv_idx, -R, R) + R
            return score + self.table[h, d]

        return flex_attention(q, k, v, score_mod=rel)


@register_case(inputs=lambda: qkv(1, 4, 64, 32))
def relative_position_bias():
    """Parameter table indexed by clamp(q_idx - kv_idx) (captured parameter)."""
    return RelPosBias(4)


def softcap(cap):
    def mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return mod


@register_case(inputs=lambda: tuple(t * 3 for t in qkv(1, 4, 64, 32)))
def softcap_tanh():
    """tanh soft-cap 5 (inputs scaled by 3 so the cap bites)."""
    return Flex(score_mod=softcap(5.0))


@register_case(inputs=lambda: tuple(t * 2 for t in qkv(1, 4, 64, 32)))
def softcap_causal_lse():
    """Soft-cap + causal, returning lse (catches mask-before-score_mod bugs)."""
    return Flex(score_mod=softcap(4.0), block_mask=block_mask(causal_mask, 64), aux="lse")


def _bhqk(score, b, h, q_idx, kv_idx):
    return score * (1.0 + 0.25 * b) + 0.1 * h - 0.02 * torch.abs(q_idx - kv_idx) + 0.01 * ((q_idx + kv_idx) % 3)


@register_case(inputs=lambda: qkv(3, 4, 32, 16))
def score_mod_b_h_q_kv():
    """A score_mod that uses b, h, q_idx and kv_idx together."""
    return Flex(score_mod=_bhqk)


def _causal_score(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


@register_case(inputs=lambda: qkv(1, 2, 48, 16))
def causal_via_score_mod():
    """Causal masking done in score_mod (returns -inf), no block mask."""
    return Flex(score_mod=_causal_score, aux="lse")


def _nonlinear(score, b, h, q_idx, kv_idx):
    return torch.sigmoid(score) * 4.0 + torch.exp(-score * score)


@register_case(inputs=lambda: qkv(1, 4, 64, 32))
def nonlinear_score_mod_causal():
    """Non-linear score_mod (sigmoid, exp) with a causal mask."""
    return Flex(score_mod=_nonlinear, block_mask=block_mask(causal_mask, 64, block=16))
