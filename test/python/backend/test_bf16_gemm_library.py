"""Which library runs bf16 products (backend/blas.py, lib/Runtime/FlexDnnl.c):
oneDNN's matmul primitive on a host with AMX, the BLAS elsewhere or when
`FLEX_BF16_GEMM=blas`; both give eager's results for every layout, and a bad
choice is a clear error. Each choice runs in its own process (the choice is
made once per process, when the runtime is first loaded).

    PYTHONPATH=python pytest -q test/python/backend/test_bf16_gemm_library.py
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Compiles bf16 products of several layouts (2-D, batched, broadcast,
# transposed, a bias accumulated into a bf16 output, a strided slice that
# oneDNN declines) and prints the library and the worst error against eager
# relative to each output's magnitude.
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
]
worst, before = 0.0, blas.dnnl_products()
for i, (fn, sa, sb) in enumerate(cases):
    a, b = rand(*sa, seed=i), rand(*sb, seed=100 + i)
    compiled = torch_mlir_flex.compile(Fn(fn), (a, b))
    assert "flex_gemm_bf16" in compiled.lowered_ir
    got, ref = compiled(a, b).float(), fn(a.float(), b.float())
    assert got.shape == ref.shape, (got.shape, ref.shape)
    worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
print("LIBRARY", blas.bf16_gemm_library(), "ERROR", worst, "ONEDNN_PRODUCTS", blas.dnnl_products() - before)
"""


def _run(choice):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), ROOT]))
    env.pop("FLEX_BF16_GEMM", None)
    if choice is not None:
        env["FLEX_BF16_GEMM"] = choice
    child = CHILD.replace("{here!r}", repr(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("choice", [None, "onednn", "blas"], ids=["default", "onednn", "blas"])
def test_bf16_products_on_each_library(choice):
    from torch_mlir_flex.backend import cpu_features

    proc = _run(choice)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("LIBRARY")][-1].split()
    library, error, products = line[1], float(line[3]), int(line[5])
    expected = choice or ("onednn" if cpu_features.host_has_bf16_dot() else "blas")
    assert library == expected
    # oneDNN ran every product but the strided slice's (no unit stride: the
    # BLAS packs it); the broadcast batch is one call.
    assert products == (5 if library == "onednn" else 0), products
    # One bf16 rounding of the output (f32 accumulation): a few bf16 ulps.
    assert error < 1e-2, error


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
