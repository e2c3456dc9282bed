"""Times flex_gemm_u8s8 (FlexQuantInt8Gemm*.c) against torch._int_mm in
one process: uint8 A [M,K] times B = t(w), w int8 [N,K] (a dynamic-
activation int8 linear's product), each kernel variant this CPU runs, the
runtime's threads and torch's at their defaults. Each product is timed
alone, its best over the rounds (a shared host stalls threads at times).

    PYTHONPATH=python python lib/Runtime/Quant/int8_gemm_bench.py [--shape M,K,N ...]
"""

import argparse
import ctypes
import platform
import time

import torch_mlir_flex  # noqa: F401  (before torch)
import torch

from torch_mlir_flex.backend import blas


def _cpu_name() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def _best(fn, rounds, inner):
    fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t) / inner)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", action="append", default=None, help="M,K,N")
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in (args.shape or ["128,896,4864", "1,896,4864"])]
    blas.runtime_library()
    lib = ctypes.CDLL(blas.runtime_library_path())
    lib.flex_gemm_u8s8.argtypes = [ctypes.c_int64] * 16
    variants = [v for v in blas.int8_gemm_variants() if blas.int8_gemm_available(v)]
    print(f"host: {_cpu_name()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")
    for M, K, N in shapes:
        a = torch.randint(0, 256, (M, K), dtype=torch.uint8)
        w = torch.randint(-128, 128, (N, K), dtype=torch.int8)
        c = torch.empty(M, N, dtype=torch.int32)
        ref = torch._int_mm(a, w.t())
        inner = max(1, int(2e8 // (M * N * K)))
        ops = 2 * M * N * K
        t = _best(lambda: torch._int_mm(a, w.t()), args.rounds, inner)
        print(f"M={M} K={K} N={N}: torch._int_mm {t * 1e6:9.1f} us {ops / t / 1e9:7.1f} GOP/s "
              f"{N * K / t / 1e9:6.2f} GB/s of weight")
        for v in variants:
            blas.set_int8_gemm_kernel(v)
            call = lambda: lib.flex_gemm_u8s8(M, N, K, a.data_ptr(), 0, K, 1, w.data_ptr(), 0, 1, K,  # noqa: E731
                                                c.data_ptr(), 0, N, 1, 0)
            call()
            assert torch.equal(c, ref), v
            t = _best(call, args.rounds, inner)
            print(f"  flex {v:12s} {t * 1e6:9.1f} us {ops / t / 1e9:7.1f} GOP/s "
                  f"{N * K / t / 1e9:6.2f} GB/s of weight")
        blas.set_int8_gemm_kernel(None)


if __name__ == "__main__":
    main()
