"""Decompositions applied by ``export_and_import`` before import.

torch-mlir's default table plus our own fixes:
* ``aten.gelu(approximate="tanh")`` is expanded with elementary ops here,
  because torch-mlir 20261001 lowers it with 0.7977240352174656 for
  sqrt(2/pi) (= 0.7978845608028654), an absolute error of ~5e-5.  Exact GELU
  (``approximate="none"``) is left as ``aten.gelu``.
"""

import math
from typing import Any, Callable, Dict

import torch
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


FLEX_DECOMPOSITIONS: Dict[Any, Callable] = {aten.gelu.default: gelu_tanh}


def flex_decomposition_table() -> Dict[Any, Callable]:
    """torch-mlir's default table with FLEX_DECOMPOSITIONS added (ours win)."""
    table = dict(get_decomposition_table())
    table.update(FLEX_DECOMPOSITIONS)
    return table


# ---- ops torch-mlir does not know (branch tmtensor) ----
# Decompositions run before import for torch ops that torch-mlir does not
# know (they would reach the frontend as ``torch.operator`` and fail there).
#
# Each is written with aten ops that torch-mlir lowers; ``export_and_import``
# adds them to its decomposition table (``with_flex_decompositions``).
#
# - ``aten.histc``: torch's CPU rule (bins of width (max-min)/bins computed
#   in the input dtype, ``pos = trunc((x - min) * bins / (max - min))``, a
#   value equal to max counted in the last bin, values outside [min, max]
#   and NaN ignored, min == max meaning the data's range, an empty data
#   range widened by 1 on each side), counted with ``index_put(accumulate=True)``
#   (lowered by frontend/tm_tensor as a scatter loop).
# - ``aten.sort.stable``: ``aten.sort`` (our sort lowering is always stable).
# - ``aten.erfc``: ``1 - erf(x)`` (absolute error ~1e-7; no relative accuracy
#   in the far tail).


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


def flex_decompositions() -> Dict[Any, Callable]:
    return {
        aten.histc.default: _histc,
        aten.sort.stable: _sort_stable,
        aten.erfc.default: _erfc,
    }


def with_flex_decompositions(table: Dict[Any, Callable]) -> Dict[Any, Callable]:
    """``table`` plus ours (a new dict; ours win for the same op)."""
    return {**table, **flex_decompositions()}
