"""Input dtypes: f16, bf16 attention; i32 / i64 / bool runtime buffers."""

import torch

from ..registry import TOL_BF16, TOL_F16, alibi_slopes, qkv, randn, register_case
from .common import Flex, block_mask, causal_mask, create_block_mask, flex_attention, outputs_differ


@register_case(inputs=lambda: qkv(1, 4, 64, 32, dtype=torch.float16), tol=TOL_F16)
def f16_causal():
    """f16 q/k/v, causal."""
    return Flex(block_mask=block_mask(causal_mask, 64))


@register_case(inputs=lambda: qkv(1, 4, 64, 32, dtype=torch.bfloat16), tol=TOL_BF16)
def bf16_causal():
    """bf16 q/k/v, causal."""
    return Flex(block_mask=block_mask(causal_mask, 64))


class Alibi16(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(8))

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        return flex_attention(q, k, v, score_mod=alibi, enable_gqa=True, return_lse=True)


@register_case(inputs=lambda: qkv(1, 8, 32, 16, Hkv=2, dtype=torch.float16), tol=TOL_F16)
def f16_gqa_alibi_lse():
    """f16, GQA 4:1, ALiBi (f32 buffer), lse returned (f32)."""
    return Alibi16()


@register_case(inputs=lambda: tuple(t * 2 for t in qkv(2, 4, 32, 16, dtype=torch.bfloat16)), tol=TOL_BF16)
def bf16_softcap_b2():
    """bf16, B=2, tanh softcap."""
    return Flex(score_mod=lambda s, b, h, m, n: 4.0 * torch.tanh(s / 4.0))


class DocIds32(torch.nn.Module):
    """Document mask from int32 ids plus a runtime f32 per-key bias (score buffer)."""

    def forward(self, q, k, v, doc_ids, key_bias):
        def mask(b, h, q_idx, kv_idx):
            return doc_ids[q_idx] == doc_ids[kv_idx]

        def mod(score, b, h, q_idx, kv_idx):
            return score + key_bias[kv_idx]

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, score_mod=mod, block_mask=bm)


def _doc32_inputs():
    q, k, v = qkv(1, 2, 32, 16)
    bias = randn(32)
    a = torch.tensor([0] * 10 + [1] * 22, dtype=torch.int32)
    b = torch.tensor([0] * 24 + [1] * 8, dtype=torch.int32)
    return [(q, k, v, a, bias), (q, k, v, b, bias)]


@register_case(inputs=_doc32_inputs, check=outputs_differ, tags=("runtime_buffer", "mask_in_forward"))
def int32_doc_ids_and_bias():
    """int32 document ids (mask buffer) + f32 runtime bias (score buffer), run twice."""
    return DocIds32()


class KeyPadding(torch.nn.Module):
    """Key padding from a runtime bool tensor [B, N] (True = keep)."""

    def forward(self, q, k, v, keep):
        def mask(b, h, q_idx, kv_idx):
            return keep[b, kv_idx]

        bm = create_block_mask(mask, q.shape[0], None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


def _pad_inputs():
    q, k, v = qkv(2, 2, 32, 16)
    keep = torch.ones(2, 32, dtype=torch.bool)
    keep[0, 20:] = False
    keep[1, 5:] = False
    keep2 = torch.ones(2, 32, dtype=torch.bool)
    return [(q, k, v, keep), (q, k, v, keep2)]


@register_case(inputs=_pad_inputs, check=outputs_differ, tags=("runtime_buffer", "mask_in_forward"))
def bool_key_padding():
    """Runtime bool key-padding mask, run with two different masks."""
    return KeyPadding()


class I64Positions(torch.nn.Module):
    """Runtime int64 positions table: score += -0.1 * |pos[q] - pos[kv]|."""

    def forward(self, q, k, v, pos):
        def mod(score, b, h, q_idx, kv_idx):
            return score - 0.1 * torch.abs(pos[q_idx] - pos[kv_idx])

        return flex_attention(q, k, v, score_mod=mod)


def _pos_inputs():
    q, k, v = qkv(1, 2, 32, 16)
    return [(q, k, v, torch.arange(32, dtype=torch.int64) * 3),
            (q, k, v, torch.randint(0, 100, (32,), dtype=torch.int64))]


@register_case(inputs=_pos_inputs, check=outputs_differ, tags=("runtime_buffer",))
def int64_positions_score_mod():
    """Runtime int64 tensor read in score_mod."""
    return I64Positions()


class KeyPaddingInt8(torch.nn.Module):
    """Key padding from a runtime int8 tensor [B, N] (nonzero = keep): the
    workaround for bool runtime buffers."""

    def forward(self, q, k, v, keep):
        def mask(b, h, q_idx, kv_idx):
            return keep[b, kv_idx] != 0

        bm = create_block_mask(mask, q.shape[0], None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


def _pad8_inputs():
    return [(q, k, v, keep.to(torch.int8)) for q, k, v, keep in _pad_inputs()]


@register_case(inputs=_pad8_inputs, check=outputs_differ, tags=("runtime_buffer", "mask_in_forward"))
def int8_key_padding():
    """Runtime int8 key-padding mask (bool workaround), run with two masks."""
    return KeyPaddingInt8()
