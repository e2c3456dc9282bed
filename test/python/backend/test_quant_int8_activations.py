"""The opt-in int8-activation path of the int4 products
(lib/Runtime/Quant/FlexQuantI4Dot.c, FlexQuantI4DotX86.c;
TORCH_MLIR_FLEX_QUANT_ACTIVATIONS=int8 or `blas.set_quant_activations`),
called through flex_quant_matmul_i4's C ABI with ctypes (the helpers of
test_quant_kernels.py), on every ISA this host runs (kernel_isas.py, from
/proc/cpuinfo), the runtime capped at it: the counters prove which variant
ran (generic, avx2, avx512_vnni), and the result equals an exact reference
written here with the same quantization of x (per row and group: scale
max|x| / 127, to nearest even, in f32 as the runtime does; the integer sums
exact) within the f32 summation bound (~1e-6 relative). Fewer than 8 rows,
the switch off, a NaN in x or a group not a multiple of 4 keep the f32
kernels.

    PYTHONPATH=python pytest -q test/python/backend/test_quant_int8_activations.py
"""

import os
import subprocess
import sys

import torch_mlir_flex  # noqa: F401  (before torch)
import pytest
import torch

from kernel_isas import FLAGS, HOST_ISAS
from test_quant_kernels import _bound, _check, _int4_case, pack_int4, run_i4
from torch_mlir_flex.backend import blas
from torch_mlir_flex.backend.errors import FlexBackendError

MIN_ROWS = 8  # FLEX_QUANT_I4_DOT_MIN_ROWS


def _variant(isa):
    """The int8-activation kernel variant the runtime must pick under `isa`."""
    if isa == "avx512":
        return "avx512_vnni" if "avx512_vnni" in FLAGS else "avx2"
    return isa


def reference(x, q, sz, group):
    """y with x quantized as the runtime does (f64 sums of exact terms) and
    the bound a correct kernel stays within."""
    M, K = x.shape
    N = q.shape[0]
    xg = x.float().reshape(M, K // group, group)
    sx = xg.abs().amax(-1, keepdim=True) / 127  # f32, as the runtime
    qx = torch.where(sx > 0, xg / sx, torch.zeros_like(xg)).round()  # half to even
    d = torch.einsum("mgk,ngk->mgn", qx.double(), q.double().reshape(N, K // group, group) - 8)
    s, z = sz[..., 0].double(), sz[..., 1].double()  # [groups, N]
    xsum = xg.double().sum(-1)  # [M, groups]
    terms = d * (s[None] * sx.double()) + xsum[..., None] * z[None]
    exact = terms.sum(1)
    magnitude = (d.abs() * (s.abs()[None] * sx.double()) + xg.double().abs().sum(-1)[..., None] * z.abs()[None]).sum(1)
    return exact, _bound(exact, magnitude, K // group + group, x.dtype)


def _run(isa, x, q, sz, group, layout, on_int8=True):
    """run_i4 capped at `isa`; asserts one int4 product on that ISA, and one
    on the int8 path's variant (or none where `on_int8` is False)."""
    before = blas.runtime_isa()
    try:
        assert blas.set_runtime_isa(isa) == isa
        assert blas.quant_int8_activation_kernel() == _variant(isa)
        mine = blas.quant_int8_activation_products(_variant(isa))
        total = blas.quant_int8_activation_products()
        products = blas.quant_products(isa=isa, fmt="int4_cpu")
        got = run_i4(x, pack_int4(q, layout), sz, group, layout)
        assert blas.quant_products(isa=isa, fmt="int4_cpu") == products + 1
        assert blas.quant_int8_activation_products(_variant(isa)) == mine + on_int8
        assert blas.quant_int8_activation_products() == total + on_int8
        return got
    finally:
        blas.set_runtime_isa(before)


# (N, K, group): whole blocks of every layout; 112 (layout 2: 64 + a short
# block of 48; layouts 0, 1: 96 + 16) and 144 x 512 (128 + 16) on threads.
SHAPES = [(192, 256, 32), (112, 256, 32), (96, 512, 128), (144, 512, 64)]
ROWS = [8, 37]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}g{g}" for n, k, g in SHAPES])
@pytest.mark.parametrize("layout", range(3))
@pytest.mark.parametrize("M", ROWS)
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_int8_activations_exact(isa, M, layout, shape, int8_on):
    N, K, group = shape
    x, q, sz, _, _ = _int4_case(M, N, K, group, torch.float32, torch.float32, M + N + layout)
    x[1, :group] = 0  # a group of zeros: scale 0
    x[2, 5] = 40.0  # a group of one large value
    got = _run(isa, x, q, sz, group, layout)
    exact, bound = reference(x, q, sz, group)
    _check(got, exact, bound, "vs the int8 reference")


@pytest.mark.parametrize("xdtype,sdtype", [(torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)],
                         ids=["bf16", "bf16_f32_scales"])
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_bf16(isa, xdtype, sdtype, int8_on):
    x, q, sz, _, _ = _int4_case(24, 112, 256, 32, xdtype, sdtype, 5)
    got = _run(isa, x, q, sz, 32, 2)
    assert got.dtype == xdtype
    exact, bound = reference(x, q, sz, 32)
    _check(got, exact, bound, "bf16 vs the int8 reference")


@pytest.mark.parametrize("isa", HOST_ISAS)
def test_many_rows_two_slabs(isa, int8_on):
    # More rows than a thread's slab of y (256): two slabs per block.
    x, q, sz, _, _ = _int4_case(300, 64, 128, 32, torch.float32, torch.float32, 9)
    got = _run(isa, x, q, sz, 32, 1)
    exact, bound = reference(x, q, sz, 32)
    _check(got, exact, bound, "300 rows")


@pytest.mark.parametrize("isa", HOST_ISAS)
def test_the_int8_error_is_small(isa, int8_on):
    # Against the exact weight-only product: the error of quantizing x
    # (half a step of max|x| / 127 a value), well under 1% of the outputs'
    # scale here; and the same product as the f32 kernels within that.
    x, q, sz, exact, _ = _int4_case(32, 192, 512, 32, torch.float32, torch.float32, 11)
    got = _run(isa, x, q, sz, 32, 2)
    rel = (got.double() - exact).abs().max() / exact.abs().max()
    assert 1e-5 < rel < 1e-2, rel


@pytest.mark.parametrize("isa", HOST_ISAS)
def test_few_rows_stay_f32(isa, int8_on):
    # Fewer rows than the threshold (decode): the f32 kernels, exact bound.
    x, q, sz, exact, bound = _int4_case(MIN_ROWS - 1, 192, 256, 32, torch.float32, torch.float32, 2)
    got = _run(isa, x, q, sz, 32, 2, on_int8=False)
    _check(got, exact, bound, "f32 path")


@pytest.mark.parametrize("isa", HOST_ISAS)
def test_off_by_default_and_when_switched_off(isa):
    assert blas.quant_activations() == "f32"  # this process's default
    x, q, sz, exact, bound = _int4_case(40, 192, 256, 32, torch.float32, torch.float32, 4)
    _check(_run(isa, x, q, sz, 32, 0, on_int8=False), exact, bound, "switch off")


@pytest.mark.parametrize("isa", HOST_ISAS)
def test_nan_and_small_groups_stay_f32(isa, int8_on):
    x, q, sz, exact, bound = _int4_case(20, 64, 128, 32, torch.float32, torch.float32, 6)
    x[3, 7] = float("nan")
    got = _run(isa, x, q, sz, 32, 1, on_int8=False)  # NaN is kept, as weight-only
    assert torch.isnan(got[3]).all() and not torch.isnan(got[torch.arange(20) != 3]).any()
    x, q, sz, exact, bound = _int4_case(20, 64, 128, 2, torch.float32, torch.float32, 6)
    _check(_run(isa, x, q, sz, 2, 1, on_int8=False), exact, bound, "group of 2")


def test_switch_names():
    assert blas.set_quant_activations("int8") == "int8"
    assert blas.set_quant_activations(None) == "f32"
    with pytest.raises(FlexBackendError, match="unknown quantized-product activations 'int4'"):
        blas.set_quant_activations("int4")
    with pytest.raises(FlexBackendError, match="unknown int8-activation kernel 'sse9'"):
        blas.quant_int8_activation_products("sse9")


@pytest.mark.parametrize("value,expect", [("int8", "MODE int8"),
                                          ("fp8", "TORCH_MLIR_FLEX_QUANT_ACTIVATIONS='fp8'")])
def test_environment_switch(value, expect):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"),
               TORCH_MLIR_FLEX_QUANT_ACTIVATIONS=value)
    proc = subprocess.run([sys.executable, "-c", "from torch_mlir_flex.backend import blas; "
                           "print('MODE', blas.quant_activations())"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert expect in proc.stdout + proc.stderr
    assert (proc.returncode == 0) == (value != "fp8")
