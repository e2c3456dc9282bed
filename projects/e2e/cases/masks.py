"""mask_mod cases: causal, sliding window, prefix-LM, document masking,
fully masked rows; block masks built outside and inside forward."""

import torch

from ..registry import qkv, randn, register_case
from .common import Flex, block_mask, causal_mask, create_block_mask, flex_attention, outputs_differ


@register_case(inputs=lambda: qkv(1, 4, 64, 32), tags=("dense",))
def no_mods():
    """No score_mod, no block_mask (dense attention)."""
    return Flex()


@register_case(inputs=lambda: qkv(1, 4, 64, 32))
def causal():
    """Causal block mask built outside forward."""
    return Flex(block_mask=block_mask(causal_mask, 64))


@register_case(inputs=lambda: qkv(1, 2, 128, 16))
def causal_small_blocks():
    """Causal, S=128 with 32-wide blocks (several full/partial/empty blocks)."""
    return Flex(block_mask=block_mask(causal_mask, 128, block=32))


class CausalInForward(torch.nn.Module):
    def forward(self, q, k, v):
        bm = create_block_mask(causal_mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


@register_case(inputs=lambda: qkv(1, 4, 64, 32), tags=("mask_in_forward",))
def causal_in_forward():
    """Causal block mask built inside forward (its graph is in the export)."""
    return CausalInForward()


def sliding_window(window):
    def mask(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= window)

    return mask


@register_case(inputs=lambda: qkv(1, 4, 96, 32))
def sliding_window_16():
    """Causal sliding window of 16 (mask outside forward)."""
    return Flex(block_mask=block_mask(sliding_window(16), 96, block=32))


class SlidingInForward(torch.nn.Module):
    def forward(self, q, k, v):
        bm = create_block_mask(sliding_window(8), None, None, q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, block_mask=bm, score_mod=lambda s, b, h, m, n: s * 1.5)


@register_case(inputs=lambda: qkv(2, 2, 64, 16), tags=("mask_in_forward",))
def sliding_window_in_forward():
    """Sliding window 8 built inside forward, plus a linear score_mod."""
    return SlidingInForward()


def prefix_lm(prefix):
    def mask(b, h, q_idx, kv_idx):
        return (kv_idx < prefix) | (q_idx >= kv_idx)

    return mask


@register_case(inputs=lambda: qkv(1, 4, 64, 32))
def prefix_lm_24():
    """Prefix-LM: bidirectional over the first 24 positions, causal after."""
    return Flex(block_mask=block_mask(prefix_lm(24), 64))


class DocumentMask(torch.nn.Module):
    """Document masking with a runtime document-id tensor (a graph input the
    mask_mod reads: a runtime mask buffer)."""

    def forward(self, q, k, v, doc_ids):
        def mask(b, h, q_idx, kv_idx):
            return (doc_ids[q_idx] == doc_ids[kv_idx]) & (q_idx >= kv_idx)

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


def _doc_inputs():
    q, k, v = qkv(1, 4, 64, 32)
    ids_a = torch.tensor([0] * 20 + [1] * 30 + [2] * 14, dtype=torch.int64)
    ids_b = torch.tensor([0] * 8 + [1] * 8 + [2] * 40 + [3] * 8, dtype=torch.int64)
    return [(q, k, v, ids_a), (q, k, v, ids_b)]


@register_case(inputs=_doc_inputs, check=outputs_differ, tags=("runtime_buffer", "mask_in_forward"))
def document_mask():
    """Document ids as a runtime input; run twice with different ids, outputs must differ."""
    return DocumentMask()


def _rows_masked(b, h, q_idx, kv_idx):
    return (q_idx >= 16) & (kv_idx <= q_idx)


def _check_masked_rows(runs):
    out, lse = runs[0].got
    if out[:, :, :16].abs().max().item() != 0.0:
        return "fully masked rows must give output 0"
    if not torch.isneginf(lse[:, :, :16]).all():
        return "fully masked rows must give lse = -inf"
    if torch.isnan(out).any() or torch.isnan(lse).any():
        return "NaN in output or lse"
    return None


@register_case(inputs=lambda: qkv(1, 2, 48, 16), check=_check_masked_rows)
def fully_masked_rows():
    """Rows 0..15 fully masked: output 0, lse -inf, no NaN."""
    return Flex(block_mask=block_mask(_rows_masked, 48, block=16), aux="lse")


def _bh_mask(b, h, q_idx, kv_idx):
    return ((h % 2 == 0) & (q_idx >= kv_idx)) | ((h % 2 == 1) & (b == 0)) | ((b == 1) & (kv_idx < 8))


@register_case(inputs=lambda: qkv(2, 4, 32, 16))
def mask_uses_b_and_h():
    """mask_mod depending on b and h (per-batch, per-head masks)."""
    return Flex(block_mask=block_mask(_bh_mask, 32, B=2, H=4))
