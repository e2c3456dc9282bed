"""The int4 kernels read nothing outside the weight's bytes and its scales
and zeros (lib/Runtime/Quant/: the few-row kernels prefetch the weight
bytes 8 KB ahead and the next block's scales, past the end of both at the
last blocks; a prefetch never faults, a load there would). Each weight and
its sz are copied to the end of a mapping whose next page is PROT_NONE, and
every ISA this host runs (kernel_isas.py) computes the product at 1 and 5
rows, checked against the exact product (f64) within the f32 summation
bound. Runs in a child process, so that a fault is a failed test with its
output rather than the end of pytest.

    PYTHONPATH=python pytest -q test/python/backend/test_quant_i4_bounds.py
"""

import os
import subprocess
import sys

import pytest

from kernel_isas import HOST_ISAS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

CHILD = r"""
import ctypes, mmap, sys
import torch_mlir_flex  # noqa: F401
import torch
from torch_mlir_flex.backend import blas

isa, N, K, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
blas.runtime_library()
lib = ctypes.CDLL(blas.runtime_library_path())
lib.flex_quant_matmul_i4.argtypes = [ctypes.c_int64] * 16
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE = mmap.PAGESIZE
keep = []

def at_page_end(t):
    # t's bytes copied so that they end where a PROT_NONE page begins
    nbytes = t.numel() * t.element_size()
    size = -(-nbytes // PAGE) * PAGE + PAGE
    m = mmap.mmap(-1, size)
    buf = (ctypes.c_char * size).from_buffer(m)
    base = ctypes.addressof(buf)
    assert libc.mprotect(base + size - PAGE, PAGE, 0) == 0
    start = base + size - PAGE - nbytes
    ctypes.memmove(start, t.data_ptr(), nbytes)
    keep.append((m, buf))
    return start

g = torch.Generator().manual_seed(N + K)
q = torch.randint(0, 16, (N, K), generator=g, dtype=torch.int32)
packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
scale = torch.rand(K // group, N, generator=g) * 0.02 + 0.001
zero = torch.randn(K // group, N, generator=g) * 0.05
sz = torch.stack([scale, zero], dim=-1).contiguous()
# the layout of this host's torch packing (as test_quant_kernels.py finds it)
probe = torch.randint(0, 16, (128, 64), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
pp = torch.ops.aten._convert_weight_to_int4pack_for_cpu(probe, 1)
for layout, bn in ((2, 64), (1, 32), (0, 32)):
    b = probe.reshape(128 // bn, bn, 64).permute(0, 2, 1)
    lo, hi = (b[..., 0::2], b[..., 1::2]) if layout == 0 else (b[..., :bn // 2], b[..., bn // 2:])
    if torch.equal(pp, (lo | (hi << 4)).to(torch.uint8).reshape(128, 32)):
        break
else:
    raise SystemExit("torch packs int4 in a layout none of 0/1/2")
w_at, sz_at = at_page_end(packed), at_page_end(sz)
assert blas.set_runtime_isa(isa) == isa
s = sz[..., 0].double().repeat_interleave(group, 0).T
z = sz[..., 1].double().repeat_interleave(group, 0).T
w = (q.double() - 8) * s + z
for M in (1, 5):
    x = torch.randn(M, K, generator=g)
    y = torch.full((M, N), float("nan"))
    lib.flex_quant_matmul_i4(M, N, K, x.data_ptr(), 0, K, w_at, 0, sz_at, 0, y.data_ptr(), 0, N,
                             group, layout, 0)
    exact = x.double() @ w.T
    bound = 2 * (K + 4) * 2.0**-24 * (x.double().abs() @ (23 * s.abs() + z.abs()).T) + 1e-30
    err = (y.double() - exact).abs()
    assert (err <= bound).all(), f"M={M}: error/bound {(err / bound).max().item():.3g}"
print("OK", isa, blas.quant_kernel())
"""

# (N, K, group): one thread (N*K below the threads' threshold) and two.
SHAPES = [(128, 256, 32), (256, 512, 64)]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}g{g}" for n, k, g in SHAPES])
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_int4_reads_only_its_bytes(isa, shape):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop("TORCH_MLIR_FLEX_RUNTIME_ISA", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, isa, *map(str, shape)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    assert f"OK {isa} {isa}" in proc.stdout, proc.stdout
