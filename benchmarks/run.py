"""Benchmark CLI: ours (torch_mlir_flex.compile of an nn.Module, the user
path) beside torch.compile(flex_attention) and SDPA.

    source .venv/bin/activate
    PYTHONPATH=python python -m benchmarks.run            # full grid (see --help)
    PYTHONPATH=python python -m benchmarks.run --quick    # smoke run, < 3 min
    PYTHONPATH=python python -m benchmarks.run --overhead-only
    PYTHONPATH=python python -m benchmarks.run --from-json benchmarks/results/results.json --readme

Run from the repository root. The grid is --cases x --dtypes x --heads-dims
x --sizes (B=1, H=8), plus causal S=2048 D=128 per dtype (the bf16-vs-f32
target) and an S=--mem-size causal run per dtype (ours and SDPA; peak extra
memory). Writes DIR/results.json (after every configuration, so that a
run that dies can still be reported with --from-json), DIR/results.md and
DIR/results.png (matplotlib), prints the targets of issue #11 with pass/fail (exit status 1
when an implementation failed or ours differs from its reference), and with
--readme rewrites this host kind's subsection between the benchmark markers of
docs/benchmarks/attention.md, writes the full tables to
docs/benchmarks/attention-<date>.md and updates the attention row of the
README's headline table, both for this host's kind (benchmarks/host.py:
described and measured once per run, the line above each table).
Case catalogue: benchmarks/cases.py; one configuration: benchmarks/runner.py.
`--backends tiled,tiled-generic --cases causal --dtypes f32` adds the tiled
lowering without flex-to-flash's vector micro-kernels as a column (the
former benchmarks/head_dims.py).
"""

import argparse
import json
import os
import sys
import time

# Our OpenMP workers keep the package's default (KMP_BLOCKTIME=1, set by
# backend/jit.py), as users get it; timing.py keeps the implementations'
# spinning workers apart.

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from torch_mlir_flex.backend.pipelines import (PIPELINES, find_openmp_runtime, tiled_pipeline,
                                               uses_openmp)

from . import cases, overhead, peak, report, runner
from . import host as hs
from . import readme as rd
from . import targets as tg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BF16_TARGET_SHAPE = (2048, 128)
# Variants that can be named in --backends besides the package's pipelines:
# the tiled lowering without flex-to-flash's vector micro-kernels.
EXTRA_BACKENDS = {
    "tiled-generic": lambda: tiled_pipeline(openmp=find_openmp_runtime() is not None,
                                            vectorize=False),
    "tiled-1t-generic": lambda: tiled_pipeline(vectorize=False),
}
QUICK = dict(sizes="256", cases="causal,alibi,document,decode", heads_dims="64",
             dtypes="f32,bf16", mem_size=0, budget=0.3, peak_n=1024)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: S=256, D=64, causal/alibi/document/decode, f32+bf16")
    ap.add_argument("--sizes", default="1024,4096", help="sequence lengths S")
    ap.add_argument("--dtypes", default="f32,bf16", help=f"of {', '.join(peak.DTYPES)}")
    ap.add_argument("--heads-dims", default="64,128,256", help="head dims D")
    ap.add_argument("--cases", default=",".join(cases.CASES), help=", ".join(cases.CASES))
    ap.add_argument("--backends", default="tiled",
                    help="our backends; the first is 'ours', others extra columns "
                         f"(pipelines: {', '.join(sorted(set(PIPELINES) | set(EXTRA_BACKENDS)))})")
    ap.add_argument("--peers", default="torch.compile,SDPA",
                    help=f"of {', '.join(runner.PEERS)} (eager is slow and memory hungry)")
    ap.add_argument("--one-thread", action="store_true",
                    help="torch on one thread and backend tiled-1t (less sensitive to load)")
    ap.add_argument("--mem-size", type=int, default=tg.MEMORY_S,
                    help="S of the causal peak-memory run (0: skip)")
    ap.add_argument("--no-target-extras", action="store_true",
                    help=f"skip the causal S={BF16_TARGET_SHAPE[0]} D={BF16_TARGET_SHAPE[1]} runs")
    ap.add_argument("--budget", type=float, default=1.5,
                    help="timed seconds per implementation and configuration (3..60 calls)")
    ap.add_argument("--peak-n", type=int, default=4096, help="matmul size of the peak calibration")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="output directory")
    ap.add_argument("--readme", nargs="?", const=os.path.join(ROOT, "README.md"), default=None,
                    help="rewrite docs/benchmarks/attention.md and the attention row of README.md "
                         "(or of the given README, with the docs/benchmarks/ beside it)")
    ap.add_argument("--from-json", metavar="FILE",
                    help="no benchmarking: report (and --readme) from a saved results.json")
    ap.add_argument("--overhead-only", action="store_true",
                    help="only the per-call overhead of a tiny decode call")
    args = ap.parse_args(argv)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
        args.no_target_extras = True
    for flag, value, known in (("--dtypes", args.dtypes, peak.DTYPES), ("--peers", args.peers, runner.PEERS),
                               ("--cases", args.cases, cases.CASES)):
        unknown = [x for x in split(value) if x not in known]
        if unknown:
            ap.error(f"{flag}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return args


def today():
    return time.strftime("%Y-%m-%d", time.gmtime())


def split(text, convert=str):
    return [convert(x.strip()) for x in text.split(",") if x.strip()]


def register_backends(names):
    for name in names:
        if name not in PIPELINES and name in EXTRA_BACKENDS:
            PIPELINES[name] = EXTRA_BACKENDS[name]()
        if name not in PIPELINES:
            raise SystemExit(f"unknown backend {name!r}")


def configurations(args):
    """[(Config, purpose)] in report order."""
    names = split(args.cases)
    dtypes = [peak.DTYPES[d] for d in split(args.dtypes)]
    grid = {(c, dt, S, D) for c in names for dt in dtypes
            for S in split(args.sizes, int) for D in split(args.heads_dims, int)}
    if not args.no_target_extras and "causal" in names:
        grid |= {("causal", dt) + BF16_TARGET_SHAPE for dt in dtypes}
    order = {x: i for i, x in enumerate(list(cases.CASES) + dtypes)}
    out = [(cases.Config(c, dt, S, D), "speed") for c, dt, S, D in
           sorted(grid, key=lambda g: (order[g[0]], order[g[1]], g[3], g[2]))]
    if args.mem_size:
        out += [(cases.Config("causal", dt, args.mem_size, 64), "memory") for dt in dtypes]
    return out


def progress_line(row):
    t = row["time"]
    parts = [f"{n} {t[n] * 1e3:.2f} ms" for n in report.impls([row])]
    ratio = tg.ratio(row)
    diff = "" if row["ok"] is None else (f", diff {row['max_abs_diff']:.1e} "
                                         f"{'ok' if row['ok'] else 'FAIL'}")
    return (f"{tg.label(row)}: " + ", ".join(parts)
            + (f"; ours/torch.compile {ratio:.2f}" if ratio is not None else "")
            + f"; compile {report.fmt(row['compile_s'].get('ours'))} s{diff}"
            + "".join(f"\n    {k}: {v}" for k, v in row["errors"].items()))


def meta_lines(args, peaks, ovh, seconds, load_start, first=None):
    backend = split(args.backends)[0]
    omp = find_openmp_runtime() if uses_openmp(PIPELINES[backend]) else None
    return [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; torch {torch.__version__}; "
        f"torch threads {torch.get_num_threads()}",
        f"ours: torch_mlir_flex.compile(module, args, backend={backend!r}); OpenMP "
        + (f"runtime {os.path.basename(omp)}, OMP_NUM_THREADS="
           f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, KMP_BLOCKTIME="
           f"{os.environ.get('KMP_BLOCKTIME')}" if omp else "not used (one thread)"),
        "measured matmul peak: " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items()),
        overhead.describe(ovh) if ovh else "per-call overhead: not measured",
        *([overhead.describe_first_compile(first)] if first else []),
        f"run took {seconds:.0f} s; load average {load_start:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end",
    ]


def benchmark(args, peaks, log, save):
    """Rows of every configuration; `peaks` takes the best of a matmul
    sample after each (the machine is shared: any one sample may be low).
    `save(rows)` after each configuration keeps what ran if a later one
    aborts the process."""
    configs = configurations(args)
    dtypes = [peak.DTYPES[d] for d in split(args.dtypes)]
    backends = split(args.backends)
    register_backends(backends)
    opts = runner.Options(backends=tuple(backends), peers=tuple(split(args.peers)),
                          budget_s=args.budget)
    mem_opts = runner.Options(backends=tuple(backends[:1]), peers=("SDPA",), budget_s=0.0)
    t0, rows = time.time(), []
    log(f"{len(configs)} configurations")
    for cfg, purpose in configs:
        row = runner.run_config(cfg, mem_opts if purpose == "memory" else opts)
        row["purpose"] = purpose
        rows.append(row)
        log(f"[{time.time() - t0:6.0f}s] " + progress_line(row))
        peaks.update(peak.best(peaks, peak.calibrate(dtypes, n=min(2048, args.peak_n), reps=1)))
        save(rows)
    return rows


def save_json(data, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(data, f, indent=1)


def run_data(args, rows, peaks, ovh, t0, load_start, host, first=None):
    """What results.json holds (also mid-run: report it with --from-json);
    `host` the run's host description (host.describe)."""
    return dict(rows=rows, peaks=peaks, overhead=ovh, first_compile=first, dtypes=args.dtypes,
                date=today(), host=host,
                meta=meta_lines(args, peaks, ovh, time.time() - t0, load_start, first))


def saved_host(data):
    """The host description of saved results; a file written before runs
    described their host names it in its first header line ("2 CPUs (...)")."""
    if data.get("host"):
        return data["host"]
    fields = [f.strip() for f in (data.get("meta") or [""])[0].split(";")]
    return next((f for f in fields if " CPUs" in f), None)


def write_outputs(data, args, log):
    rows, peaks, host = data["rows"], data["peaks"], saved_host(data)
    results = tg.evaluate(rows, memory_dtypes=split(data["dtypes"]))
    md = report.markdown(rows, data["meta"], peaks, results, hs.line(host))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    if not args.from_json:
        save_json(data, args.out)
    png = os.path.join(args.out, "results.png")
    log(f"wrote {args.out}/results.md" + (", results.json" if not args.from_json else "")
        + (", results.png" if report.plot(rows, png) else " (no plot: matplotlib not installed)"))
    log(hs.line(host) + "\n" + "\n".join(report.targets_table(results)))
    errors = report.errors_lines(rows)
    if errors:
        log("failures (implementation errors or wrong results):\n" + "\n".join(errors))
    if args.readme:
        # the page docs/benchmarks/attention.md, the full tables beside it
        # as attention-<date>.md, and the README's headline row
        page = rd.page_path(report.PAGE, args.readme)
        full = report.full_tables_name(os.path.dirname(page), data.get("date", today()), hs.kind(host))
        os.makedirs(os.path.dirname(page), exist_ok=True)
        with open(os.path.join(os.path.dirname(page), full), "w") as f:
            f.write(md)
        report.update_page(page, report.readme_section(rows, data["meta"], peaks, results, hs.line(host), full),
                           hs.kind(host))
        row = report.headline(rows, data["meta"], host)
        if row:
            rd.update_headline(report.PAGE, row, hs.kind(host), args.readme)
        log(f"updated {page} (full tables in {full}) and the attention row of {args.readme} "
            f"(host kind {hs.kind(host)})")
    return 1 if errors else 0


def main(argv=None):
    args = parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    if args.from_json:
        with open(args.from_json) as f:
            return write_outputs(json.load(f), args, log)
    if args.one_thread:
        torch.set_num_threads(1)
        args.backends = "tiled-1t"
    load_start, t0 = os.getloadavg()[0], time.time()
    register_backends(split(args.backends))
    first = overhead.first_compile(split(args.backends)[0])
    log(overhead.describe_first_compile(first))
    ovh = overhead.per_call_overhead()
    log(overhead.describe(ovh))
    if args.overhead_only:
        return 0
    host = hs.describe()
    log(hs.line(host))
    dtypes = [peak.DTYPES[d] for d in split(args.dtypes)]
    peaks = peak.calibrate(dtypes, n=args.peak_n)
    log("matmul peak: " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items()))
    rows = benchmark(args, peaks, log, lambda rows: save_json(
        run_data(args, rows, peaks, ovh, t0, load_start, host, first), args.out))
    peaks = peak.best(peaks, peak.calibrate(dtypes, n=args.peak_n))
    log("matmul peak (best of the run): " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items()))
    return write_outputs(run_data(args, rows, peaks, ovh, t0, load_start, host, first), args, log)


if __name__ == "__main__":
    sys.exit(main())
