"""Shared modules and modifiers for the case files."""

import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def block_mask(mask_mod, S, N=None, B=None, H=None, block=None):
    """create_block_mask on CPU, outside forward (its tensors become constants)."""
    kw = {"BLOCK_SIZE": block} if block else {}
    return create_block_mask(mask_mod, B, H, S, N or S, device="cpu", **kw)


class Flex(torch.nn.Module):
    """flex_attention(q, k, v) with fixed modifiers/options; `aux` selects
    what is returned besides the output: None, "lse", "max" or "both"."""

    def __init__(self, score_mod=None, block_mask=None, scale=None, enable_gqa=False, aux=None):
        super().__init__()
        self.score_mod = score_mod
        self.block_mask = block_mask
        self.scale = scale
        self.enable_gqa = enable_gqa
        self.aux = aux

    def forward(self, q, k, v):
        if self.aux is None:
            return flex_attention(q, k, v, score_mod=self.score_mod, block_mask=self.block_mask,
                                  scale=self.scale, enable_gqa=self.enable_gqa)
        req = AuxRequest(lse=self.aux in ("lse", "both"), max_scores=self.aux in ("max", "both"))
        out, aux = flex_attention(q, k, v, score_mod=self.score_mod, block_mask=self.block_mask,
                                  scale=self.scale, enable_gqa=self.enable_gqa, return_aux=req)
        if self.aux == "lse":
            return out, aux.lse
        if self.aux == "max":
            return out, aux.max_scores
        return out, aux.lse, aux.max_scores


def outputs_differ(runs, i=0, j=1, min_diff=1e-2):
    """check hook: the outputs of runs i and j differ (by more than min_diff)."""
    a = runs[i].got[0] if isinstance(runs[i].got, tuple) else runs[i].got
    b = runs[j].got[0] if isinstance(runs[j].got, tuple) else runs[j].got
    d = (a.double() - b.double()).abs().max().item()
    if d <= min_diff:
        return f"runs {i} and {j} should give different outputs (max diff {d:.3g})"
    return None


# torch 2.13's public API refuses AuxRequest(max_scores=True) for CPU inputs
# ("Returning max scores is not supported on CPU/MPS"), but the HOP itself
# computes max_scores on CPU (dense math reference) and exports fine. These
# cases call the HOP the way the public API does, with OUTPUT_MAX set.
HOP_KERNEL_OPTIONS = dict(BACKEND="AUTO", PRESCALE_QK=False, ROWS_GUARANTEED_SAFE=False,
                          BLOCKS_ARE_CONTIGUOUS=False, WRITE_DQ=True, OUTPUT_LOGSUMEXP=True, OUTPUT_MAX=True)


def _identity(score, b, h, q_idx, kv_idx):
    return score


def flex_with_max_scores(q, k, v, score_mod=None, block_mask=None, scale=None):
    """(out, lse, max_scores) in natural-log units, via the flex_attention HOP."""
    import math

    from torch._higher_order_ops.flex_attention import flex_attention as flex_hop
    from torch.nn.attention.flex_attention import _create_empty_block_mask

    if block_mask is None:
        block_mask = _create_empty_block_mask(q, k)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    out, lse, mx = flex_hop(q, k, v, score_mod or _identity, block_mask.as_tuple(), scale,
                            dict(HOP_KERNEL_OPTIONS), (), ())
    ln2 = math.log(2.0)
    return out, lse * ln2, mx * ln2


class FlexMax(torch.nn.Module):
    """Returns (out, max_scores) or (out, lse, max_scores) (`both=True`)."""

    def __init__(self, score_mod=None, block_mask=None, scale=None, both=False):
        super().__init__()
        self.score_mod, self.block_mask, self.scale, self.both = score_mod, block_mask, scale, both

    def forward(self, q, k, v):
        out, lse, mx = flex_with_max_scores(q, k, v, self.score_mod, self.block_mask, self.scale)
        return (out, lse, mx) if self.both else (out, mx)
