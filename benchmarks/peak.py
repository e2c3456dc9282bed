"""The machine's measured peak: GFLOP/s of a large square matmul through
torch (its BLAS / oneDNN kernels), per dtype, best of a few calls. On a
shared machine any one sample may be low: the benchmark calibrates before
and after its run, samples once after each configuration, keeps the best."""

import time

import torch


def matmul_peak_gflops(dtype, n=4096, reps=5):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(dtype)
    b = torch.randn(n, n, generator=g).to(dtype)
    torch.mm(a, b)  # warm-up (thread pool, packing buffers)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2.0 * n ** 3 / best / 1e9


def calibrate(dtypes, n=4096, reps=5):
    """{dtype name: peak GFLOP/s} for each torch dtype in `dtypes`."""
    return {dtype_name(dt): matmul_peak_gflops(dt, n, reps) for dt in dtypes}


def best(*calibrations):
    """Per dtype, the highest of several calibrations."""
    return {k: max(c[k] for c in calibrations) for k in calibrations[0]}


DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def dtype_name(dtype):
    for name, dt in DTYPES.items():
        if dt == dtype:
            return name
    raise ValueError(f"unsupported dtype {dtype}")
