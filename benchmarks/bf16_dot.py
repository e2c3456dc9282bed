"""bf16 against f32 on the tiled backend: causal attention through the user
path, bf16 with flex-to-flash's AVX512-BF16 dot products ("bf16-dot") and
without them ("bf16-generic": bf16 extended to f32 for the FMA kernels),
in GFLOP/s (4 * B * H * S^2 * D / 2 for the causal half).

    PYTHONPATH=python python -m benchmarks.bf16_dot [--seq 2048] [--dim 128] [--reps 5]
        [--one-thread]

Times are medians over interleaved rounds (the variants take turns, so a
load change on the shared machine hits all of them). Needs a CPU with
avx512_bf16 for the bf16-dot variant (else it is left out).
"""

import argparse
import statistics
import time


import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch

from benchmarks import host as hs
from benchmarks.cases import Causal
from torch_mlir_flex.backend.cpu_features import host_has_avx512_bf16
from torch_mlir_flex.backend.pipelines import PIPELINES, find_openmp_runtime, tiled_pipeline


def _variants(one_thread):
    omp = find_openmp_runtime() is not None and not one_thread
    PIPELINES.setdefault("bench-bf16-generic", tiled_pipeline(openmp=omp, bf16_dot=False))
    base = "tiled-1t" if one_thread else "tiled"
    out = {"f32": (torch.float32, base), "bf16-generic": (torch.bfloat16, "bench-bf16-generic")}
    if host_has_avx512_bf16():
        PIPELINES.setdefault("bench-bf16-dot", tiled_pipeline(openmp=omp, bf16_dot=True))
        out["bf16-dot"] = (torch.bfloat16, "bench-bf16-dot")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--one-thread", action="store_true", help="backend tiled-1t")
    a = ap.parse_args()
    S, D, H = a.seq, a.dim, a.heads
    host_line = hs.line(hs.describe())
    g = torch.Generator().manual_seed(0)
    base = tuple(torch.randn(1, H, S, D, generator=g) for _ in range(3))
    runs = {}
    for name, (dtype, backend) in _variants(a.one_thread).items():
        args = tuple(x.to(dtype) for x in base)
        runs[name] = (torch_mlir_flex.compile(Causal(S, S), args, backend=backend), args)
    times = {name: [] for name in runs}
    for fn, args in runs.values():
        fn(*args)  # warm-up
    for _ in range(a.reps):
        for name, (fn, args) in runs.items():
            t = time.perf_counter()
            fn(*args)
            times[name].append(time.perf_counter() - t)
    flops = 4 * H * S * S * D / 2
    f32 = statistics.median(times["f32"])
    print(host_line)
    print(f"causal B=1 H={H} S={S} D={D}, medians of {a.reps} interleaved rounds")
    print("| variant | ms | GFLOP/s | / f32 GFLOP/s |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m * 1e3:.2f} | {flops / m / 1e9:.1f} | {f32 / m:.2f} |")


if __name__ == "__main__":
    main()
