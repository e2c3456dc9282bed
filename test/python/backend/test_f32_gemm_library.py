"""Which library runs f32 products (backend/blas.py, lib/Runtime/FlexDnnl.c):
oneDNN's matmul primitive on a host with AVX-512 (oneDNN's avx512_core f32
kernels: AVX512F/BW/VL/DQ), MKL's `sgemm` on AVX2-only hosts, when the
runtime ISA is capped below AVX-512, or when `FLEX_F32_GEMM=blas`; both give
eager's results for every layout (transposed weights and inputs, batched,
broadcast, a bias accumulated, odd sizes, K=1), and a bad choice is a clear
error. One-row products run on the runtime's few-row kernel whatever the
library. Each choice runs in its own process (the choice is made once per
process). What each host should do is read from its CPU flags, so the
tests hold on AVX2-only, AVX-512 and AMX hosts alike.

    PYTHONPATH=python pytest -q test/python/backend/test_f32_gemm_library.py
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
X86 = os.uname().machine in ("x86_64", "AMD64")

# Compiles f32 products of several layouts and prints the library, the
# worst error against a float64 product relative to each output's
# magnitude, the f32 and bf16 products oneDNN ran, and the few-row
# kernel's f32 products.
CHILD = r"""
import sys
import torch_mlir_flex, torch
from torch_mlir_flex.backend import blas
sys.path.insert(0, {here!r})
from test_dense_matmul import Fn

def rand(*s, seed):
    return torch.randn(*s, generator=torch.Generator().manual_seed(seed))

cases = [
    (lambda a, b: a @ b, (33, 70), (70, 45)),                          # plain, odd sizes
    (lambda a, b: a @ b.t(), (37, 19), (53, 19)),                      # linear: weight transposed
    (lambda a, b: a.t() @ b, (29, 7), (29, 13)),                       # weight gradient: input transposed
    (lambda a, b: a.t() @ b.t(), (11, 6), (9, 11)),                    # both transposed
    (lambda a, b: a @ b.transpose(-1, -2), (3, 9, 17), (3, 21, 17)),   # batched
    (lambda a, b: a @ b, (2, 3, 7, 13), (3, 13, 5)),                   # broadcast batch
    (lambda a, b: torch.nn.functional.linear(a, b, b[:, 0] * 3), (30, 24), (50, 24)),  # bias
    (lambda a, b: a @ b, (20, 1), (1, 30)),                            # K = 1
    (lambda a, b: a @ b, (1, 40), (40, 23)),                           # M = 1, weight k-strided
    (lambda a, b: a[::2, ::3] @ b, (14, 39), (13, 5)),                 # no unit stride: the BLAS
    (lambda a, b: a @ b.t(), (1, 40), (300, 40)),                      # one row: the few-row kernel
]
# The bf16 library is chosen first (as in a model with both dtypes), so
# that its choice must leave f32's alone.
bf16_library = blas.bf16_gemm_library()
worst = 0.0
before = blas.dnnl_products(torch.float32), blas.dnnl_products(torch.bfloat16)
gemv_before = blas.gemv_products(dtype=torch.float32)
for i, (fn, sa, sb) in enumerate(cases):
    a, b = rand(*sa, seed=i), rand(*sb, seed=100 + i)
    compiled = torch_mlir_flex.compile(Fn(fn), (a, b))
    assert "flex_gemm_f32" in compiled.lowered_ir, i
    got, ref = compiled(a, b), fn(a.double(), b.double())
    assert got.shape == ref.shape and got.dtype == torch.float32, (i, got.shape, ref.shape)
    worst = max(worst, ((got.double() - ref).abs().max() / ref.abs().max()).item())
print("LIBRARY", blas.f32_gemm_library(), "ERROR", worst,
      "F32", blas.dnnl_products(torch.float32) - before[0],
      "BF16", blas.dnnl_products(torch.bfloat16) - before[1],
      "GEMV", blas.gemv_products(dtype=torch.float32) - gemv_before, "BF16LIB", bf16_library)
"""
# Products oneDNN runs when it runs f32: all but the strided slice's and
# the one-row product's.
ONEDNN_CASES = 9
ENVS = ("FLEX_F32_GEMM", "FLEX_BF16_GEMM", "ONEDNN_MAX_CPU_ISA", "TORCH_MLIR_FLEX_RUNTIME_ISA",
        "TORCH_MLIR_FLEX_ISA", "FLEX_GEMV", "FLEX_BLAS_LIB")


def _run(**env_vars):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), ROOT]))
    for name in ENVS:
        env.pop(name, None)
    env.update(env_vars)
    child = CHILD.replace("{here!r}", repr(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=600)


def _host_runs_onednn_f32():
    """What the host's CPU flags imply: oneDNN's f32 kernels are AVX-512
    ones (avx512_core) where the CPU has AVX512F, BW, VL and DQ (AMX hosts
    have them too); AVX2-only hosts keep MKL."""
    from torch_mlir_flex.backend import cpu_features

    return X86 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_features.host_cpu_flags()


def _parse(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("LIBRARY")][-1].split()
    return line[1], float(line[3]), int(line[5]), int(line[7]), int(line[9]), line[11]


def _check(proc, library, bf16_library=None):
    got_library, error, f32_products, bf16_products, gemv, got_bf16 = _parse(proc)
    if bf16_library is not None:
        assert got_bf16 == bf16_library
    assert got_library == library
    assert f32_products == (ONEDNN_CASES if library == "onednn" else 0), f32_products
    assert bf16_products == 0
    # The one-row product by a weight with contiguous rows: the few-row
    # kernel, never oneDNN or the BLAS.
    assert gemv == 1, gemv
    # f32 accumulation over K <= 70 terms of unit normals: a few f32 ulps of
    # the output's magnitude, whichever library and blocking.
    assert error < 2e-6, error


def test_default_follows_the_host_flags():
    _check(_run(), "onednn" if _host_runs_onednn_f32() else "blas")


@pytest.mark.parametrize("choice", ["onednn", "blas"])
def test_forced_choice(choice):
    # oneDNN forced on an AVX2-only host runs its AVX2 f32 GEMM (not the
    # reference loops), so it runs the same products there.
    if choice == "onednn" and not X86:
        pytest.skip("the onednn-cpu-gomp wheel is an x86-64 library")
    _check(_run(FLEX_F32_GEMM=choice), choice)


@pytest.mark.skipif(not X86, reason="ONEDNN_MAX_CPU_ISA=AVX2 and the AVX2 runtime cap are x86 caps")
def test_avx2_host_behaviour_on_any_x86_host():
    # The runtime ISA capped at AVX2 is what an AVX2-only host chooses by
    # default: MKL. oneDNN forced and capped at AVX2 still runs every
    # product (its AVX2 GEMM), with the same results.
    _check(_run(TORCH_MLIR_FLEX_RUNTIME_ISA="avx2"), "blas")
    _check(_run(FLEX_F32_GEMM="onednn", ONEDNN_MAX_CPU_ISA="AVX2"), "onednn")


def test_bf16_choice_is_separate():
    # bf16 products forced onto the BLAS leave f32 on oneDNN where the host
    # implies it (oneDNN is handed over once, each dtype enabled apart).
    _check(_run(FLEX_BF16_GEMM="blas"), "onednn" if _host_runs_onednn_f32() else "blas", "blas")
    # And bf16 on oneDNN with f32 forced onto the BLAS.
    if X86:
        _check(_run(FLEX_BF16_GEMM="onednn", FLEX_F32_GEMM="blas"), "blas", "onednn")


def test_bad_choice_is_an_error():
    proc = _run(FLEX_F32_GEMM="mkl")
    assert proc.returncode != 0
    assert "FLEX_F32_GEMM='mkl': expected 'onednn' or 'blas'" in proc.stderr
