"""Which library runs bf16 products (backend/blas.py, lib/Runtime/FlexDnnl.c):
oneDNN's matmul primitive on a host with bf16 dot products (AVX512-BF16 or
AMX), the BLAS elsewhere or when `FLEX_BF16_GEMM=blas`; both give eager's
results for every layout, and a bad choice is a clear error. A one-row
product runs on the runtime's own few-row kernel of the host's ISA
(lib/Runtime/Gemv/) whatever the library. Each choice runs in its own
process (the choice is made once per process, when the runtime is first
loaded). What each host should do is read from its CPU flags; oneDNN capped
at AVX2 (`ONEDNN_MAX_CPU_ISA`) shows an AVX2-only host's behaviour on every
x86 host.

    PYTHONPATH=python pytest -q test/python/backend/test_bf16_gemm_library.py
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Compiles bf16 products of several layouts (2-D, batched, broadcast,
# transposed, a bias accumulated into a bf16 output, a strided slice that
# oneDNN declines, one row: the few-row kernel's) and prints the library,
# the worst error against eager relative to each output's magnitude, the
# products oneDNN ran, and the ISA and count of the few-row kernel's.
CHILD = r"""
import sys
import torch_mlir_flex, torch
from torch_mlir_flex.backend import blas
sys.path.insert(0, {here!r})
from test_dense_matmul import Fn

def rand(*s, seed):
    return torch.randn(*s, generator=torch.Generator().manual_seed(seed)).bfloat16()

cases = [
    (lambda a, b: a @ b, (33, 70), (70, 45)),
    (lambda a, b: a @ b.transpose(-1, -2), (3, 9, 40), (3, 17, 40)),
    (lambda a, b: a @ b, (2, 3, 7, 13), (3, 13, 5)),
    (lambda a, b: a.t() @ b, (13, 7), (13, 5)),
    (lambda a, b: torch.nn.functional.linear(a, b, b[:, 0] * 3), (300, 24), (5000, 24)),
    (lambda a, b: a[::2, ::3] @ b, (14, 39), (13, 5)),
    (lambda a, b: a @ b.t(), (1, 40), (300, 40)),
]
worst, before, gemv_before = 0.0, blas.dnnl_products(), blas.gemv_products(dtype=torch.bfloat16)
for i, (fn, sa, sb) in enumerate(cases):
    a, b = rand(*sa, seed=i), rand(*sb, seed=100 + i)
    compiled = torch_mlir_flex.compile(Fn(fn), (a, b))
    assert "flex_gemm_bf16" in compiled.lowered_ir
    got, ref = compiled(a, b).float(), fn(a.float(), b.float())
    assert got.shape == ref.shape, (got.shape, ref.shape)
    worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
print("LIBRARY", blas.bf16_gemm_library(), "ERROR", worst, "ONEDNN_PRODUCTS", blas.dnnl_products() - before,
      "GEMV", blas.gemv_kernel(torch.bfloat16), blas.gemv_products(dtype=torch.bfloat16) - gemv_before)
"""

X86 = os.uname().machine in ("x86_64", "AMD64")


def _run(choice, onednn_isa=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), ROOT]))
    for name in ("FLEX_BF16_GEMM", "ONEDNN_MAX_CPU_ISA", "TORCH_MLIR_FLEX_RUNTIME_ISA"):
        env.pop(name, None)
    if choice is not None:
        env["FLEX_BF16_GEMM"] = choice
    if onednn_isa is not None:
        env["ONEDNN_MAX_CPU_ISA"] = onednn_isa
    child = CHILD.replace("{here!r}", repr(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=600)


def _onednn_runs_bf16(flags):
    """Whether oneDNN (3.2) has a bf16 matmul kernel for a host with CPU
    `flags`, True / False, or None where not known. It has one from
    AVX512-core (AVX512F/BW/VL/DQ; bf16 emulated without AVX512-BF16) up;
    with AVX2 only, its reference loops, which FlexDnnl.c declines (the
    BLAS runs the product; measured: 0 products on a Zen 1, and on a Zen 4
    with ONEDNN_MAX_CPU_ISA=AVX2). AVX2 hosts with AVX-NE-CONVERT (Sierra
    Forest, Arrow Lake) were not measured."""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return True
    return False if "avx_ne_convert" not in flags else None


def _gemv_kernel(flags):
    """The ISA of the few-row kernel for bf16 weights on a host with CPU
    `flags`."""
    if X86 and {"avx512f", "avx512bw", "avx512_bf16"} <= flags:
        return "avx512"
    return "avx2" if X86 and {"avx2", "fma"} <= flags else "generic"


def _check_run(proc, choice, onednn_flags):
    """The child's library, oneDNN products and few-row kernel are what a
    host with `onednn_flags` (the CPU flags oneDNN may use) should show."""
    from torch_mlir_flex.backend import cpu_features

    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("LIBRARY")][-1].split()
    library, error, products, gemv_isa, gemv_products = line[1], float(line[3]), int(line[5]), line[7], int(line[8])
    expected = choice or ("onednn" if cpu_features.host_has_bf16_dot() else "blas")
    assert library == expected
    # oneDNN ran every product but the strided slice's (no unit stride: the
    # BLAS packs it) and the one-row product's; the broadcast batch is one
    # call. Where it has no bf16 kernel for the host, none.
    runs = _onednn_runs_bf16(onednn_flags) if library == "onednn" else False
    if runs is None:
        assert products in (0, 5), products
    else:
        assert products == (5 if runs else 0), (products, runs)
    # The one-row product: the few-row kernel of the host's ISA, never
    # oneDNN or the BLAS's one-thread GEMV.
    assert (gemv_isa, gemv_products) == (_gemv_kernel(cpu_features.host_cpu_flags()), 1)
    # One bf16 rounding of the output (f32 accumulation): a few bf16 ulps.
    assert error < 1e-2, error


@pytest.mark.parametrize("choice", [None, "onednn", "blas"], ids=["default", "onednn", "blas"])
def test_bf16_products_on_each_library(choice):
    from torch_mlir_flex.backend import cpu_features

    _check_run(_run(choice), choice, cpu_features.host_cpu_flags())


@pytest.mark.skipif(not X86, reason="ONEDNN_MAX_CPU_ISA=AVX2 is an x86 cap")
def test_onednn_capped_at_avx2_leaves_bf16_to_the_blas():
    # What an AVX2-only host (Zen 1) does with FLEX_BF16_GEMM=onednn, on any
    # x86 host: oneDNN has only reference loops for bf16 there, so every
    # product falls back to the BLAS, with the same results.
    from torch_mlir_flex.backend import cpu_features

    avx2_flags = cpu_features.host_cpu_flags() - {f for f in cpu_features.host_cpu_flags()
                                                  if f.startswith(("avx512", "amx", "avx_ne", "avx_vnni"))}
    _check_run(_run("onednn", onednn_isa="AVX2"), "onednn", avx2_flags)


def test_bad_choice_is_an_error():
    proc = _run("mkl")
    assert proc.returncode != 0
    assert "FLEX_BF16_GEMM='mkl': expected 'onednn' or 'blas'" in proc.stderr


def test_onednn_library_is_installed():
    # The pinned onednn-cpu-gomp wheel (requirements.txt) is found through
    # its file list, not a path of this machine.
    from torch_mlir_flex.backend import blas

    path = blas.dnnl_library_path()
    assert path is not None and os.path.basename(path) == "libdnnl.so.3"
