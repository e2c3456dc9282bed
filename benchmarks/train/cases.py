"""The cases of the training benchmark (`python -m benchmarks.train`):
forward + backward of flex_attention through `torch.compile(...,
backend="torch_mlir_flex")` (the default "tiled" pipeline: flex-to-flash
forward, flex-backward-to-flash backward) beside torch's SDPA CPU flash
kernel (where the mask is expressible: causal, GQA) and eager float32 math
(materialized scores, autograd).

`setup(kind, S, D, Hkv, dtype)` -> ({name: fn}, flops, grad_bytes): fn runs
one forward + backward; flops counts the forward FLOPs of the kept 64-blocks
(4 B H S S D per full block pair) times 3.5 (1 forward + 2.5 backward);
grad_bytes: the output and the q, k, v gradients one call creates.
"""

import math

import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo

dynamo.register()

H = 8
WINDOW = 256
DOC_LEN = 300


def _causal(b, h, q, kv):
    return q >= kv


def _sliding(b, h, q, kv):
    return (q >= kv) & (q - kv < WINDOW)


def _softcap(s, b, h, q, kv):
    return 20.0 * torch.tanh(s / 20.0)


def _alibi_score(slopes):
    def score(s, b, h, q, kv):
        return s + slopes[h] * (kv - q)

    return score


KINDS = ("causal", "sliding", "document", "alibi", "softcap", "gqa")
SIZES = (1024, 4096)
HEAD_DIMS = (64, 128)
# name: (kind, S, D, Hkv), e.g. "causal-1024-64"
ALL_CASES = {f"{kind}-{S}-{D}": (kind, S, D, 2 if kind == "gqa" else H)
             for kind in KINDS for S in SIZES for D in HEAD_DIMS}
QUICK = ["causal-1024-64", "sliding-1024-64", "gqa-1024-64"]
# Memory only (one call of ours): the extra-memory target's size.
MEMORY_CASE = ("causal", 8192, 64, H)


def _kept_fraction(mask_fn, S, block=64):
    """Fraction of (query block, key block) pairs with a kept point (what
    the tiled kernels compute)."""
    if mask_fn is None:
        return 1.0
    q = torch.arange(S)[:, None]
    kv = torch.arange(S)[None, :]
    keep = mask_fn(0, 0, q, kv)
    nb = -(-S // block)
    pad = nb * block - S
    keep = torch.nn.functional.pad(keep, (0, pad, 0, pad))
    blocks = keep.reshape(nb, block, nb, block).any(dim=3).any(dim=1)
    return blocks.float().mean().item()


def setup(kind, S, D, hkv, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, H, S, D, generator=g).to(dtype)
    k = torch.randn(1, hkv, S, D, generator=g).to(dtype)
    v = torch.randn(1, hkv, S, D, generator=g).to(dtype)
    grad = torch.randn(1, H, S, D, generator=g).to(dtype)
    mask_fn, score, gqa = None, None, hkv != H
    if kind in ("causal", "gqa", "alibi", "softcap"):
        mask_fn = _causal
    elif kind == "sliding":
        mask_fn = _sliding
    elif kind == "document":
        doc = torch.arange(S) // DOC_LEN

        def mask_fn(b, h, q_, kv):
            return (doc[q_] == doc[kv]) & (q_ >= kv)
    if kind == "alibi":
        score = _alibi_score(torch.tensor([2.0 ** (-8 * (i + 1) / H) for i in range(H)]))
    elif kind == "softcap":
        score = _softcap
    bm = create_block_mask(mask_fn, None, None, S, S, device="cpu") if mask_fn else None

    def fn(q_, k_, v_):
        return flex_attention(q_, k_, v_, score_mod=score, block_mask=bm, enable_gqa=gqa)

    compiled = torch.compile(fn, backend=dynamo.NAME)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]

    def ours():
        for t in leaves:
            t.grad = None
        compiled(*leaves).backward(grad)

    # Eager math: materialized scores with autograd.
    qi = torch.arange(S)[:, None]
    ki = torch.arange(S)[None, :]
    keep = mask_fn(0, 0, qi, ki) if mask_fn else None
    slopes = (torch.tensor([2.0 ** (-8 * (i + 1) / H) for i in range(H)])
              if kind == "alibi" else None)

    f32_leaves = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
    grad32 = grad.float()

    def eager():
        for t in f32_leaves:
            t.grad = None
        kk, vv = f32_leaves[1], f32_leaves[2]
        if gqa:
            kk = kk.repeat_interleave(H // hkv, 1)
            vv = vv.repeat_interleave(H // hkv, 1)
        s = f32_leaves[0] @ kk.transpose(-1, -2) / math.sqrt(D)
        if kind == "softcap":
            s = 20.0 * torch.tanh(s / 20.0)
        if slopes is not None:
            s = s + slopes[:, None, None] * (ki - qi).float()
        if keep is not None:
            s = s.masked_fill(~keep, -math.inf)
        (torch.softmax(s, -1) @ vv).backward(grad32)

    fns = {"ours": ours, "eager": eager}
    if kind in ("causal", "gqa"):
        def sdpa():
            for t in leaves:
                t.grad = None
            F.scaled_dot_product_attention(*leaves, is_causal=True, enable_gqa=gqa).backward(grad)

        fns["sdpa"] = sdpa
    flops = 3.5 * 4.0 * H * S * S * D * _kept_fraction(mask_fn, S)
    grad_bytes = sum(t.numel() * t.element_size() for t in (q, q, k, v))
    return fns, flops, grad_bytes
