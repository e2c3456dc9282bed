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
