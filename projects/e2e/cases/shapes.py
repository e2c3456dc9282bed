"""Shapes and options: M != N, decode (M=1), Ev != E, scale, batch,
non-multiple-of-block lengths, dynamic sequence length, lse / max_scores."""

import torch
from torch.export import Dim

from ..registry import alibi_slopes, qkv, randn, register_case
from .common import AuxRequest, Flex, FlexMax, block_mask, causal_mask, flex_attention


@register_case(inputs=lambda: qkv(1, 8, 1, 64, N=512))
def decode_m1_n512():
    """Decode-like: one query row against 512 keys."""
    return Flex()


def _end_aligned_causal(offset):
    def mask(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return mask


@register_case(inputs=lambda: qkv(1, 4, 32, 32, N=96))
def m32_n96_end_causal():
    """M=32 queries, N=96 keys, causal aligned at the end (kv <= q + 64)."""
    return Flex(block_mask=block_mask(_end_aligned_causal(64), 32, N=96, block=16))


@register_case(inputs=lambda: qkv(1, 4, 48, 32, Ev=16))
def ev16_e32_causal():
    """Value head dim 16 != query/key head dim 32."""
    return Flex(block_mask=block_mask(causal_mask, 48))


@register_case(inputs=lambda: qkv(1, 4, 64, 64, Ev=24, N=80))
def ev24_e64_m64_n80():
    """Ev=24, E=64, M=64, N=80, dense with lse."""
    return Flex(aux="lse")


@register_case(inputs=lambda: qkv(1, 4, 64, 32))
def scale_0_5():
    """Non-default scale 0.5 (> 1/sqrt(32)) with causal mask."""
    return Flex(scale=0.5, block_mask=block_mask(causal_mask, 64))


@register_case(inputs=lambda: qkv(1, 2, 32, 16))
def scale_1_with_score_mod():
    """scale=1.0 with a score_mod (scale applied before score_mod)."""
    return Flex(scale=1.0, score_mod=lambda s, b, h, m, n: torch.tanh(s / 3.0) * 3.0)


@register_case(inputs=lambda: qkv(3, 4, 32, 16))
def batch3_causal():
    """B=3, causal."""
    return Flex(block_mask=block_mask(causal_mask, 32))


@register_case(inputs=lambda: qkv(1, 3, 37, 24))
def odd_lengths_causal():
    """S=37, E=24 (not multiples of anything), H=3, causal."""
    return Flex(block_mask=block_mask(causal_mask, 37, block=16))


@register_case(inputs=lambda: qkv(1, 8, 128, 64))
def s128_d64_causal():
    """The largest shape: S=128, D=64, H=8, causal with 32-blocks."""
    return Flex(block_mask=block_mask(causal_mask, 128, block=32))


class UsesLse(torch.nn.Module):
    """Returns lse and uses it: out * sigmoid(lse) (as in split-KV merging)."""

    def __init__(self):
        super().__init__()
        self.bm = block_mask(causal_mask, 48)

    def forward(self, q, k, v):
        out, aux = flex_attention(q, k, v, block_mask=self.bm, return_aux=AuxRequest(lse=True))
        return out * torch.sigmoid(aux.lse).unsqueeze(-1), aux.lse


@register_case(inputs=lambda: qkv(1, 4, 48, 32))
def lse_returned_and_used():
    """return_aux lse; the output uses lse (natural log units)."""
    return UsesLse()


@register_case(inputs=lambda: tuple(t * 2 for t in qkv(1, 4, 48, 16)))
def max_scores_softcap():
    """max_scores (via the HOP, see common.py) with softcap + causal: the row max of modded, masked scores."""
    return FlexMax(score_mod=lambda s, b, h, m, n: 3.0 * torch.tanh(s / 3.0), block_mask=block_mask(causal_mask, 48))


@register_case(inputs=lambda: qkv(2, 2, 32, 16))
def lse_and_max_scores():
    """Both lse and max_scores requested (HOP), with fully masked rows 0..7."""
    return FlexMax(block_mask=block_mask(_rows_from_8, 32, block=8), both=True)


def _rows_from_8(b, h, q_idx, kv_idx):
    return (q_idx >= 8) & (kv_idx <= q_idx)


def _dyn_inputs():
    return [qkv(1, 4, 32, 16), qkv(1, 4, 48, 16), qkv(1, 4, 17, 16)]


def _dyn_shapes():
    S = Dim("S", min=2, max=256)
    return {"q": {2: S}, "k": {2: S}, "v": {2: S}}


class DynCausalAlibi(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(4))

    def forward(self, q, k, v):
        def mod(score, b, h, q_idx, kv_idx):
            s = score + self.slopes[h] * (kv_idx - q_idx)
            return torch.where(q_idx >= kv_idx, s, -float("inf"))

        return flex_attention(q, k, v, score_mod=mod)


@register_case(inputs=_dyn_inputs, dynamic_shapes=_dyn_shapes, tags=("dynamic",))
def dynamic_seq_len_dense():
    """Dynamic sequence length (S = 32, 48, 17 through one compiled function)."""
    return Flex()


@register_case(inputs=_dyn_inputs, dynamic_shapes=_dyn_shapes, tags=("dynamic",))
def dynamic_seq_len_causal_alibi():
    """Dynamic S with causal-by-score_mod + ALiBi buffer."""
    return DynCausalAlibi()
