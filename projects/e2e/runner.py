"""Runs registered e2e cases: compile with torch_mlir_flex, run, compare with
eager PyTorch on the same inputs."""

import dataclasses
import time
import traceback
from typing import List, Optional

import torch_mlir_flex  # noqa: F401  (must precede anything importing torch_mlir)

from .registry import E2ECase, Run

PASS, FAIL, ERROR, SKIP, XFAIL, XPASS = "PASS", "FAIL", "ERROR", "SKIP", "XFAIL", "XPASS"


@dataclasses.dataclass
class CaseResult:
    name: str
    backend: str
    status: str
    max_abs_err: Optional[float] = None
    detail: str = ""
    seconds: float = 0.0
    stage: str = ""  # failing stage for ERROR (export/import/frontend/...)

    @property
    def ok(self) -> bool:
        return self.status in (PASS, SKIP, XFAIL, XPASS)


def _seed(case: E2ECase):
    import torch

    torch.manual_seed(case.seed)


def build(case: E2ECase):
    """(model, input sets) with the case's seed."""
    import torch

    _seed(case)
    model = case.model_factory()
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model, case.input_sets()


def frontend_text(case: E2ECase) -> str:
    """The frontend's linalg-on-tensors text for the case's model (no JIT)."""
    from torch_mlir_flex.backend.compile import export_model, import_model, to_linalg

    model, sets = build(case)
    dyn = case.dynamic_shapes() if case.dynamic_shapes else None
    return to_linalg(import_model(export_model(model, sets[0], dyn)))


def compare(got, expected, rtol: float, atol: float):
    """(ok, max_abs_err or None, message); see backend/testing.py."""
    import math

    from torch_mlir_flex.backend.testing import compare_outputs

    ok, err, msg = compare_outputs(got, expected, rtol, atol)
    return ok, (None if math.isnan(err) else err), msg


def run_case(case: E2ECase, backend: str = "reference", verbose: bool = False) -> CaseResult:
    import torch

    from torch_mlir_flex.backend import FlexCompileError
    from torch_mlir_flex.backend import compile as compile_fn

    t0 = time.time()
    res = CaseResult(case.name, backend, PASS)
    if not case.supports(backend):
        res.status, res.detail = SKIP, f"backend {backend} not in {case.backends}"
        return res
    try:
        model, sets = build(case)
        dyn = case.dynamic_shapes() if case.dynamic_shapes else None
        compiled = compile_fn(model, sets[0], backend=backend, dynamic_shapes=dyn)
        runs: List[Run] = []
        worst = 0.0
        for k, args in enumerate(sets):
            with torch.no_grad():
                expected = model(*args)
            got = compiled(*args)
            runs.append(Run(args, got, expected))
            ok, err, msg = compare(got, expected, case.rtol, case.atol)
            if err is not None:
                worst = max(worst, err)
            if not ok:
                res.status, res.detail = FAIL, (f"input set {k}: " if len(sets) > 1 else "") + msg
                break
        res.max_abs_err = worst
        if res.status == PASS and case.check is not None:
            msg = case.check(runs)
            if msg:
                res.status, res.detail = FAIL, msg
    except FlexCompileError as e:
        res.status, res.stage = ERROR, e.stage
        res.detail = str(e)
    except Exception as e:  # a bug in the case or in the compiler
        res.status, res.stage = ERROR, "case"
        res.detail = f"{type(e).__name__}: {e}"
        if verbose:
            res.detail += "\n" + traceback.format_exc()
    if case.xfail:
        if res.status in (FAIL, ERROR):
            res.detail = f"expected failure ({case.xfail}): [{res.stage or 'check'}] {res.detail}"
            res.status = XFAIL
        elif res.status == PASS:
            res.status, res.detail = XPASS, f"unexpected pass; remove xfail ({case.xfail})"
    res.seconds = time.time() - t0
    return res


def format_table(results: List[CaseResult], verbose: bool = False) -> str:
    w = max([len(r.name) for r in results] + [4])
    lines = [f"{'case':<{w}}  {'backend':<9}  {'status':<6}  {'max_err':>9}  {'time':>6}  detail",
             "-" * (w + 50)]
    for r in results:
        err = f"{r.max_abs_err:.2e}" if r.max_abs_err is not None else "-"
        detail = r.detail if verbose else r.detail.splitlines()[0][:110] if r.detail else ""
        lines.append(f"{r.name:<{w}}  {r.backend:<9}  {r.status:<6}  {err:>9}  {r.seconds:5.1f}s  {detail}")
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, ERROR, SKIP, XFAIL, XPASS)}
    lines.append("-" * (w + 50))
    lines.append("summary: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items()) + f" of {len(results)}")
    return "\n".join(lines)
