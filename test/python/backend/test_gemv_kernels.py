"""The few-row product kernels of the runtime, one per ISA
(lib/Runtime/Gemv/: FlexGemvGeneric.c, FlexGemvAvx2.c, FlexGemvAvx512.c),
each tested on this host where the host can run it: generic always, avx2
with AVX2 + FMA, avx512 with AVX512F (its bf16 kernel with AVX512-BF16;
without it the AVX2 one runs bf16 weights). Every variant runs the compiled
path (torch_mlir_flex.compile of a Linear) with its ISA forced
(`blas.set_runtime_isa`), its counter proves which kernel ran, and the
result is compared with the exact product within the f32 summation bound.
What the host should run is read from /proc/cpuinfo (kernel_isas.py), not
asked of the runtime.

    PYTHONPATH=python pytest -q test/python/backend/test_gemv_kernels.py
"""

import os
import subprocess
import sys
import warnings

import torch_mlir_flex  # noqa: F401  (before torch)
import pytest
import torch

from kernel_isas import FLAGS, HOST_ISAS, X86
from torch_mlir_flex.backend import blas
from torch_mlir_flex.backend.errors import FlexBackendError

warnings.filterwarnings("ignore")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _expected_kernel(isa, dtype):
    """The ISA whose kernel runs `dtype` weights with the runtime capped at
    `isa` (one this host has)."""
    if dtype == torch.bfloat16 and isa == "avx512" and not {"avx512bw", "avx512_bf16"} <= FLAGS:
        return "avx2"  # no VDPBF16PS: bf16 weights widened on AVX2
    return isa


class Lin(torch.nn.Module):
    def __init__(self, k, n, bias, dtype):
        super().__init__()
        self.lin = torch.nn.Linear(k, n, bias=bias, dtype=dtype)

    def forward(self, x):
        return self.lin(x)


# name: (rows of x, K, N, bias). K: tails of each vector width (37: 8- and
# 16-lane blocks and a masked tail of 5; 300: 32-pair bf16 blocks; 897:
# the unrolled loops, a tail of 1); N * K above 2^16 splits between threads.
CASES = {
    "one_row": (1, 37, 29, False),
    "one_row_bias": (1, 37, 29, True),
    "one_row_long_k": (1, 300, 7, False),
    "one_row_threads": (1, 897, 1203, False),
    "two_rows": (2, 37, 29, False),
    "three_rows_long_k": (3, 300, 7, False),
    "four_rows": (4, 70, 29, False),
    "four_rows_threads": (4, 897, 1203, True),
    "k_below_one_vector": (3, 5, 9, False),
}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
PRODUCTS = [(d, name) for d in DTYPES for name in CASES]
_compiled = {}


def _model(name, dtype):
    """A compiled Linear of case `name` (compiled once for every ISA) and
    its input."""
    key = (name, dtype)
    if key not in _compiled:
        rows, k, n, bias = CASES[name]
        torch.manual_seed(len(_compiled))
        model = Lin(k, n, bias, dtype)
        x = torch.randn(rows, k, generator=torch.Generator().manual_seed(7)).to(dtype)
        compiled = torch_mlir_flex.compile(model, (x,))
        gemm = "flex_gemm_bf16" if dtype == torch.bfloat16 else "flex_gemm_f32"
        assert gemm in compiled.lowered_ir, f"{gemm} not called"
        _compiled[key] = (model, compiled, x)
    return _compiled[key]


def _exact_and_bound(model, x, out_dtype):
    """The exact product (f64) and the error a correct kernel stays within:
    the f32 summation bound (K + 1 terms with the bias) K' * eps *
    sum_k |x_k w_k| (+ |bias|), and for a bf16 output half a bf16 ulp of
    the result on top."""
    w = model.lin.weight.double()
    exact = x.double() @ w.t()
    magnitude = x.double().abs() @ w.abs().t()
    terms = w.shape[1]
    if model.lin.bias is not None:
        exact = exact + model.lin.bias.double()
        magnitude = magnitude + model.lin.bias.double().abs()
        terms += 1
    bound = terms * 2.0**-24 * magnitude
    if out_dtype == torch.bfloat16:
        bound = 2.0**-8 * exact.abs() + 2 * bound
    return exact, bound


@pytest.fixture
def runtime_isa():
    """Restores the runtime's ISA after the test."""
    before = blas.runtime_isa()
    yield
    blas.set_runtime_isa(before)


@pytest.mark.parametrize("dtype,name", PRODUCTS, ids=[f"{d}-{n}" for d, n in PRODUCTS])
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_kernel_variant(isa, dtype, name, runtime_isa):
    dtype = DTYPES[dtype]
    model, compiled, x = _model(name, dtype)
    assert blas.set_runtime_isa(isa) == isa
    kernel = _expected_kernel(isa, dtype)
    assert blas.gemv_kernel(dtype) == kernel
    before, total = blas.gemv_products(isa=kernel, dtype=dtype), blas.gemv_products()
    got = compiled(x)
    # one product, on this variant's kernel and no other
    assert blas.gemv_products(isa=kernel, dtype=dtype) == before + 1
    assert blas.gemv_products() == total + 1
    assert got.dtype == dtype
    exact, bound = _exact_and_bound(model, x, dtype)
    err = (got.double() - exact).abs()
    assert (err <= bound).all(), (err / bound).max()


def test_variants_agree_with_each_other(runtime_isa):
    # The same f32 product on every variant: each within the bound, and
    # apart by no more than twice it (they sum in different orders).
    model, compiled, x = _model("four_rows_threads", torch.float32)
    results = {}
    for isa in HOST_ISAS:
        blas.set_runtime_isa(isa)
        results[isa] = compiled(x).double()
    _, bound = _exact_and_bound(model, x, torch.float32)
    for isa, got in results.items():
        assert ((got - results["generic"]).abs() <= 2 * bound).all(), isa


def test_runtime_sees_the_host_isas():
    # The runtime's own choice (__builtin_cpu_supports) agrees with
    # /proc/cpuinfo; its default is the host's highest ISA.
    assert list(blas.runtime_isas()) == HOST_ISAS
    assert blas.runtime_isa_names()[0] == "generic"
    if X86:
        assert blas.runtime_isa_names() == ("generic", "avx2", "avx512")


def test_forcing_an_isa_is_capped_by_the_host(runtime_isa):
    # Asking for an ISA above the host's gives the host's highest below it.
    for asked in blas.runtime_isa_names():
        got = blas.set_runtime_isa(asked)
        names = blas.runtime_isa_names()
        expected = [i for i in HOST_ISAS if names.index(i) <= names.index(asked)][-1]
        assert got == expected == blas.runtime_isa()
    assert blas.set_runtime_isa(None) == HOST_ISAS[-1]


def test_unknown_isa_is_an_error(runtime_isa):
    with pytest.raises(FlexBackendError, match="unknown runtime ISA 'sse9'"):
        blas.set_runtime_isa("sse9")
    with pytest.raises(FlexBackendError, match="float32 or bfloat16"):
        blas.gemv_products(dtype=torch.float16)


def _child(env_isa, code, var="TORCH_MLIR_FLEX_RUNTIME_ISA"):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), ROOT]))
    env.pop("TORCH_MLIR_FLEX_RUNTIME_ISA", None)
    env.pop("TORCH_MLIR_FLEX_ISA", None)
    env[var] = env_isa
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)


def test_environment_forces_the_isa():
    # TORCH_MLIR_FLEX_RUNTIME_ISA, read when the runtime is loaded: the
    # generic kernels for both dtypes, before any product ran.
    proc = _child("generic", "from torch_mlir_flex.backend import blas; import torch; "
                  "print('ISA', blas.runtime_isa(), blas.gemv_kernel(torch.float32), "
                  "blas.gemv_kernel(torch.bfloat16))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ISA generic generic generic" in proc.stdout


def test_compiled_code_cap_caps_the_runtime_too():
    # TORCH_MLIR_FLEX_ISA alone (the compiled code's cap) caps the runtime
    # kernels as well: one variable runs everything as on an AVX2 host.
    proc = _child("avx2", "from torch_mlir_flex.backend import blas; print('ISA', blas.runtime_isa())",
                  var="TORCH_MLIR_FLEX_ISA")
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = ("generic", "avx2", "avx512")
    expected = [i for i in HOST_ISAS if names.index(i) <= names.index("avx2")][-1]
    assert f"ISA {expected}" in proc.stdout


def test_environment_with_an_unknown_isa_is_an_error():
    proc = _child("avx9000", "from torch_mlir_flex.backend import blas; blas.runtime_isa()")
    assert proc.returncode != 0
    assert "TORCH_MLIR_FLEX_RUNTIME_ISA='avx9000': unknown runtime ISA 'avx9000'" in proc.stderr
