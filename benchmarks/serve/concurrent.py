"""The concurrent-serving benchmark (issue #43): `python -m benchmarks.serve
--concurrent [--quick] [--impls ours,inductor,eager,llama.cpp]
[--models tiny,qwen2] [--dtypes f32,bf16] [--rates 1,4,inf] [--readme]`.

A fixed-seed request stream (concurrent_child.py: prompts of 32-1024
tokens, outputs of 16-256, Poisson arrivals at each rate) served by
transformers' continuous batching (ContinuousBatchingManager) on the tiny
Llama and the Qwen2-0.5B shape (f32, bf16) at 1, 4, 16 and 64 requests in
flight, each implementation in its own process: ours (CompileConfig(
backend="torch_mlir_flex") for the varlen and decode paths), inductor,
no compile; llama.cpp as an optional peer (its server's parallel slots on
llama-cpp-python's library: concurrent_llama.py). Per point: output tokens/s, requests/s, time to
first token and inter-token latency p50 / p99; per implementation: the
warmup, the graphs compiled (whole stream) and run in eager, and whether
each checked request's tokens equal its own greedy generation (f32). The
single-stream reference is our `hf.generator` decode of the same model
(benchmarks/serve/child.py's ours-api, measured here). `--quick`: the tiny
model, a 12-request stream (prompts 8-64, outputs 4-16), 1 and 4 in
flight, ours and eager. Rows accumulate in
benchmarks/results/serve_concurrent.json; the tables, targets and the
plot (throughput against latency) go to benchmarks/results/
serve_concurrent.{md,png}; `--readme` writes this host kind's part of
docs/benchmarks/serving.md's "Concurrent serving" section and its row of
the README's headline table."""

import argparse
import json
import math
import os
import tempfile

from .. import host as hs
from .. import readme as rd
from ..child_process import ROOT, run_json_child
from ..readme import worst
from ..results_file import merge_rows, row_key, rows_of
from .concurrent_child import FULL, QUICK

IMPLS = ("ours", "inductor", "eager", "ours-paged-flex", "llama.cpp")
DEFAULT_IMPLS = ("ours", "inductor", "eager", "llama.cpp")
RESULTS = os.path.join(ROOT, "benchmarks", "results", "serve_concurrent.json")
TABLE = os.path.join(ROOT, "benchmarks", "results", "serve_concurrent.md")
PLOT = os.path.join(ROOT, "benchmarks", "results", "serve_concurrent.png")
PAGE, SECTION, ANCHOR = "serving", "## Concurrent serving", "serving.md#concurrent-serving"
TARGET_CONCURRENCY = 16


def configs(models, quick, dtypes=("f32", "bf16")):
    """[(name, child spec without impl)] of the run (the tiny model: f32 only)."""
    if quick:
        return [("tiny f32 quick", dict(model="tiny", dtype="f32", stream=QUICK.__dict__, concurrency=[1, 4],
                                        page_size=32, max_batch_tokens=256, check=QUICK.requests))]
    out = []
    for model in models:
        for dtype in [d for d in dtypes if model != "tiny" or d == "f32"]:
            name = f"{model}{' L=24' if model == 'qwen2' else ''} {dtype}"
            out.append((name, dict(model=model, dtype=dtype, stream=FULL.__dict__, concurrency=[1, 4, 16, 64],
                                   page_size=32 if model == "tiny" else 64,
                                   max_batch_tokens=256 if model == "tiny" else 512,
                                   check=8 if dtype == "f32" else 0)))
    return out


def llama_cpp_row(spec, rates, cache_dir, timeout):
    """llama.cpp with parallel slots as its server runs them
    (concurrent_llama.py), or a "not run" row saying why (llama-cpp-python
    is in the dev venv only)."""
    from ..llama_cpp_peer import available

    why = available()
    if why:
        return {"error": "not run: " + why}
    return run_json_child("benchmarks.serve.concurrent_llama", dict(spec, rates=rates), cache_dir, timeout)


def single_stream(spec, cache_dir, timeout):
    """Our single-stream decode of the same model: hf.generator, batch 1,
    128-token prompt, 32 new tokens (benchmarks/serve/child.py ours-api)."""
    from .configs import ServeConfig

    cfg = ServeConfig(spec["model"], spec["dtype"], 1, 128, 32)
    r = run_json_child("benchmarks.serve.child", dict(config=cfg.__dict__, impl="ours-api", reps=1), cache_dir,
                       timeout)
    return {k: r[k] for k in ("ms_per_token", "ttft_ms") if k in r} if "error" not in r else r


def _ok(r):
    return bool(r) and "error" not in r


def _rate(r):
    return math.inf if r == "inf" else float(r)


def _f(value, spec):
    return "–" if value is None else format(value, spec)


def point_at(r, concurrency):
    """The point of result `r` at `concurrency` and its highest rate."""
    pts = [p for p in r.get("points", []) if p["concurrency"] == concurrency]
    return max(pts, key=lambda p: _rate(p["rate"])) if pts else None


def markdown(rows, host) -> str:
    out = [hs.line(host), "", "| config | impl | in flight | rate (req/s) | requests | output tok/s | req/s | "
           "TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for impl, r in row["results"].items():
            if not _ok(r):
                out.append(f"| {row['config']} | {impl} | {r.get('error', 'no result')[:200]} | | | | | | | | |")
                continue
            for p in r["points"]:
                out.append(f"| {row['config']} | {impl} | {p['concurrency']} | {p['rate']} | {p['requests']} | "
                           f"{p['tokens_per_s']:.1f} | {p['requests_per_s']:.2f} | {p['ttft_p50_ms']:.1f} | "
                           f"{p['ttft_p99_ms']:.1f} | {_f(p.get('itl_p50_ms'), '.2f')} | "
                           f"{_f(p.get('itl_p99_ms'), '.2f')} |")
    out += ["", "| config | impl | padding q / kv | warmup (s) | graphs compiled (whole stream) | "
            "of them during the points | graphs in eager | tokens = per-request greedy |",
            "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for impl, r in row["results"].items():
            if not _ok(r):
                continue
            if "compiles_total" not in r:  # llama.cpp
                out.append(f"| {row['config']} | {impl} | – | {r['warmup_s']:.1f} | – | – | – | – |")
                continue
            total, warm = r["compiles_total"], r["compiles_warmup"]
            same = "–" if "tokens_differ" not in r else (
                f"yes ({r['tokens_checked']} requests)" if not r["tokens_differ"]
                else f"no: requests {r['tokens_differ']} of {r['tokens_checked']}")
            eager = (f"{total.get('eager', 0)} ({total.get('eager_calls', 0)} calls)" if impl.startswith("ours")
                     else "–")
            pad = r.get("padding", [0, 0])
            pad = "–" if impl == "eager" else " / ".join(str(v or d) for v, d in zip(pad, (64, 16384)))
            out.append(f"| {row['config']} | {impl} | {pad} | {r['warmup_s']:.1f} | {total['dynamo_graphs']} | "
                       f"{total['dynamo_graphs'] - warm['dynamo_graphs']} | {eager} | {same} |")
    single = "; ".join(f"{r['config']}: {r['single']['ms_per_token']:.2f} ms/token" for r in rows
                       if _ok(r.get("single")))
    runs = "; ".join(f"{r['config']} {impl}: {v.get('run', r.get('run', '?'))}"
                     + (f" (load {v['load']:.1f})" if v.get("load") is not None else "")
                     for r in rows for impl, v in r["results"].items())
    out += ["", f"Single-stream decode (ours, hf.generator, batch 1): {single or 'not measured'}. Runs (UTC, the "
            f"host's 1-minute load average): "
            f"{runs}.", "", "TTFT: from the request's submission (once fewer than the cap were in flight) to its "
            "first token; ITL: between successive tokens of a request, all requests' gaps pooled; tokens/s and "
            "requests/s over the span from the first submission to the last token."]
    return "\n".join(out) + "\n"


TARGETS = (
    ("output tok/s at 16 in flight, ours / single-stream hf.generator decode", ">=", 5.0),
    ("output tok/s at 16 in flight, ours / generate_batch with inductor", ">=", 2.0),
    ("output tok/s at 16 in flight, ours / llama.cpp server (16 slots)", ">=", 1.0),
    ("ITL p99 at 16 in flight / single-stream decode ms/token", "<=", 2.0),
    ("graphs run in eager (ours)", "<=", 0.0),
    ("graphs compiled for the whole stream (ours)", "<=", 3.0),
    ("requests whose tokens differ from per-request greedy (ours, f32)", "<=", 0.0),
)


def target_rows(rows):
    """The rows the targets are read from: the 0.5B shape's f32 rows (any padding), else
    (a --quick run) the tiny rows."""
    qwen = [r for r in rows if r["config"].startswith("qwen2 L=24 f32")]
    return qwen or [r for r in rows if r["config"].startswith("tiny f32")]


def evaluate(rows):
    """[(target, op, limit, measured or None, where)]. The throughput and
    ITL lines at 16 in flight (a run without that point: the largest
    number in flight it has), the highest rate."""
    found = []
    for row in target_rows(rows):
        res = row["results"]
        ours = res.get("ours")
        if not _ok(ours):
            continue
        c = max((p["concurrency"] for p in ours["points"] if p["concurrency"] <= TARGET_CONCURRENCY), default=None)
        p = point_at(ours, c) if c else None
        where = f"{row['config']}, {c} in flight, rate {p['rate']}" if p else row["config"]
        single = row.get("single", {}).get("ms_per_token") if _ok(row.get("single")) else None
        peer = lambda impl: point_at(res[impl], c) if _ok(res.get(impl)) and c else None  # noqa: E731
        ratio = lambda q: (p["tokens_per_s"] / q["tokens_per_s"], where) if p and q else (None, "")  # noqa: E731
        total = ours["compiles_total"]
        found.append([
            (p["tokens_per_s"] * single / 1e3, where) if p and single else (None, ""),
            ratio(peer("inductor")), ratio(peer("llama.cpp")),
            (p["itl_p99_ms"] / single, where) if p and single and "itl_p99_ms" in p else (None, ""),
            (float(total.get("eager", 0)), row["config"]), (float(total["dynamo_graphs"]), row["config"]),
            (float(len(ours["tokens_differ"])), row["config"]) if "tokens_differ" in ours else (None, ""),
        ])
    largest = [op == "<=" for _, op, _ in TARGETS]
    out = []
    for i, (name, op, limit) in enumerate(TARGETS):
        value, where = worst([f[i] for f in found], largest=largest[i])
        out.append((name, op, limit, value, where))
    return out


def plot(rows, path):
    """Output tokens/s against ITL p50 and TTFT p50, one line per
    implementation through its numbers in flight (highest rate), one
    column per configuration; False without matplotlib or points."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in rows if any(_ok(v) for v in r["results"].values())]
    if not rows:
        return False
    from matplotlib.ticker import LogFormatter

    fig, axes = plt.subplots(2, len(rows), figsize=(max(4.8, 3.8 * len(rows)), 6.0), squeeze=False)
    for j, row in enumerate(rows):
        for impl, r in row["results"].items():
            if not _ok(r):
                continue
            pts = [point_at(r, c) for c in sorted({p["concurrency"] for p in r["points"]})]
            for i, key in enumerate(("itl_p50_ms", "ttft_p50_ms")):
                xy = [(p["tokens_per_s"], p[key]) for p in pts if key in p]
                color = f"C{IMPLS.index(impl) if impl in IMPLS else len(IMPLS)}"  # one colour per implementation
                axes[i][j].plot(*zip(*xy), marker="o", label=impl, color=color)
                for p in pts:
                    if key in p:
                        axes[i][j].annotate(str(p["concurrency"]), (p["tokens_per_s"], p[key]), fontsize=6)
        axes[0][j].set_title(row["config"], fontsize=9)
        axes[0][j].legend(fontsize=6)
        for i, label in enumerate(("ITL p50 (ms)", "TTFT p50 (ms)")):
            axes[i][j].set_xscale("log")
            axes[i][j].set_yscale("log")
            for axis in (axes[i][j].xaxis, axes[i][j].yaxis):
                axis.set_major_formatter(LogFormatter(labelOnlyBase=False))
                axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
            axes[i][j].set_ylabel(label)
        axes[1][j].set_xlabel("output tokens/s (label: in flight)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def headline(rows):
    """The README's headline row: ours' output tok/s at 16 in flight (the
    target row's largest point up to 16) against eager and inductor (as
    time ratios: their tokens/s over ours)."""
    for row in target_rows(rows):
        res = row["results"]
        if not _ok(res.get("ours")):
            continue
        c = max((p["concurrency"] for p in res["ours"]["points"] if p["concurrency"] <= TARGET_CONCURRENCY))
        ours = point_at(res["ours"], c)["tokens_per_s"]
        peer = lambda e: point_at(res[e], c)["tokens_per_s"] if _ok(res.get(e)) and point_at(res[e], c) else None  # noqa: E731
        inv = lambda v: None if v is None else 1.0 / v  # noqa: E731
        case = f"{row['config'].replace('qwen2 L=24', 'Qwen2-0.5B shape')}, {c} in flight (generate_batch)"
        link = f"[concurrent serving]({rd.PAGES}/{ANCHOR})"
        return (f"| {link} | {case} | {ours:.0f} output tok/s | {rd.ratio(inv(ours), inv(peer('eager')))} | "
                f"{rd.ratio(inv(ours), inv(peer('inductor')))} | — | {rd.where(row.get('host'), row.get('run', ''))} |")
    return None


def write_readme(rows, table, host, readme=rd.README, headline_row=True):
    """Host kind `host`'s subsection of serving.md's concurrent section (the
    hand-written text before the host subsections stays) and, with
    `headline_row`, its row of the README's headline table."""
    path = rd.page_path(PAGE, readme)
    with open(path) as f:
        text = f.read()
    span = rd._section_span(text, SECTION)
    body = "" if span is None else text[span[0] + len(SECTION):span[1]]
    rd.replace_section(SECTION, rd.replace_kind_section(body, hs.kind(host), table), path)
    row = headline(rows)
    if row and headline_row:
        rd.update_headline(PAGE, row, hs.kind(host), readme, link=f"]({rd.PAGES}/{ANCHOR})")


def keep_other_impls(path, rows):
    """`rows` with the implementations they did not run (and the single-
    stream reference when not measured) taken from the saved row of the same
    host kind and configuration."""
    saved = {}
    if os.path.exists(path):
        with open(path) as f:
            saved = {row_key(r): r for r in json.load(f).get("rows", [])}
    out = []
    for row in rows:
        old = saved.get(row_key(row), {})
        host = row.get("host")
        stamp = dict(run=row.get("run"), load=host.get("load") if isinstance(host, dict) else None)
        results = dict(old.get("results", {}), **{k: dict(v, **stamp) for k, v in row["results"].items()})
        order = sorted(results, key=lambda k: IMPLS.index(k) if k in IMPLS else len(IMPLS))
        merged = dict(row, results={k: results[k] for k in order})
        if not _ok(row.get("single")) and _ok(old.get("single")):
            merged["single"] = old["single"]
        out.append(merged)
    return out


def main(argv=None, results=RESULTS, table_path=TABLE, plot_path=PLOT, readme=rd.README):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrent", action="store_true", help="(the flag benchmarks.serve hands over)")
    ap.add_argument("--quick", action="store_true", help="tiny model, 12 requests, 1 and 4 in flight, ours + eager")
    ap.add_argument("--impls", default=None, help="of " + ",".join(IMPLS) + " (default: " + ",".join(DEFAULT_IMPLS)
                    + "; --quick: ours,eager)")
    ap.add_argument("--models", default="tiny,qwen2")
    ap.add_argument("--dtypes", default="f32,bf16", help="the 0.5B shape's dtypes (the tiny model: f32)")
    ap.add_argument("--rates", default=None, help="arrival rates in requests/s, 'inf': all at once "
                                                   "(default 1,4,inf; --quick: 8,inf)")
    ap.add_argument("--q-padding", type=int, default=0, help="with compile, pad each step's query tokens to a "
                    "multiple of this (transformers' q_padding_interval_size; 0: its default, 64)")
    ap.add_argument("--kv-padding", type=int, default=0, help="... and the KV read to a multiple of this "
                    "(kv_padding_interval_size; 0: its default, 16384, capped at the cache)")
    ap.add_argument("--concurrency", default=None, help="numbers in flight to measure, e.g. 16 or 1,16 "
                    "(default: 1,4,16,64; --quick: 1,4); the row's name then ends in 'at N,..'")
    ap.add_argument("--no-single", action="store_true", help="skip measuring the single-stream decode")
    ap.add_argument("--no-measure-host", action="store_true", help="skip the host's GEMM / copy peaks")
    ap.add_argument("--timeout", type=int, default=7200)
    ap.add_argument("--readme", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: the tables, plot (and --readme) from this host kind's saved rows")
    args = ap.parse_args(argv)
    impls = (args.impls or ("ours,eager" if args.quick else ",".join(DEFAULT_IMPLS))).split(",")
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        raise SystemExit(f"unknown implementations {unknown}: expected some of {IMPLS}")
    rates = (args.rates or ("8,inf" if args.quick else "1,4,inf")).split(",")
    for r in rates:
        if r != "inf" and not float(r) > 0:
            raise SystemExit(f"--rates: {r!r} is not a positive rate or 'inf'")
    if args.concurrency and not all(c.isdigit() and int(c) > 0 for c in args.concurrency.split(",")):
        raise SystemExit(f"--concurrency: {args.concurrency!r} is not a list of positive numbers")
    host = hs.describe(measure=not (args.no_measure_host or args.report_only))
    print(hs.line(host), flush=True)
    new = []
    dtypes = tuple(args.dtypes.split(","))
    for name, spec in [] if args.report_only else configs(args.models.split(","), args.quick, dtypes):
        if args.q_padding or args.kv_padding:  # a row of its own
            name += f" pad {args.q_padding or 64}/{args.kv_padding or 16384}"
        if args.concurrency:  # a row of its own
            spec = dict(spec, concurrency=[int(c) for c in args.concurrency.split(",")])
            name += f" at {args.concurrency}"
        row = {"config": name, "results": {}, "run": rd.now(), "host": host}
        with tempfile.TemporaryDirectory() as cache:
            if not args.no_single:
                row["single"] = single_stream(spec, cache, args.timeout)
                print(json.dumps({"config": name, "single": row["single"]}), flush=True)
            for impl in impls:
                if impl == "llama.cpp":
                    r = llama_cpp_row(spec, rates, cache, args.timeout)
                else:
                    r = run_json_child("benchmarks.serve.concurrent_child",
                                       dict(spec, impl=impl, rates=rates, q_padding=args.q_padding,
                                            kv_padding=args.kv_padding), cache, args.timeout)
                row["results"][impl] = r
                print(json.dumps({"config": name, "impl": impl, **r}), flush=True)
        new.append(row)
    order = [n for n, _ in configs(["tiny", "qwen2"], True) + configs(["tiny", "qwen2"], False)]
    rows = rows_of(merge_rows(results, keep_other_impls(results, new), order)["rows"], hs.kind(host))
    if args.report_only:  # the host line of the latest saved run
        host = rd.latest_host(rows, host)
    plotted = plot(rows, plot_path)
    table = rd.report_table(rows, host, markdown, evaluate, table_path,
                            f"\nPlot: benchmarks/results/{os.path.basename(plot_path)}.\n" if plotted else "")
    if args.readme:
        write_readme(rows, table, host, readme)
    return rows
