"""Captures and call shapes from PyTorch's own flex_attention /
flex_decoding tests, re-expressed as models: bool captures of every origin
(buffer, lifted constant, runtime input, made inside forward, new_zeros
masks, negated flags, row any/all), int and float runtime captures, GQA /
MQA decode, KV batch 1, Ev != E, return_lse, non-divisible lengths."""

import torch

from ..registry import qkv, register_case
from .common import create_block_mask, flex_attention
from .realworld_common import BACKENDS, case

S = 32


def causal(m, b, h, q, kv):
    return q >= kv


# Bool captures of every origin, read as i1 in the mask region.


def flag_pair(m, b, h, q, kv):
    return (m.flags[q] & m.flags[kv]) | (q == kv)


def flag_pair_rt(m, b, h, q, kv, flags):
    return (flags[q] & flags[kv]) | (q == kv)


def _flags():
    return torch.arange(S) % 3 != 1


case("bool_buffer", mask=flag_pair, buffers=lambda: {"flags": _flags()})
case("bool_lifted_constant", mask=flag_pair, consts=lambda: {"flags": _flags()})
case("bool_runtime_input", mask=flag_pair_rt, extra=lambda: (_flags(),))


def closure_flags():
    flags = torch.arange(S) % 4 != 2

    def mask(m, b, h, q, kv):
        return (flags[q] & ~flags[kv]) | (q == kv)

    return mask


case("bool_closure_constant", mask=closure_flags())


class BoolMadeInForward(torch.nn.Module):
    """Bool tensors made inside forward: a new_zeros mask filled in place and
    flags compared from the keys."""

    def __init__(self, negate=False):
        super().__init__()
        self.negate = negate

    def forward(self, q, k, v):
        keep = k.new_zeros(k.shape[2], dtype=torch.bool)
        keep[:8] = True
        flags = k[0, 0, :, 0] > 0
        if self.negate:
            flags = ~flags

        def mask(b, h, q_idx, kv_idx):
            return keep[kv_idx] | (flags[kv_idx] & (q_idx >= kv_idx))

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, block_mask=bm)


@register_case(inputs=lambda: qkv(1, 2, S, 16), backends=BACKENDS)
def bool_new_zeros_in_forward():
    """new_zeros bool mask and compared flags made inside forward."""
    return BoolMadeInForward()


@register_case(inputs=lambda: qkv(1, 2, S, 16), backends=BACKENDS)
def bool_negated_in_forward():
    """As bool_new_zeros_in_forward with ~flags."""
    return BoolMadeInForward(negate=True)


def not_flags(m, b, h, q, kv):
    return ~m.flags2[b, q] | (kv == 0)


case("bool_not_flags_b_q", mask=not_flags, B=2, mask_bh=True,
     buffers=lambda: {"flags2": torch.rand(2, S) > 0.5})


def row_any(m, b, h, q, kv):
    return m.rows[q].any() & (q >= kv)


def row_all(m, b, h, q, kv):
    return m.rows[kv].all() | (q == kv)


def row_any_rt(m, b, h, q, kv, rows):
    return rows[q].any() & (q >= kv)


case("bool_row_any", mask=row_any, buffers=lambda: {"rows": torch.rand(S, 3) > 0.7})
case("bool_row_all", mask=row_all, buffers=lambda: {"rows": torch.rand(S, 2) > 0.3})
case("bool_row_any_long_row", mask=row_any, buffers=lambda: {"rows": torch.rand(S, 12) > 0.95})
case("bool_row_any_runtime", mask=row_any_rt, extra=lambda: (torch.rand(S, 3) > 0.7,))
case("bool_row_all_lifted_constant", mask=row_all, consts=lambda: {"rows": torch.rand(S, 2) > 0.3})


def bool_score(m, s, b, h, q, kv):
    return torch.where(m.flags[kv], s, s * 0.5 - 1.0)


case("bool_buffer_in_score_mod", bool_score, buffers=lambda: {"flags": _flags()})
case("bool_constant_in_score_mod", bool_score, consts=lambda: {"flags": _flags()})


# Runtime captures of other dtypes.


def rt_float_bias(m, s, b, h, q, kv, bias):
    return s + bias[h, q, kv]


def rt_int_len(m, b, h, q, kv, lens):
    return kv < lens[b]


def rt_int32_shift(m, s, b, h, q, kv, shift):
    return s + (q - kv + shift).to(torch.float32) * 0.1


def rt_int32_shift_indexed(m, s, b, h, q, kv, shift):
    return s + (q - kv + shift[0]).to(torch.float32) * 0.1


case("runtime_float_bias", rt_float_bias, extra=lambda: (torch.randn(2, S, S),))
case("runtime_int_lengths", mask=rt_int_len, B=2, mask_bh=True,
     extra=lambda: [(torch.tensor([30, 5]),), (torch.tensor([12, 32]),)])
case("runtime_int32_0d_shift", rt_int32_shift, extra=lambda: (torch.tensor(4, dtype=torch.int32),))
case("runtime_int32_shift_python_index", rt_int32_shift_indexed, extra=lambda: (torch.tensor([4], dtype=torch.int32),))


def rt_row_dot(m, s, b, h, q, kv, emb):
    return s + torch.dot(emb[q], emb[kv]) * 0.2


case("runtime_row_dot", rt_row_dot, extra=lambda: (torch.randn(S, 4),))


# Call shapes of flex_decoding and flex_attention tests.


def alibi_like(m, s, b, h, q, kv):
    return s - (h + 1) * 0.1 * (q - kv).abs()


def decode_window(m, b, h, q, kv):
    return kv >= 8


case("flex_gqa_decode", alibi_like, H=8, Hkv=2, M=1, N=64)
case("flex_mqa_decode", alibi_like, H=4, Hkv=1, M=1, N=48)
case("flex_gqa_decode_mask", mask=decode_window, H=8, Hkv=2, M=1, N=40)
case("flex_gqa_prefill_causal", mask=causal, H=4, Hkv=2)
case("flex_mqa_f16", alibi_like, H=4, Hkv=1, M=4, N=32, dtype=torch.float16)
case("flex_kv_batch_1", alibi_like, mask=causal, B=2, Bkv=1, mask_bh=True)
case("flex_ev_ne_e", alibi_like, E=16, Ev=8)
case("flex_ev_ne_e_causal_bf16", alibi_like, mask=causal, E=8, Ev=24, dtype=torch.bfloat16)
case("flex_return_lse", alibi_like, lse=True)
case("flex_return_lse_causal", mask=causal, lse=True, M=40)
case("flex_non_divisible_lengths", alibi_like, M=37, N=53)
case("flex_non_divisible_causal_window", mask=lambda m, b, h, q, kv: (q + 16 >= kv) & (q + 16 - kv < 20), M=37, N=53)
case("flex_single_query_row", mask=causal, M=1, N=32)
case("flex_scale_override", alibi_like, scale=0.3)
case("flex_large_head_dim", mask=causal, E=160, M=16)
