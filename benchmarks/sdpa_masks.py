"""SDPA calls with continuous batching's masks, compiled through our SDPA
rewrite: the block table from the mask (dynamo/sdpa_mask_blocks.py) with
one-row and with 128-row query blocks, and without a table, beside eager
SDPA and inductor, in one process on the same inputs.

    PYTHONPATH=python python -m benchmarks.sdpa_masks [--runs 3]

Run from the repository root. f32, Qwen2-0.5B's attention (14 query and 2
KV heads of 64), keys read over `--slots` cache slots (default 20,480:
16 requests x 1,280, the concurrent benchmark's 0.5B cache), a mask of 0
and finfo.min as transformers builds it: "decode", 64 query rows of which
16 are one request each (400-800 keys each), the rest padding; "prefill",
512 rows of 4 requests (128 new rows each after 300 cached keys). Each
variant is a graph of one SDPA call under torch.compile; our variants are
compiled with the stage caches off. "dynamic": ours compiled with
`dynamic=True` (the graphs Dynamo makes after a recompilation, as in
serving), with the mask's block table ops split across the threads at
run time (flex-parallel-rows) and, "serial rows", without that split (as
before 2026-12-08: dynamic ops stayed on one thread). The table gives the
median of the runs' medians (benchmarks/timing.py) and the ratio to "no
table".
"""

import argparse
import os
import statistics

os.environ["TORCH_MLIR_FLEX_CACHE"] = "0"  # the variants differ in code the caches do not key

import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import _create_empty_block_mask

from torch_mlir_flex import dynamo
from torch_mlir_flex.backend import pipelines
from torch_mlir_flex.dynamo import sdpa_mask_blocks as smb

from . import host as hs
from .timing import interleaved_medians

HQ, HKV, E = 14, 2, 64


def decode_mask(slots, rows=64, requests=16):
    m = torch.full((1, 1, rows, slots), torch.finfo(torch.float32).min)
    k0 = 0
    for r in range(requests):
        n = 400 + (r * 37) % 400
        m[0, 0, r, k0:k0 + n] = 0
        k0 += n
    return m


def prefill_mask(slots, rows=512, requests=4, past=300):
    m = torch.full((1, 1, rows, slots), torch.finfo(torch.float32).min)
    per, k0 = rows // requests, 0
    for i in range(requests):
        for r in range(per):
            m[0, 0, i * per + r, k0:k0 + past + r + 1] = 0
        k0 += past + per
    return m


def _sdpa(q, k, v, m):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)


def _compiled(variant):
    """torch.compile(backend=ours) of `_sdpa` with the block table as
    `variant` says; compiled at its first call (the caller makes it)."""
    few, table = smb.FEW_ROWS, smb.block_mask

    def call(*args):
        smb.FEW_ROWS = 0 if variant == "128-row blocks" else few
        if variant == "no table":
            smb.block_mask = lambda m, q, k: (_create_empty_block_mask(q, k).as_tuple(), None)
        try:
            return fn(*args)
        finally:
            smb.FEW_ROWS, smb.block_mask = few, table

    dynamic = variant.startswith("dynamic")
    options = {"backend": SERIAL_ROWS} if variant == "dynamic, serial rows" else None
    fn = torch.compile(_own_code(_sdpa, variant), backend=dynamo.NAME, dynamic=dynamic,
                       options=options)
    return call


# The tiled pipeline without flex-parallel-rows ("dynamic, serial rows").
SERIAL_ROWS = "tiled-serial-rows"
pipelines.PIPELINES[SERIAL_ROWS] = pipelines.tiled_pipeline(parallel_rows=False)


def _own_code(f, name):
    """`f` with a code object of its own: Dynamo caches compiled frames per
    code object, and each variant must compile apart."""
    import types

    ident = "".join(c if c.isalnum() else "_" for c in name)
    return types.FunctionType(f.__code__.replace(co_name="sdpa_" + ident), f.__globals__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", type=int, default=20480)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    dynamo.register()
    print(hs.line(hs.describe()))
    print(f"f32, {HQ} query / {HKV} KV heads of {E}, {args.slots} key slots")
    # "ours": the default (one-row query blocks up to 128 rows, else 128-row)
    print("| step | ours ms | ours, 128-row blocks ms | ours, no table ms | ours dynamic ms "
          "| ours dynamic, serial rows ms | eager SDPA ms | inductor ms "
          "| no table / ours | no table / 128-row | serial rows / dynamic | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(0)
    k = torch.randn(1, HKV, args.slots, E, generator=g)
    v = torch.randn(1, HKV, args.slots, E, generator=g)
    for step, m in (("decode (64 rows, 16 requests)", decode_mask(args.slots)),
                    ("prefill (512 rows, 4 requests)", prefill_mask(args.slots))):
        q = torch.randn(1, HQ, m.shape[2], E, generator=g)
        torch._dynamo.reset()
        impls = {name: _compiled(name) for name in ("default", "128-row blocks", "no table", "dynamic",
                                                    "dynamic, serial rows")}
        impls["eager SDPA"] = _sdpa
        impls["inductor"] = torch.compile(_own_code(_sdpa, "inductor"), dynamic=False)
        with torch.no_grad():
            want = _sdpa(q, k, v, m)
            err = max((f(q, k, v, m) - want).abs().max().item() for f in impls.values())
            times = {i: [] for i in impls}
            for _ in range(args.runs):
                for i, f in impls.items():
                    times[i].append(interleaved_medians({"f": lambda f=f: f(q, k, v, m)}, args.reps)["f"] * 1e3)
        med = {i: statistics.median(t) for i, t in times.items()}
        base = med["no table"]
        dyn, serial = med["dynamic"], med["dynamic, serial rows"]
        print(f"| {step} | {med['default']:.2f} | {med['128-row blocks']:.2f} | {base:.2f} | "
              f"{dyn:.2f} | {serial:.2f} | {med['eager SDPA']:.2f} | {med['inductor']:.2f} | "
              f"{base / med['default']:.1f} | {base / med['128-row blocks']:.1f} | "
              f"{serial / dyn:.2f} | {err:.1e} |")


if __name__ == "__main__":
    main()
