"""Whole models: two flex calls in one graph, attention layers, a full
transformer block (RMSNorm, rotary embedding, QKV projections, causal flex
attention, SiLU-gated MLP)."""

import torch

from ..registry import alibi_slopes, qkv, randn, register_case
from .common import block_mask, causal_mask, flex_attention


class TwoCalls(torch.nn.Module):
    """Two flex calls with different modifiers; the second consumes the first."""

    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(4))
        self.bm = block_mask(causal_mask, 32)

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        a = flex_attention(q, k, v, block_mask=self.bm)
        b = flex_attention(a, k, v, score_mod=alibi)
        c = flex_attention(q, a, b, score_mod=lambda s, b_, h, m, n: 2.0 * torch.tanh(s / 2.0))
        return a + b, c


@register_case(inputs=lambda: qkv(1, 4, 32, 16))
def two_flex_calls():
    """Three flex calls (causal / ALiBi / softcap) chained in one model."""
    return TwoCalls()


def rms_norm(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotary_tables(S, hd, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(S, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


class TransformerBlock(torch.nn.Module):
    """Pre-norm decoder block: RMSNorm -> QKV -> rotary -> flex (causal,
    optional score_mod, optional GQA) -> out proj -> residual -> RMSNorm ->
    SiLU-gated MLP -> residual."""

    def __init__(self, dim=64, heads=4, kv_heads=None, S=32, hidden=128, score_mod=None, mask_in_forward=False):
        super().__init__()
        self.h, self.hkv, self.hd = heads, kv_heads or heads, dim // heads
        self.wq = torch.nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = torch.nn.Linear(dim, self.hkv * self.hd, bias=False)
        self.wv = torch.nn.Linear(dim, self.hkv * self.hd, bias=False)
        self.wo = torch.nn.Linear(heads * self.hd, dim, bias=False)
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)
        self.n1 = torch.nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.n2 = torch.nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        cos, sin = rotary_tables(S, self.hd)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.score_mod = score_mod
        self.mask_in_forward = mask_in_forward
        self.bm = None if mask_in_forward else block_mask(causal_mask, S)

    def forward(self, x):
        B, S, _ = x.shape
        y = rms_norm(x, self.n1)
        q = self.wq(y).view(B, S, self.h, self.hd).transpose(1, 2)
        k = self.wk(y).view(B, S, self.hkv, self.hd).transpose(1, 2)
        v = self.wv(y).view(B, S, self.hkv, self.hd).transpose(1, 2)
        q = apply_rotary(q, self.cos, self.sin)
        k = apply_rotary(k, self.cos, self.sin)
        bm = self.bm
        if self.mask_in_forward:
            from torch.nn.attention.flex_attention import create_block_mask

            bm = create_block_mask(causal_mask, None, None, S, S, device="cpu")
        a = flex_attention(q, k, v, score_mod=self.score_mod, block_mask=bm, enable_gqa=self.h != self.hkv)
        x = x + self.wo(a.transpose(1, 2).reshape(B, S, self.h * self.hd))
        y = rms_norm(x, self.n2)
        return x + self.w2(torch.nn.functional.silu(self.w1(y)) * self.w3(y))


@register_case(inputs=lambda: (randn(1, 32, 64),))
def transformer_block():
    """Full decoder block, causal flex attention."""
    return TransformerBlock()


@register_case(inputs=lambda: (randn(3, 32, 64),))
def transformer_block_gqa_softcap_b3():
    """Decoder block, B=3, GQA 2:1, causal + tanh softcap score_mod."""
    return TransformerBlock(kv_heads=2, score_mod=lambda s, b, h, m, n: 8.0 * torch.tanh(s / 8.0))


@register_case(inputs=lambda: (randn(1, 48, 64),), tags=("mask_in_forward",))
def transformer_block_mask_in_forward():
    """Decoder block with the causal block mask built inside forward."""
    return TransformerBlock(S=48, mask_in_forward=True)


class AttentionLayer(torch.nn.Module):
    """x -> fused qkv projection -> flex (ALiBi buffer, causal) -> projection + residual."""

    def __init__(self, dim=32, heads=4, S=40):
        super().__init__()
        self.h, self.hd = heads, dim // heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.register_buffer("slopes", alibi_slopes(heads))
        self.bm = block_mask(causal_mask, S, block=8)

    def forward(self, x):
        B, S, D = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.h, self.hd).permute(2, 0, 3, 1, 4).unbind(0)

        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        a = flex_attention(q, k, v, score_mod=alibi, block_mask=self.bm)
        return x + self.proj(a.transpose(1, 2).reshape(B, S, D))


@register_case(inputs=lambda: (randn(2, 40, 32),))
def attention_layer_alibi():
    """Attention layer with fused QKV, ALiBi + causal, residual."""
    return AttentionLayer()
