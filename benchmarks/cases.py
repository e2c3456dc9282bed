"""The benchmark's case catalogue: nn.Modules calling flex_attention the way
users write them, and their peers.

Each module's `flex_kwargs(*extra)` is what its `forward` passes to
flex_attention (a score_mod closure over the module's tensors, a BlockMask
from create_block_mask, enable_gqa); the torch.compile peer gets the same kwargs, computed once
(the BlockMask built outside the timed call, as a model reuses it across
layers). The document mask reads its ids from a forward input (runtime
data): its BlockMask is built inside forward. `instance(config)` builds the
module, the inputs, the SDPA peer (None where SDPA cannot express the case)
and the kept work.
"""

import dataclasses
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

WINDOW = 256  # sliding window width
SOFTCAP = 20.0
GQA_GROUP = 4  # query heads per kv head


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def causal_block_mask(M, N):
    return create_block_mask(causal, None, None, M, N, device="cpu")


class FlexCall(torch.nn.Module):
    """flex_attention(q, k, v, **self.flex_kwargs(*extra))."""

    def flex_kwargs(self, *extra):
        return {}

    def forward(self, q, k, v, *extra):
        return flex_attention(q, k, v, **self.flex_kwargs(*extra))


class Causal(FlexCall):
    def __init__(self, M, N, enable_gqa=False):
        super().__init__()
        self.block_mask = causal_block_mask(M, N)
        self.enable_gqa = enable_gqa

    def flex_kwargs(self):
        return dict(block_mask=self.block_mask, enable_gqa=self.enable_gqa)


def sliding_window_mask(window):
    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= window)

    return mask_mod


class SlidingWindow(FlexCall):
    def __init__(self, M, N, window=WINDOW):
        super().__init__()
        self.block_mask = create_block_mask(sliding_window_mask(window), None, None, M, N,
                                            device="cpu")

    def flex_kwargs(self):
        return dict(block_mask=self.block_mask)


def document_mask(doc):
    def mask_mod(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


class Document(FlexCall):
    """Causal within a document; `doc` (int64 [S], document id per token)
    is a forward input."""

    def flex_kwargs(self, doc):
        S = doc.shape[0]
        return dict(block_mask=create_block_mask(document_mask(doc), None, None, S, S,
                                                 device="cpu"))


class Alibi(Causal):
    def __init__(self, M, N, heads):
        super().__init__(M, N)
        self.register_buffer("slopes", alibi_slopes(heads))

    def flex_kwargs(self):
        slopes = self.slopes

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + slopes[h] * (kv_idx - q_idx)

        return dict(super().flex_kwargs(), score_mod=score_mod)


class Softcap(Causal):
    def __init__(self, M, N, cap=SOFTCAP):
        super().__init__(M, N)
        self.cap = cap

    def flex_kwargs(self):
        cap = self.cap

        def score_mod(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)

        return dict(super().flex_kwargs(), score_mod=score_mod)


class Decode(FlexCall):
    """One query token against the whole kv cache (no mask); with
    `enable_gqa`, GQA_GROUP query heads per kv head."""

    def __init__(self, enable_gqa=False):
        super().__init__()
        self.enable_gqa = enable_gqa

    def flex_kwargs(self):
        return dict(enable_gqa=True) if self.enable_gqa else {}


def alibi_slopes(heads):
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)])


def document_ids(S, seed=0):
    """Random document lengths (S/16 .. S/3) summing to S."""
    g = torch.Generator().manual_seed(seed)
    lens, total = [], 0
    while total < S:
        n = min(int(torch.randint(max(1, S // 16), max(2, S // 3), (1,), generator=g)), S - total)
        lens.append(n)
        total += n
    return torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens)).to(torch.int64)


# --- the catalogue ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Config:
    case: str
    dtype: torch.dtype
    S: int
    D: int
    H: int = 8
    B: int = 1


@dataclasses.dataclass
class Instance:
    config: Config
    module: torch.nn.Module
    args: tuple  # forward inputs: q, k, v, then runtime extras
    flex_kwargs: dict  # what forward passes to flex_attention, precomputed
    sdpa: Optional[Callable]  # () -> output, or None (not expressible)
    M: int
    N: int
    Hq: int
    Hkv: int
    kept: int  # kept (q, kv) pairs per head


def _sdpa(q, k, v, **kw):
    return lambda: F.scaled_dot_product_attention(q, k, v, **kw)


def _dense_mask(mask_mod, M, N):
    m = torch.arange(M).view(M, 1)
    n = torch.arange(N).view(1, N)
    return mask_mod(0, 0, m, n)


def kept_pairs(mask_mod, M, N, rows=1024):
    """Number of (q_idx, kv_idx) pairs `mask_mod` keeps (None: all)."""
    if mask_mod is None:
        return M * N
    n = torch.arange(N).view(1, N)
    return sum(int(mask_mod(0, 0, torch.arange(r, min(M, r + rows)).view(-1, 1), n).sum())
               for r in range(0, M, rows))


def _build(case, cfg, M, N):
    """(module, runtime extras, mask_mod for the kept work, SDPA kwargs or None)."""
    if case in ("causal", "gqa"):
        gqa = case == "gqa"
        return Causal(M, N, enable_gqa=gqa), (), causal, dict(is_causal=True, enable_gqa=gqa)
    if case == "sliding_window":
        mask = sliding_window_mask(WINDOW)
        return SlidingWindow(M, N), (), mask, dict(attn_mask=_dense_mask(mask, M, N))
    if case == "document":
        doc = document_ids(M)
        mask = document_mask(doc)
        return Document(), (doc,), mask, dict(attn_mask=_dense_mask(mask, M, N))
    if case == "alibi":
        return Alibi(M, N, cfg.H), (), causal, None
    if case == "softcap":
        return Softcap(M, N), (), causal, None
    if case in ("decode", "decode_gqa"):
        gqa = case == "decode_gqa"
        return Decode(enable_gqa=gqa), (), None, dict(enable_gqa=gqa)
    raise ValueError(f"unknown case {case!r}; known: {', '.join(CASES)}")


# name -> description (the order of the report); SDPA: how SDPA runs it
CASES = {
    "causal": "causal BlockMask; SDPA is_causal",
    "sliding_window": f"causal sliding window {WINDOW}; SDPA with a dense boolean mask",
    "document": "causal document mask, document ids a forward input (BlockMask built in "
                "forward); SDPA with a dense boolean mask",
    "alibi": "ALiBi score_mod (per-head slopes buffer) + causal; no SDPA",
    "softcap": f"tanh softcap {SOFTCAP:g} score_mod + causal; no SDPA",
    "gqa": f"GQA {GQA_GROUP}:1 (enable_gqa) + causal; SDPA is_causal, enable_gqa",
    "decode": "decode: one query against N=S keys, no mask; SDPA without mask",
    "decode_gqa": f"GQA decode: one query row, {GQA_GROUP}*H query heads over H kv heads "
                  "(enable_gqa), N=S keys, no mask; SDPA enable_gqa",
}


def head_counts(cfg: Config):
    """(Hq, Hkv): gqa groups H query heads, decode_gqa widens to GQA_GROUP*H
    query heads over H kv heads."""
    if cfg.case == "gqa":
        return cfg.H, cfg.H // GQA_GROUP
    if cfg.case == "decode_gqa":
        return GQA_GROUP * cfg.H, cfg.H
    return cfg.H, cfg.H


def instance(cfg: Config) -> Instance:
    """Module, inputs (N(0,1), seed 1) and peers of one configuration."""
    M = 1 if cfg.case in ("decode", "decode_gqa") else cfg.S
    N = cfg.S
    Hq, Hkv = head_counts(cfg)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(cfg.B, Hq, M, cfg.D, generator=g).to(cfg.dtype)
    k, v = (torch.randn(cfg.B, Hkv, N, cfg.D, generator=g).to(cfg.dtype) for _ in range(2))
    module, extra, mask, sdpa_kw = _build(cfg.case, cfg, M, N)
    return Instance(config=cfg, module=module, args=(q, k, v, *extra),
                    flex_kwargs=module.flex_kwargs(*extra),
                    sdpa=None if sdpa_kw is None else _sdpa(q, k, v, **sdpa_kw),
                    M=M, N=N, Hq=Hq, Hkv=Hkv, kept=kept_pairs(mask, M, N))


def flops(inst: Instance) -> float:
    """Kept work only: 2 matmuls x 2 flops x D per kept (q, kv) pair and head."""
    c = inst.config
    return 4.0 * c.D * c.B * inst.Hq * inst.kept

