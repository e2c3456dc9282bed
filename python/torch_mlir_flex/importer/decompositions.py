"""Decompositions applied by ``export_and_import`` before import.

torch-mlir's default table plus our own, which win for the same op:

- ``aten.gelu(approximate="tanh")`` is expanded with elementary ops, because
  torch-mlir 20261001 lowers it with 0.7977240352174656 for sqrt(2/pi)
  (= 0.7978845608028654), an absolute error of ~5e-5. Exact GELU
  (``approximate="none"``) is left as ``aten.gelu``.
- Torch ops that torch-mlir does not know (they would reach the frontend as
  ``torch.operator`` and fail there), written with aten ops it lowers:
  - ``aten.histc``: torch's CPU rule (bins of width (max-min)/bins computed
    in the input dtype, ``pos = trunc((x - min) * bins / (max - min))``, a
    value equal to max counted in the last bin, values outside [min, max]
    and NaN ignored, min == max meaning the data's range, an empty data
    range widened by 1 on each side), counted with
    ``index_put(accumulate=True)`` (lowered by frontend/tm_tensor as a
    scatter loop);
  - ``aten.sort.stable``: ``aten.sort`` (our sort lowering is always stable);
  - ``aten.erfc``: ``1 - erf(x)`` (absolute error ~1e-7; no relative
    accuracy in the far tail).
- ``aten.select_scatter`` (``cache[i].copy_(x)`` after functionalization):
  torch-mlir's table writes it as ``where(arange == i, x, input)``, an
  elementwise pass over the whole input (a full copy of a mutated KV cache
  per call); ours is ``slice_scatter(input, x.unsqueeze(dim), dim, i, i + 1)``,
  an insert of the one row, done in place on the input's buffer.
- ``aten.index_copy`` / ``aten.index_copy_``: torch's decomposition (an
  ``index_put``) after sending every negative index to the most negative
  value of its dtype. Eager index_copy refuses a negative index (IndexError)
  where index_put counts it from the end, so the decomposition alone wrote
  ``index_copy_(0, tensor([-3]), src)`` into row size - 3; past the wrap,
  the scatter's run-time check (frontend/tm_tensor/scatter.py) raises a
  ``FlexIndexError`` (an IndexError) as for an index >= size.
- ``aten.index_add`` / ``aten.index_add_``: likewise (eager raises a
  RuntimeError for a negative index; the decomposition, an accumulating
  ``index_put``, added the rows into row size + index).
- ``aten._scaled_dot_product_flash_attention_for_cpu`` (an SDPA call
  sdpa_as_flex left alone, or ``TORCH_MLIR_FLEX_SDPA=decompose``): torch's
  decomposition returns the attention weights where the op returns the
  logsumexp, and its output laid out [L, B, H, E] where the op's has the
  query's layout (transformers' q: [B, L, H, E] transposed). A training
  forward graph saves both for the eager SDPA backward (its gradients would
  be off by orders of magnitude), and AOTAutograd's views of the output, recorded for
  the op's layout, fail at export ("Cannot view a tensor with shape
  [2, 512, 512] and strides (512, 1024, 1)"). Ours: the math attention in
  float32 (the CPU kernel's accumulation type), the output in the query's
  dtype and stride order, the natural-log logsumexp in float32 laid out as
  the op's ([B, L, H] transposed); GQA (fewer key heads) repeats K/V per
  group; a fully masked row gives an output and a logsumexp of 0, as the
  kernel (its backward then gives 0, not NaN). ``dropout_p`` other than 0
  keeps the op (torch refuses it).
"""

import math
from typing import Any, Callable, Dict

import torch
from torch._decomp import decomposition_table as torch_decompositions
from torch_mlir.extras.fx_decomp_util import get_decomposition_table

aten = torch.ops.aten
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_KAPPA = 0.044715


def gelu_tanh(x, approximate: str = "none"):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); NotImplemented (keep
    the op) for exact GELU."""
    if approximate != "tanh":
        return NotImplemented
    inner = SQRT_2_OVER_PI * (x + GELU_TANH_KAPPA * (x * x * x))
    return 0.5 * x * (1.0 + torch.tanh(inner))


def _histc(self, bins: int = 100, min=0, max=0):
    x = self.flatten()
    dt = x.dtype
    if float(min) == float(max):
        lo, hi = aten.amin(x, [0]), aten.amax(x, [0])
        same = lo == hi
        lo, hi = torch.where(same, lo - 1, lo), torch.where(same, hi + 1, hi)
    else:
        lo = torch.full((), float(min), dtype=dt)
        hi = torch.full((), float(max), dtype=dt)
    valid = (x >= lo) & (x <= hi)
    pos = ((x - lo) * bins / (hi - lo)).to(torch.int64)
    pos = torch.where(pos == bins, pos - 1, pos).clamp(0, bins - 1)
    counts = torch.zeros(bins, dtype=dt)
    return aten.index_put(counts, [pos], valid.to(dt), True)


def _sort_stable(self, *, stable=None, dim: int = -1, descending: bool = False):
    return aten.sort.default(self, dim, descending)


def _erfc(self):
    return 1 - torch.erf(self)


def _select_scatter(self, src, dim: int, index: int):
    dim = dim % self.dim() if self.dim() else 0
    if index < 0:
        index += self.shape[dim]
    return aten.slice_scatter(self, src.unsqueeze(dim), dim, index, index + 1)


def _no_wrap(index):
    """`index` with its negative entries at the dtype's minimum: still
    negative once index_put adds the dimension's size (any size below
    2**31), so the scatter's bounds check refuses them."""
    return torch.where(index < 0, torch.iinfo(index.dtype).min, index)


def _refusing_negatives(op):
    """torch's decomposition of `op` (index_copy / index_add and their
    in-place forms: self, dim, index, source, ...) with `_no_wrap(index)`."""
    decomposition = torch_decompositions[op]

    def run(self, dim: int, index, source, *args, **kwargs):
        return decomposition(self, dim, _no_wrap(index), source, *args, **kwargs)

    return run


def _sdpa_flash_cpu(query, key, value, dropout_p: float = 0.0, is_causal: bool = False, *,
                    attn_mask=None, scale=None):
    if dropout_p != 0.0:
        return NotImplemented
    hq, hkv = query.shape[1], key.shape[1]
    if hq != hkv:
        key = key.repeat_interleave(hq // hkv, dim=1)
        value = value.repeat_interleave(hq // hkv, dim=1)
    acc = torch.float32 if query.dtype in (torch.bfloat16, torch.float16) else query.dtype
    q, k, v = query.to(acc), key.to(acc), value.to(acc)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(query.shape[2], key.shape[2], dtype=torch.bool).tril()
        scores = torch.where(keep, scores, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = torch.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask.to(acc)
    lse = torch.logsumexp(scores, -1)
    # A fully masked row: logsumexp 0 (exp(-inf - 0) = 0), as the kernel's.
    lse = torch.where(lse == -math.inf, 0.0, lse)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    out = torch.matmul(probs, v).to(query.dtype)
    return _laid_out_as(out, query), lse.transpose(1, 2).contiguous().transpose(1, 2)


def _laid_out_as(x, like):
    """`x` with the stride order of `like` (as `empty_like(like)`)."""
    from torch._prims_common import compute_elementwise_output_logical_to_physical_perm

    perm, _ = compute_elementwise_output_logical_to_physical_perm(like)
    inverse = [perm.index(d) for d in range(len(perm))]
    return x.permute(perm).contiguous().permute(inverse)


FLEX_DECOMPOSITIONS: Dict[Any, Callable] = {
    aten.gelu.default: gelu_tanh,
    aten.histc.default: _histc,
    aten.sort.stable: _sort_stable,
    aten.erfc.default: _erfc,
    aten.select_scatter.default: _select_scatter,
    **{op: _refusing_negatives(op) for op in (aten.index_copy.default, aten.index_copy_.default,
                                              aten.index_add.default, aten.index_add_.default)},
    aten._scaled_dot_product_flash_attention_for_cpu.default: _sdpa_flash_cpu,
}


def with_flex_decompositions(table: Dict[Any, Callable]) -> Dict[Any, Callable]:
    """``table`` plus ours (a new dict; ours win for the same op)."""
    return {**table, **FLEX_DECOMPOSITIONS}


def flex_decomposition_table() -> Dict[Any, Callable]:
    """torch-mlir's default table with ours added (ours win)."""
    return with_flex_decompositions(get_decomposition_table())
