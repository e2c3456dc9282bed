"""Math ops without an LLVM lowering (flex-expand-math) through compile():
exact GELU and torch.erf in models and in score_mods, the inverse
hyperbolic functions, against eager.

    PYTHONPATH=python pytest -q test/python/backend/test_math_ops.py
"""

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

BACKENDS = ["reference", "tiled"]


def _check(model, args, backend, atol=1e-6, rtol=0.0):
    fn = torch_mlir_flex.compile(model, args, backend=backend)
    got, exp = fn(*args), model(*args)
    assert got.dtype == exp.dtype and got.shape == exp.shape
    torch.testing.assert_close(got, exp, atol=atol, rtol=rtol)
    return fn


class Gelu(torch.nn.Module):
    def forward(self, x):
        return F.gelu(x)  # approximate='none': 0.5 x (1 + erf(x / sqrt 2))


class Unary(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class ErfScore(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + torch.erf(s * 0.5))


class GeluBlock(torch.nn.Module):
    """Attention followed by an exact-GELU MLP (BERT/GPT-NeoX style)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.w = torch.nn.Parameter(torch.randn(16, 32, generator=g) * 0.2)

    def forward(self, q, k, v):
        a = flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s * torch.erf(s.abs() + 0.5))
        return F.gelu(a @ self.w)


def _x(*shape, scale=3.0, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_gelu_matches_eager(backend):
    x = torch.cat([_x(4, 64).flatten(), torch.tensor([0.0, -0.0, 8.0, -8.0, 30.0, -30.0, 1e-3, -1e-3, 0.5, -0.5])]).view(2, -1)
    fn = _check(Gelu(), (x,), backend)
    assert "math.erf" in fn.linalg_ir and "math.erf" not in fn.lowered_ir


@pytest.mark.parametrize("backend", BACKENDS)
def test_erf_in_score_mod(backend):
    q, k, v = (_x(1, 2, 40, 16, scale=1.0, seed=i) for i in range(3))
    _check(ErfScore(), (q, k, v), backend, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_erf_in_modifier_and_model(backend):
    q, k, v = (_x(1, 2, 24, 16, scale=1.0, seed=i) for i in range(3))
    _check(GeluBlock(), (q, k, v), backend, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,fn,lo,hi", [
    ("erf", torch.erf, -6, 6),
    ("erfc", torch.erfc, -4, 4),
    ("asinh", torch.asinh, -1e4, 1e4),
    ("acosh", torch.acosh, 1, 1e4),
    ("atanh", torch.atanh, -0.999, 0.999),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_unary_f32(name, fn, lo, hi, backend):
    x = torch.linspace(lo, hi, 1001).view(7, 143)
    _check(Unary(fn), (x,), backend, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("backend", ["reference"])
def test_erf_f64_uses_libm(backend):
    x = torch.linspace(-5, 5, 101, dtype=torch.float64)
    _check(Unary(torch.erf), (x,), backend, atol=1e-15, rtol=0.0)


def test_gelu_bf16_reference():
    x = _x(8, 32).to(torch.bfloat16)
    _check(Gelu(), (x,), "reference", atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exp_over_its_range(backend):
    # The tiled pipeline computes exp with a polynomial (flex-expand-math's
    # approximate-exp) guarded at both ends: a few ulps in the normal range,
    # +inf above ln(FLT_MAX), 0 or a denormal's magnitude below, NaN kept.
    x = torch.cat([torch.linspace(-110.0, 90.0, 200001),
                   torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 88.72, 88.73, -87.5])])
    fn = torch_mlir_flex.compile(Unary(torch.exp), (x,), backend=backend)
    got, exp = fn(x), torch.exp(x)
    normal = exp.abs() >= torch.finfo(torch.float32).tiny
    rel = ((got - exp).abs() / exp.abs())[normal & exp.isfinite()]
    assert rel.max().item() < 6e-7, rel.max().item()
    assert ((got - exp).abs()[~normal & ~exp.isnan()]).max().item() <= 2 * torch.finfo(torch.float32).tiny
    assert torch.equal(got.isinf(), exp.isinf()) and torch.equal(got.isnan(), exp.isnan())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_silu_tiled(dtype):
    # SiLU = x * sigmoid(x), whose exp is the polynomial in the tiled pipeline.
    x = _x(64, 1000, scale=8.0).to(dtype)
    tol = dict(atol=1e-6, rtol=1e-6) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    _check(Unary(F.silu), (x,), "tiled", **tol)
