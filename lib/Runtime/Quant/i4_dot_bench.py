"""Speed of the int4 products of many rows (prefill) with f32 activations
(the f32 kernels) against int8 activations (FlexQuantI4Dot.c, the opt-in
path), standalone: M rows of x (128: a 128-token prompt) against the linear
shapes of Qwen2-0.5B (hidden 896, intermediate 4864, 2 KV heads of 64) and
Qwen2-1.5B (1536, 8960, 2 x 128), int4 group 32 in this host's torch
packing, through flex_quant_matmul_i4 of the built runtime, on `--threads`
threads. The two paths alternate in every round (the host is shared); per
shape the best round's wall time and CPU time of this process (all its
threads), and GFLOP/s (2 M N K flops) of each.

    PYTHONPATH=python python lib/Runtime/Quant/i4_dot_bench.py [--threads 1] [--rows 128] [--isa avx512]
"""

import argparse
import ctypes
import os
import platform
import time

import torch_mlir_flex  # noqa: F401  (before torch)
import torch

from quant_bench import host_layout  # noqa: E402  (beside this file)
from torch_mlir_flex.backend import blas

SHAPES = {  # model: [(name, N, K)]
    "qwen2-0.5b": [("q/o", 896, 896), ("k/v", 128, 896), ("gate/up", 4864, 896), ("down", 896, 4864)],
    "qwen2-1.5b": [("q/o", 1536, 1536), ("k/v", 256, 1536), ("gate/up", 8960, 1536),
                   ("down", 1536, 8960)],
}
GROUP = 32


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isa", default=None, help="cap the runtime ISA (generic, avx2, avx512)")
    ap.add_argument("--models", default=",".join(SHAPES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.isa:
        blas.set_runtime_isa(args.isa)
    blas.runtime_library()
    lib = ctypes.CDLL(blas.runtime_library_path())
    fn = lib.flex_quant_matmul_i4
    fn.argtypes, fn.restype = [ctypes.c_int64] * 16, None
    layout = host_layout()
    M = args.rows
    print(f"host {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"torch threads {args.threads}; ISA {blas.quant_kernel()}, int8 kernel "
          f"{blas.quant_int8_activation_kernel()}; layout {layout}; M={M}, group {GROUP}")
    print(f"{'shape':<22}{'f32 ms':>9}{'cpu ms':>9}{'GF/s':>8}{'int8 ms':>9}{'cpu ms':>9}"
          f"{'GF/s':>8}{'wall x':>8}{'cpu x':>7}")
    g = torch.Generator().manual_seed(0)
    totals = {"f32": [0.0, 0.0], "int8": [0.0, 0.0]}
    for model in args.models.split(","):
        for name, N, K in SHAPES[model]:
            q = torch.randint(0, 16, (N, K), generator=g, dtype=torch.int32)
            w = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1).contiguous()
            sz = torch.stack([torch.rand(K // GROUP, N, generator=g) * 0.02,
                              torch.randn(K // GROUP, N, generator=g) * 0.01], -1).contiguous()
            x = torch.randn(M, K, generator=g)
            y = torch.empty(M, N)
            best = {"f32": [1e9, 1e9], "int8": [1e9, 1e9]}
            for _ in range(args.rounds):
                for mode in ("f32", "int8"):
                    blas.set_quant_activations(mode)
                    w0, c0 = time.perf_counter(), time.process_time()
                    fn(M, N, K, x.data_ptr(), 0, K, w.data_ptr(), 0, sz.data_ptr(), 0,
                       y.data_ptr(), 0, N, GROUP, layout, 0)
                    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                    best[mode] = [min(best[mode][0], wall), min(best[mode][1], cpu)]
            blas.set_quant_activations(None)
            flops = 2.0 * M * N * K
            row = f"{model} {name} {N}x{K}"
            for mode in ("f32", "int8"):
                totals[mode][0] += best[mode][0]
                totals[mode][1] += best[mode][1]
            print(f"{row:<22}" + "".join(
                f"{best[m][0] * 1e3:9.2f}{best[m][1] * 1e3:9.2f}{flops / best[m][0] / 1e9:8.1f}"
                for m in ("f32", "int8"))
                + f"{best['f32'][0] / best['int8'][0]:8.2f}{best['f32'][1] / max(best['int8'][1], 1e-9):7.2f}")
    print("sum of the shapes' best (ms): f32 wall %.1f cpu %.1f; int8 wall %.1f cpu %.1f" % (
        totals["f32"][0] * 1e3, totals["f32"][1] * 1e3, totals["int8"][0] * 1e3, totals["int8"][1] * 1e3))


if __name__ == "__main__":
    main()
