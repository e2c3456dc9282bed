"""Registry of end-to-end cases: a model, its inputs, a tolerance, backends.

    from ..registry import register_case, qkv, TOL_F32

    @register_case(inputs=lambda: qkv(1, 4, 64, 32), tags=("mask",))
    def causal():
        return CausalModel()          # the decorated function is the model factory

`inputs` returns either one tuple of tensors (the example arguments used for
`torch.export`, also run and compared) or a list of such tuples; every set
is run through the compiled callable and through eager PyTorch and compared.
The first set is the export example. `xfail="reason"` marks a known
limitation: a failure is reported as XFAIL (not counted), a pass as XPASS. `check(runs)` may add assertions across
runs (`runs` is a list of `Run(args, got, expected)`); it returns None when
fine or a message describing the failure.

Tolerances (`allclose(got, eager, rtol, atol)` element-wise, after casting
both to float64; equal infinities are equal, NaN never is):

- f32: rtol 1e-3, atol 1e-5 (`TOL_F32`);
- f16: rtol 1e-2, atol 1e-2 (`TOL_F16`), bf16: rtol 2e-2, atol 2e-2
  (`TOL_BF16`). Eager rounds the scores and the softmax to the input dtype
  before the matmuls while flex.attention works in f32 and rounds once, so
  the two differ by a few ulps of the output dtype.
"""

import dataclasses
import math
import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

TOL_F32 = dict(rtol=1e-3, atol=1e-5)
TOL_F16 = dict(rtol=1e-2, atol=1e-2)
TOL_BF16 = dict(rtol=2e-2, atol=2e-2)


class Run(NamedTuple):
    args: Tuple[Any, ...]
    got: Any
    expected: Any


@dataclasses.dataclass
class E2ECase:
    name: str
    model_factory: Callable[[], Any]
    inputs_factory: Callable[[], Any]
    rtol: float = TOL_F32["rtol"]
    atol: float = TOL_F32["atol"]
    backends: Optional[Tuple[str, ...]] = None  # None: every pipeline
    dynamic_shapes: Optional[Callable[[], Any]] = None
    check: Optional[Callable[[List[Run]], Optional[str]]] = None
    tags: Tuple[str, ...] = ()
    theme: str = ""
    description: str = ""
    seed: int = 0
    xfail: Optional[str] = None  # reason: a known limitation (reported XFAIL, not a failure)

    def input_sets(self) -> List[Tuple[Any, ...]]:
        import torch

        sets = self.inputs_factory()
        if isinstance(sets, torch.Tensor):
            return [(sets,)]
        if isinstance(sets, list):
            return [tuple(s) if not isinstance(s, torch.Tensor) else (s,) for s in sets]
        return [tuple(sets)]

    def supports(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


_REGISTRY: Dict[str, E2ECase] = {}


def register_case(name: Optional[str] = None, *, inputs: Callable[[], Any], rtol: Optional[float] = None,
                  atol: Optional[float] = None, tol: Optional[dict] = None,
                  backends: Optional[Sequence[str]] = None, dynamic_shapes=None, check=None,
                  tags: Sequence[str] = (), seed: int = 0, xfail: Optional[str] = None):
    """Decorator: registers the decorated model factory as an e2e case."""

    def deco(factory):
        case_name = name or factory.__name__
        if case_name in _REGISTRY:
            raise ValueError(f"duplicate e2e case {case_name!r}")
        t = dict(TOL_F32)
        if tol:
            t.update(tol)
        if rtol is not None:
            t["rtol"] = rtol
        if atol is not None:
            t["atol"] = atol
        theme = factory.__module__.rsplit(".", 1)[-1]
        doc = (factory.__doc__ or "").strip().splitlines()
        _REGISTRY[case_name] = E2ECase(
            name=case_name, model_factory=factory, inputs_factory=inputs, rtol=t["rtol"], atol=t["atol"],
            backends=tuple(backends) if backends is not None else None, dynamic_shapes=dynamic_shapes,
            check=check, tags=tuple(tags), theme=theme, description=doc[0] if doc else "", seed=seed,
            xfail=xfail)
        return factory

    return deco


def load_all_cases() -> None:
    """Imports every module of `cases/` (each registers its cases)."""
    from . import cases  # noqa: F401


def all_cases(filter_regex: Optional[str] = None) -> List[E2ECase]:
    load_all_cases()
    cases = list(_REGISTRY.values())
    if filter_regex:
        r = re.compile(filter_regex)
        cases = [c for c in cases if r.search(c.name) or r.search(c.theme)]
    return cases


def get_case(name: str) -> E2ECase:
    load_all_cases()
    return _REGISTRY[name]


# --------------------------------------------------------------------------
# Input helpers (N(0,1) tensors; seeded by the runner before each factory)
# --------------------------------------------------------------------------


def randn(*shape, dtype=None):
    import torch

    return torch.randn(*shape, dtype=dtype or torch.float32)


def qkv(B, H, S, E, *, Hkv=None, N=None, Ev=None, dtype=None):
    """(q [B,H,S,E], k [B,Hkv,N,E], v [B,Hkv,N,Ev]) from N(0,1)."""
    Hkv = Hkv or H
    N = N or S
    Ev = Ev or E
    return (randn(B, H, S, E, dtype=dtype), randn(B, Hkv, N, E, dtype=dtype), randn(B, Hkv, N, Ev, dtype=dtype))


def alibi_slopes(H):
    import torch

    return torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)])


LN2 = math.log(2.0)
