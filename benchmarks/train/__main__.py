"""Training benchmark: flex_attention forward + backward, ours beside SDPA's
CPU flash kernel and eager float32 math, in one process, interleaved.

    PYTHONPATH=python python -m benchmarks.train [--quick] [--reps 5]
        [--cases causal-1024-64,...] [--dtypes f32,bf16] [--readme]
    PYTHONPATH=python python -m benchmarks.train --models [--quick] [--only NAMES]
        [--impls ours,inductor,eager] [--readme]

`--models`: whole transformers models trained step by step, each engine in
its own process (benchmarks/train/models.py, which documents its options).

Prints a markdown table and the targets of issue #26 with pass/fail, each
under the line naming the host and its peaks measured in the run
(benchmarks/host.py), and saves them in benchmarks/results/train.json;
`--readme` writes both into docs/benchmarks/training.md (this host kind's
subsection of its results section) and this host kind's training row of
the README's headline table.
Columns: ms per forward + backward (medians over interleaved rounds,
benchmarks/timing.py; only ratios are meaningful on a shared machine),
ratios, GFLOP/s and % of the measured matmul peak counting 3.5x the
forward FLOPs of the kept blocks (1 forward + 2.5 backward), compile time
(our stages, forward and backward graph) and the first call's extra time
over a warm call (Dynamo and AOTAutograd included; the compile cache is
off for this process).
"""

import argparse
import json
import logging
import os
import sys
import time

# compile time is measured; not in --models, whose warm processes read the caches
_CACHE_OFF_HERE = "TORCH_MLIR_FLEX_CACHE" not in os.environ
os.environ.setdefault("TORCH_MLIR_FLEX_CACHE", "0")

import torch_mlir_flex  # noqa: F401,E402  (must load before torch_mlir)
import torch  # noqa: E402
from torch_mlir_flex import log  # noqa: E402
from torch_mlir_flex.backend import blas  # noqa: E402

from benchmarks import host as hs  # noqa: E402
from benchmarks import peak  # noqa: E402
from benchmarks.timing import interleaved_medians, peak_extra_bytes, timed_call  # noqa: E402
from benchmarks.train.cases import ALL_CASES, MEMORY_CASE, QUICK, setup  # noqa: E402
from benchmarks import readme as rd  # noqa: E402
from benchmarks.readme import format_targets  # noqa: E402
from benchmarks.train.targets import evaluate  # noqa: E402

PAGE, TITLE = "training", "Training benchmark"
# The headline row: the first of these (f32) that was run, else the last causal f32 row.
HEADLINE = ("causal-4096-128", "causal-4096-64", "causal-1024-128")


def run_case(name, kind, S, D, hkv, dtype, reps):
    fns, flops, _ = setup(kind, S, D, hkv, peak.DTYPES[dtype])
    torch._dynamo.reset()
    with log.capture(logging.INFO) as messages:
        first, _ = timed_call(fns["ours"])  # compiles the forward, then the backward
    r = max(2, reps if S <= 2048 else reps // 2 + 1)
    med = interleaved_medians(fns, r, rounds=min(3, r))
    stages = sum(float(m.split()[-2]) for m in messages if m.startswith("stage "))
    return {"case": name, "kind": kind, "S": S, "D": D, "dtype": dtype, "flops": flops,
            "time": med, "compile_s": stages, "first_call_s": max(0.0, first - med["ours"])}


def memory_row(dtype):
    kind, S, D, hkv = MEMORY_CASE
    fns, _, grad_bytes = setup(kind, S, D, hkv, peak.DTYPES[dtype])
    fns["ours"]()  # compiled; its outputs and gradients freed before measuring
    # The blocks the runtime's heap kept from that call freed too: else the
    # measured call reuses them and its temporaries do not show.
    blas.release_memory()
    extra = peak_extra_bytes(fns["ours"])
    return None if extra is None else {"S": S, "D": D, "dtype": dtype,
                                       "extra_mib": max(0, extra - grad_bytes) / 2**20}


def _ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _ratio(a, b):
    return "-" if b is None else f"{a / b:.2f}"


def table(rows, peaks):
    out = ["| case | dtype | ours ms | SDPA ms | eager math ms | ours/SDPA | ours/eager | GFLOP/s "
           "| % peak | compile s | first call s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["time"]
        ours, sdpa, eager = t["ours"], t.get("sdpa"), t["eager"]
        gf = r["flops"] / ours / 1e9
        out.append(f"| {r['case']} | {r['dtype']} | {_ms(ours)} | {_ms(sdpa)} | {_ms(eager)} "
                   f"| {_ratio(ours, sdpa)} | {_ratio(ours, eager)} | {gf:.0f} "
                   f"| {100 * gf / peaks[r['dtype']]:.0f}% | {r['compile_s']:.2f} "
                   f"| {r['first_call_s']:.2f} |")
    return "\n".join(out)


def main(argv=None):
    if "--models" in (sys.argv[1:] if argv is None else argv):
        if _CACHE_OFF_HERE:
            os.environ.pop("TORCH_MLIR_FLEX_CACHE")
        from benchmarks.train import models

        models.main(argv)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", action="store_true",
                    help="whole models trained step by step instead (see `--models --help`)")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}, f32, fewer reps")
    ap.add_argument("--reps", type=int, default=0, help="timed calls per implementation")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--dtypes", default="", help="f32,bf16 (default; --quick: f32)")
    ap.add_argument("--no-memory", action="store_true", help="skip the S=8192 memory row")
    ap.add_argument("--readme", action="store_true",
                    help="write docs/benchmarks/training.md and the README's headline row")
    args = ap.parse_args(argv)
    names = args.cases.split(",") if args.cases else QUICK if args.quick else list(ALL_CASES)
    dtypes = args.dtypes.split(",") if args.dtypes else ["f32"] if args.quick else ["f32", "bf16"]
    reps = args.reps or (3 if args.quick else 5)
    t0 = time.time()
    host = hs.describe()
    print(hs.line(host), flush=True)
    peaks = peak.calibrate([peak.DTYPES[d] for d in dtypes])
    rows = []
    for dtype in dtypes:
        for name in names:
            rows.append(run_case(name, *ALL_CASES[name], dtype, reps))
            r = rows[-1]
            print(f"{name} {dtype}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in r["time"].items())
                  + f", compile {r['compile_s']:.2f} s, first call +{r['first_call_s']:.2f} s", flush=True)
    peaks = peak.best(peaks, peak.calibrate([peak.DTYPES[d] for d in dtypes]))
    memory = [] if args.no_memory else [m for d in dtypes for m in [memory_row(d)] if m]
    line = hs.line(host)
    text = (f"`python -m benchmarks.train` ({rd.now()} UTC, "
            f"{time.time() - t0:.0f} s; matmul peak, best of the run's calibrations, for % peak: " +
            ", ".join(f"{d} {peaks[d]:.0f} GFLOP/s" for d in dtypes) + "): H=8, B=1, one "
            "forward + backward per call, ms are medians.\n\n" + line + "\n\n" + table(rows, peaks) + "\n\n" +
            "".join(f"Extra memory of one call beyond its output and gradients, causal {m['dtype']} "
                    f"S={m['S']} D={m['D']}: {m['extra_mib']:.0f} MiB.\n" for m in memory) +
            "\n" + line + "\n\n" + format_targets(evaluate(rows, memory, peaks)) + "\n")
    print(text)
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(dict(host=host, run=rd.now(), peaks=peaks, rows=rows, memory=memory), f)
    if args.readme:
        write_readme(rows, text, host)


RESULTS = os.path.join(rd.ROOT, "benchmarks", "results", "train.json")


def headline(rows, host, run=None):
    """The training row of the README's headline table (None without a
    causal f32 row): forward + backward against SDPA's flash kernel and
    eager float32 math attention (eager flex_attention and inductor refuse
    flex_attention's backward on CPU)."""
    causal = [r for r in rows if r["kind"] == "causal" and r["dtype"] == "f32"]
    pick = next((r for n in HEADLINE for r in causal if r["case"] == n), causal[-1] if causal else None)
    if pick is None:
        return None
    t = pick["time"]
    return rd.headline_row(PAGE, "training", f"causal f32 S={pick['S']} D={pick['D']}, forward + backward "
                           "(eager: math attention)", f"{t['ours'] * 1e3:.0f} ms", rd.ratio(t["ours"], t.get("eager")),
                           "—", rd.ratio(t["ours"], t.get("sdpa")),
                           rd.where(host, run or rd.now()))


def write_readme(rows, text, host, readme=rd.README):
    """Host kind `host`'s subsection of the `## Results` section of
    docs/benchmarks/training.md (other kinds and the notes after it stay)
    and the training row of that kind in `readme`'s headline table."""
    rd.write_page(PAGE, TITLE, text, hs.kind(host), readme)
    row = headline(rows, host)
    if row:
        rd.update_headline(PAGE, row, hs.kind(host), readme)


if __name__ == "__main__":
    main()
