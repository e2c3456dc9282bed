"""Comparing compiled results with eager PyTorch (used by the CLI's --run,
the e2e suite and the examples)."""

from typing import Any, Tuple


def _leaves(x):
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(x)


def compare_outputs(got: Any, expected: Any, rtol: float = 1e-3, atol: float = 1e-5) -> Tuple[bool, float, str]:
    """Element-wise `allclose` of two output trees in float64.

    Returns (ok, max_abs_err over positions finite in both, message). Equal
    infinities match; a NaN in `got` where `expected` has none never does.
    Dtypes and shapes must be equal."""
    import torch

    g, e = _leaves(got), _leaves(expected)
    if len(g) != len(e):
        return False, float("nan"), f"{len(g)} outputs, eager gives {len(e)}"
    worst = 0.0
    for i, (a, b) in enumerate(zip(g, e)):
        if not isinstance(b, torch.Tensor):
            continue
        if not isinstance(a, torch.Tensor):
            return False, float("nan"), f"output {i}: got {type(a).__name__}, expected a tensor"
        if a.dtype != b.dtype:
            return False, float("nan"), f"output {i}: dtype {a.dtype}, eager {b.dtype}"
        if a.shape != b.shape:
            return False, float("nan"), f"output {i}: shape {list(a.shape)}, eager {list(b.shape)}"
        a64, b64 = a.detach().double(), b.detach().double()
        if torch.isnan(a64).any() and not torch.isnan(b64).any():
            return False, float("nan"), f"output {i}: NaN where eager has none"
        fin = torch.isfinite(a64) & torch.isfinite(b64)
        if fin.any():
            worst = max(worst, (a64 - b64)[fin].abs().max().item())
        if not torch.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
            bad = (~torch.isfinite(a64) | ~torch.isfinite(b64)) & (a64 != b64)
            extra = f", {int(bad.sum())} non-finite mismatches" if bad.any() else ""
            return False, worst, (f"output {i}: max abs err {worst:.3g} exceeds rtol={rtol}, "
                                  f"atol={atol}{extra}")
    return True, worst, ""
