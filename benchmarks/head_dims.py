"""Head-dim sweep: causal attention through the user path beside
torch.compile(flex_attention), in one process, as ratios.

    PYTHONPATH=python python -m benchmarks.head_dims [--dims 64,128,256] [--seq 1024] [--reps 7]
        [--one-thread]

Ours is `torch_mlir_flex.compile` of a module calling flex_attention with a
causal BlockMask (backend "tiled", or "tiled-1t" beside torch on one
thread with --one-thread); "generic" is the same lowering with the
vector micro-kernels off (flex-to-flash vectorize=0), which is what head dims
above 128 got before the P.V kernel was split into column chunks. Times are
medians over interleaved rounds (the implementations take turns, so a load
change on the shared machine hits all of them); only ratios are meaningful.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("KMP_BLOCKTIME", "0")

import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.backend.pipelines import PIPELINES, find_openmp_runtime, tiled_pipeline

PIPELINES.setdefault("tiled-generic", tiled_pipeline(openmp=find_openmp_runtime() is not None,
                                                     vectorize=False))
PIPELINES.setdefault("tiled-1t-generic", tiled_pipeline(vectorize=False))


class Causal(torch.nn.Module):
    def __init__(self, block_mask):
        super().__init__()
        self.block_mask = block_mask

    def forward(self, q, k, v):
        return flex_attention(q, k, v, block_mask=self.block_mask)


def _median_rounds(fns, args, reps):
    times = {name: [] for name in fns}
    for fn in fns.values():
        fn(*args)  # warm-up
    for _ in range(reps):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn(*args)
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_dim(D, S, H, reps, with_generic, backend):
    g = torch.Generator().manual_seed(0)
    args = tuple(torch.randn(1, H, S, D, generator=g) for _ in range(3))
    bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, S, S, device="cpu")
    model = Causal(bm)
    fns = {"ours": torch_mlir_flex.compile(model, args, backend=backend)}
    if with_generic:
        fns["generic"] = torch_mlir_flex.compile(model, args, backend=backend + "-generic")
    cflex = torch.compile(flex_attention, dynamic=False)
    fns["torch.compile"] = lambda q, k, v: cflex(q, k, v, block_mask=bm)
    ref = flex_attention(*args, block_mask=bm)
    for name, fn in fns.items():
        torch.testing.assert_close(fn(*args), ref, rtol=1e-3, atol=1e-4, msg=name)
    return _median_rounds(fns, args, reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-generic", action="store_true", help="skip the vectorize=0 variant")
    ap.add_argument("--one-thread", action="store_true",
                    help="backend tiled-1t and torch on one thread (less sensitive to load)")
    a = ap.parse_args()
    backend = "tiled-1t" if a.one_thread else "tiled"
    if a.one_thread:
        torch.set_num_threads(1)
    print(f"causal f32 B=1 H={a.heads} S={a.seq}, backend {backend}, "
          f"medians of {a.reps} interleaved rounds")
    print("| D | ours / torch.compile | generic / torch.compile | ours / generic |")
    print("|---|---|---|---|")
    for D in (int(d) for d in a.dims.split(",")):
        t = bench_dim(D, a.seq, a.heads, a.reps, not a.no_generic, backend)
        tc = t["torch.compile"]
        gen = t.get("generic")
        cols = [f"{t['ours'] / tc:.2f}", f"{gen / tc:.2f}" if gen else "-",
                f"{t['ours'] / gen:.2f}" if gen else "-"]
        print(f"| {D} | " + " | ".join(cols) + " |", flush=True)


if __name__ == "__main__":
    main()
