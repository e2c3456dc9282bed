"""Decode benchmark: few query rows against a long key/value sequence,
through the user path beside torch.compile(flex_attention), in one process.

    PYTHONPATH=python python -m benchmarks.decode [--reps 15] [--cases all]

Ours is `torch_mlir_flex.compile` of an nn.Module calling flex_attention
with the decode key split on (flex-to-flash split-keys-tasks=8, OpenMP
threads); "nosplit" is the same without it (the "tiled" default).

Measured on the shared 2-core machine (load ~2.5): decode is memory-bound
and the second core busy, so the split did not pay: B=1 H=1 N=16384 D=128
f32 383 us split vs 335 us unsplit; N=4096 103 vs 68 us; H=2 about equal;
on one thread the split costs nothing (327 vs 335 us). The "tiled" default
is therefore no split; FLEX_SPLIT_KEYS_TASKS=8 turns it on. Cases: the issue's decode shape (M=1, N=4096, Hq=32,
Hkv=8, D=128, f32 and bf16), few heads with long N (B=1, H=1..4), and a
tiny call (M=1, N=16, H=1, D=16) whose time is the per-call overhead. Times
are medians over interleaved rounds; only ratios are meaningful on a
shared machine.
"""

import argparse


import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch
from torch.nn.attention.flex_attention import flex_attention

from benchmarks import host as hs
from benchmarks.timing import interleaved_medians
from torch_mlir_flex.backend.pipelines import PIPELINES, find_openmp_runtime, tiled_pipeline

# The same lowering with and without the decode key split.
_OMP = find_openmp_runtime() is not None
PIPELINES.setdefault("tiled-split", tiled_pipeline(openmp=_OMP, split_keys_tasks=8))
PIPELINES.setdefault("tiled-nosplit", tiled_pipeline(openmp=_OMP, split_keys_tasks=0))


class Decode(torch.nn.Module):
    def __init__(self, gqa):
        super().__init__()
        self.gqa = gqa

    def forward(self, q, k, v):
        return flex_attention(q, k, v, enable_gqa=self.gqa)


CASES = {
    # name: (B, Hq, Hkv, M, N, D, dtype)
    "gqa32/8-f32": (1, 32, 8, 1, 4096, 128, torch.float32),
    "gqa32/8-bf16": (1, 32, 8, 1, 4096, 128, torch.bfloat16),
    "h1-n16k": (1, 1, 1, 1, 16384, 128, torch.float32),
    "h2-n8k": (1, 2, 2, 1, 8192, 128, torch.float32),
    "h4-n8k": (1, 4, 4, 1, 8192, 128, torch.float32),
    "h4-m4-n8k": (1, 4, 4, 4, 8192, 64, torch.float32),
    "tiny": (1, 1, 1, 1, 16, 16, torch.float32),
}


def bench(case, reps):
    B, Hq, Hkv, M, N, D, dt = CASES[case]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, Hq, M, D, generator=g).to(dt)
    k = torch.randn(B, Hkv, N, D, generator=g).to(dt)
    v = torch.randn(B, Hkv, N, D, generator=g).to(dt)
    args = (q, k, v)
    gqa = Hq != Hkv
    fns = {"ours": torch_mlir_flex.compile(Decode(gqa), args, backend="tiled-split"),
           "nosplit": torch_mlir_flex.compile(Decode(gqa), args, backend="tiled-nosplit")}
    cflex = torch.compile(flex_attention, dynamic=False)
    fns["torch.compile"] = lambda q, k, v: cflex(q, k, v, enable_gqa=gqa)
    ref = flex_attention(q.float(), k.float(), v.float(), enable_gqa=gqa)
    tol = 2e-2 if dt != torch.float32 else 1e-4
    for name, fn in fns.items():
        torch.testing.assert_close(fn(*args).float(), ref, rtol=tol, atol=tol, msg=name)
    return interleaved_medians({n: (lambda f=f: f(*args)) for n, f in fns.items()}, reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="all", help="comma-separated names or 'all': "
                    + ", ".join(CASES))
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    names = list(CASES) if a.cases == "all" else a.cases.split(",")
    print(hs.line(hs.describe()), flush=True)
    print(f"{'case':14s} {'split us':>9s} {'nosplit':>9s} {'torch us':>9s} {'split':>6s}"
          f" {'nosplit':>7s}")
    for name in names:
        t = bench(name, a.reps)
        ours, ref = t["ours"] * 1e6, t["torch.compile"] * 1e6
        nos = t["nosplit"] * 1e6
        print(f"{name:14s} {ours:9.1f} {nos:9.1f} {ref:9.1f} {ours / ref:6.2f} {nos / ref:7.2f}",
              flush=True)


if __name__ == "__main__":
    main()
