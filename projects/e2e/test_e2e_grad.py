"""pytest over the e2e registry's backward: one test per (case, backend)
for every case with a floating-point input (grad_runner.py).

    PYTHONPATH=python pytest -q projects/e2e/test_e2e_grad.py [-k causal]
"""

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
from torch_mlir_flex.backend import PIPELINES

from .grad_runner import has_gradient, run_grad_case
from . import selection
from .registry import all_cases
from .runner import ERROR, FAIL, XFAIL, XPASS

# selection.py: a quarter of the cases on "reference" and "tiled-1t", the rest on "tiled"
# (all of them everywhere with FLEX_TESTS_FULL=1).
_PARAMS = [pytest.param(c, b, id=f"{c.name}-{b}") for b in sorted(PIPELINES) for c in all_cases()
           if c.supports(b) and has_gradient(c) and selection.grad_runs(c.name, b)]


@pytest.mark.parametrize("case,backend", _PARAMS)
def test_e2e_grad(case, backend):
    r = run_grad_case(case, backend, verbose=True)
    if r.status == XFAIL:
        pytest.xfail(r.detail)
    assert r.status != XPASS, r.detail
    assert r.status not in (FAIL, ERROR), f"{r.status} [{r.stage}] {r.detail}"
