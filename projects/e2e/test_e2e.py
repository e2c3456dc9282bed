"""pytest over the e2e registry: one test per (case, backend).

    PYTHONPATH=python pytest -q projects/e2e/test_e2e.py [-k causal]
"""

import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
from torch_mlir_flex.backend import PIPELINES

from . import selection
from .registry import all_cases
from .runner import ERROR, FAIL, SKIP, XFAIL, XPASS, run_case

# Only the backends a case is written for (no skipped tests for the rest);
# selection.py: every case on "tiled", a quarter on the others unless
# FLEX_TESTS_FULL=1.
_PARAMS = [pytest.param(c, b, id=f"{c.name}-{b}") for b in sorted(PIPELINES) for c in all_cases()
           if c.supports(b) and selection.runs(c.name, b)]


@pytest.mark.parametrize("case,backend", _PARAMS)
def test_e2e(case, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = run_case(case, backend, verbose=True)
    if r.status == SKIP:
        pytest.skip(r.detail)
    if r.status == XFAIL:
        pytest.xfail(r.detail)
    assert r.status != XPASS, r.detail  # a stale xfail: remove it
    assert r.status not in (FAIL, ERROR), f"{r.status} [{r.stage}] {r.detail}"
