"""Training benchmark: forward + backward of flex_attention through
`torch.compile(..., backend="torch_mlir_flex")` (the default "tiled"
pipeline: flex-to-flash forward, flex-backward-to-flash backward) beside
torch's SDPA CPU flash kernel (where the mask is expressible: causal,
GQA) and eager math (materialized scores, autograd), in one process,
interleaved.

    PYTHONPATH=python python -m benchmarks.train [--quick] [--reps 5]
        [--cases causal-1024-64,...]

Prints a markdown table: case, S, D, dtype, ours ms, SDPA ms, eager-math
ms, ours / SDPA, GFLOP/s (forward FLOPs of the kept blocks, 4 B H S S D
per full block pair, times 3.5: 1 forward + 2.5 backward), and the peak
extra memory of one ours fwd+bwd call (VmHWM growth, Linux only). Times
are medians over interleaved rounds; only ratios are meaningful on a
shared machine.
"""

import argparse
import math

import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from benchmarks.timing import interleaved_medians, peak_extra_bytes
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


# name: (kind, S, D, Hkv)
ALL_CASES = {
    "causal-1024-64": ("causal", 1024, 64, H),
    "causal-1024-128": ("causal", 1024, 128, H),
    "causal-4096-64": ("causal", 4096, 64, H),
    "causal-4096-128": ("causal", 4096, 128, H),
    "sliding-2048-64": ("sliding", 2048, 64, H),
    "document-2048-64": ("document", 2048, 64, H),
    "alibi-1024-64": ("alibi", 1024, 64, H),
    "softcap-1024-64": ("softcap", 1024, 64, H),
    "gqa8/2-1024-64": ("gqa", 1024, 64, 2),
}
QUICK = ["causal-1024-64", "causal-1024-128", "sliding-2048-64", "gqa8/2-1024-64"]


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


def _setup(kind, S, D, hkv):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, H, S, D, generator=g)
    k = torch.randn(1, hkv, S, D, generator=g)
    v = torch.randn(1, hkv, S, D, generator=g)
    grad = torch.randn(1, H, S, D, generator=g)
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

    def eager():
        for t in leaves:
            t.grad = None
        kk, vv = leaves[1], leaves[2]
        if gqa:
            kk = kk.repeat_interleave(H // hkv, 1)
            vv = vv.repeat_interleave(H // hkv, 1)
        s = leaves[0] @ kk.transpose(-1, -2) / math.sqrt(D)
        if kind == "softcap":
            s = 20.0 * torch.tanh(s / 20.0)
        if slopes is not None:
            s = s + slopes[:, None, None] * (ki - qi).float()
        if keep is not None:
            s = s.masked_fill(~keep, -math.inf)
        (torch.softmax(s, -1) @ vv).backward(grad)

    fns = {"ours": ours, "eager": eager}
    if kind in ("causal", "gqa"):
        def sdpa():
            for t in leaves:
                t.grad = None
            F.scaled_dot_product_attention(*leaves, is_causal=True, enable_gqa=gqa).backward(grad)

        fns["sdpa"] = sdpa
    flops = 3.5 * 4.0 * H * S * S * D * _kept_fraction(mask_fn, S)
    return fns, flops


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few small cases, fewer reps")
    ap.add_argument("--reps", type=int, default=0, help="timed calls per implementation")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory column")
    args = ap.parse_args(argv)
    names = (args.cases.split(",") if args.cases else QUICK if args.quick else list(ALL_CASES))
    reps = args.reps or (3 if args.quick else 5)
    print("| case | S | D | dtype | ours ms | SDPA ms | eager-math ms | ours/SDPA "
          "| GFLOP/s | peak extra MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        kind, S, D, hkv = ALL_CASES[name]
        fns, flops = _setup(kind, S, D, hkv)
        r = max(2, reps if S <= 2048 else reps // 2 + 1)
        med = interleaved_medians(fns, r, rounds=min(3, r))
        ours = med["ours"] * 1e3
        sdpa = med.get("sdpa")
        eager = med["eager"] * 1e3
        mem = ""
        if not args.no_memory:
            extra = peak_extra_bytes(fns["ours"])
            mem = f"{extra / 2**20:.0f}" if extra is not None else ""
        ratio = f"{ours / (sdpa * 1e3):.2f}" if sdpa else ""
        sd = f"{sdpa * 1e3:.1f}" if sdpa else ""
        gf = flops / (ours * 1e-3) / 1e9
        print(f"| {name} | {S} | {D} | f32 | {ours:.1f} | {sd} | {eager:.1f} | {ratio} "
              f"| {gf:.0f} | {mem} |", flush=True)


if __name__ == "__main__":
    main()
