"""Serving benchmark: `python -m benchmarks.serve [--all] [--reps N]
[--readme]`; `--quant [--quick]`: the quantized models' benchmark
(benchmarks/serve_quant.py, its own options); `--concurrent [--quick]`:
the concurrent-serving benchmark over transformers' continuous batching
(benchmarks/serve/concurrent.py, its own options).

For each configuration (configs.py), one process per implementation
(child.py: HF's flex path uncompiled, inductor with a DynamicCache and
with a static cache, ours through
`torch.compile(backend="torch_mlir_flex")` with a DynamicCache and with a
static cache, ours through `torch_mlir_flex.hf.generator`) reports the first generate() of a new process (compile
included; ours with an empty compile cache), the warm time to the first
token and the decode ms/token, and whether its tokens equal the uncompiled
model's. The memory-bandwidth column divides the bytes a decode step reads
(weights + KV cache) by the ms/token and compares with a STREAM-like copy
measured in the same run (the host's description, benchmarks/host.py,
measured once per run and printed above each table). Rows accumulate in
benchmarks/results/serve.json (a configuration run again on a host of the
same kind replaces its row: `--only NAME` runs one). Prints a markdown
table and writes it to benchmarks/results/serve.md; `--readme` also
replaces this host kind's results in docs/benchmarks/serving.md and its
serving row in the README's headline table.
"""

import argparse
import json
import os
import sys
import tempfile

from ..child_process import ROOT, run_json_child
from .. import host as hs
from .. import readme as rd
from ..readme import format_targets
from ..results_file import merge_rows, rows_of
from .configs import DEFAULT, LONG
from .targets import bandwidth_pct, evaluate

README_INTRO = ("`python -m benchmarks.serve` (`--all` adds the Qwen2-0.5B shape): greedy, 32 new tokens, "
                "decode ms/token of warm calls (median time between successive tokens), each "
                "implementation in its own process (each row's run and host are listed under the "
                "table), {rounds}: the row keeps the "
                "faster process's decode and warm times (a shared host's speed changes from minute to "
                "minute with its neighbours' load) and the first process's first generate (cold, ours on an "
                "empty compile cache). `ours-api-cached` is ours-api again "
                "in a new process, on the compile cache the ours-api run filled: its first generate is "
                "the first token with the disk cache.\n\n")

PAGE, TITLE = "serving", "Serving benchmark"
# The headline row: ours-api's decode on the first of these that was run.
HEADLINE = ("qwen2 L=24 f32 B=1 P=128", "qwen2 L=24 bf16 B=1 P=128", "tiny f32 B=1 P=128")

# ours-api-cached runs after ours-api, on the cache directory it filled.
# llama.cpp: the F32 / BF16 GGUF of the same weights (benchmarks/llama_cpp_peer.py;
# a "not run" row where llama_cpp is not installed, build_tools/install_llama_cpp.sh).
IMPLS = ("eager", "inductor", "inductor-static", "ours", "ours-static", "ours-api", "ours-api-cached", "llama.cpp")


def run_child(cfg, impl, reps, cache_dir, timeout):
    if impl == "llama.cpp":
        from ..llama_cpp_peer import run_for_serve

        return run_for_serve(cfg, reps, cache_dir, timeout)
    if impl == "ours-api-cached":
        impl, reps = "ours-api", 1  # only its first token is new
    return run_json_child("benchmarks.serve.child", dict(config=cfg.__dict__, impl=impl, reps=reps),
                          cache_dir, timeout)


def _rounds_text(rounds):
    if rounds == 1:
        return "one process per implementation"
    return f"{rounds} processes per implementation, the implementations in turn"


# Kept from the faster of an implementation's processes.
WARM_KEYS = ("ttft_ms", "ms_per_token", "copy_gbs", "bandwidth_pct")


def faster(first, later):
    """`first` (the cold process's result) with the warm measurements of
    `later` when its decode was faster; `rounds_ms` lists each process's
    ms/token. An error in either keeps `first` (with the error, if it has one)."""
    if "error" in first or "error" in later:
        return first
    best = later if later["ms_per_token"] < first["ms_per_token"] else first
    out = dict(first, **{k: best[k] for k in WARM_KEYS if k in best})
    out["rounds_ms"] = first.get("rounds_ms", [first["ms_per_token"]]) + [later["ms_per_token"]]
    return out


def _cell(r, key, fmt):
    return "error" if "error" in r else fmt.format(r[key])


def markdown(rows, host):
    """Each row with the copy bandwidth of its own run (`row["bandwidth"]`);
    `host` (this run's description) named above the table."""
    out = [hs.line(host), "", "| config | impl | first generate, cold (s) | TTFT warm (ms) | decode ms/token | "
           "× inductor | % of bandwidth limit | tokens = reference |",
           "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        res, bandwidth = row["results"], row["bandwidth"]
        ref = res.get("inductor", {})
        # The reference tokens: the uncompiled model's, else inductor's.
        want = next((r["tokens"] for k, r in res.items() if k in ("eager", "inductor") and "tokens" in r), None)
        for impl, r in res.items():
            ratio = (f"{r['ms_per_token'] / ref['ms_per_token']:.2f}"
                     if "error" not in r and "ms_per_token" in ref else "–")
            limit = "–" if "error" in r else f"{bandwidth_pct(r, bandwidth):.0f}"
            same = "–" if "error" in r or want is None else ("yes" if r["tokens"] == want else "no")
            out.append(f"| {row['config']} | {impl} | {_cell(r, 'first_s', '{:.1f}')} | "
                       f"{_cell(r, 'ttft_ms', '{:.1f}')} | {_cell(r, 'ms_per_token', '{:.2f}')} | "
                       f"{ratio} | {limit} | {same} |")
            if "error" in r:
                out.append(f"| | | error: {r['error'][:150]} | | | | | |")
    runs = sorted({f"{r['bandwidth']:.1f}" for r in rows})
    out += ["", "Runs (UTC): " + "; ".join(f"{r['config']}: {r.get('run', 'time not recorded')}, "
                                         f"{hs.compact(r.get('host'))}" for r in rows) + "."]
    out += ["", f"Copy bandwidth (read + write), measured in each configuration's run: {', '.join(runs)} GB/s. "
            "The % of the bandwidth limit divides the bytes a decode step reads by its time and by "
            "the mean of copy bandwidths measured right before and after the same round of tokens (in the "
            "child process: "
            "this host's memory bandwidth changes with its neighbours' load), the median over the "
            "rounds. "
            "Rows come from benchmarks/results/serve.json: a configuration run again (`--only`) "
            "replaces its row.",
            "", "Reference tokens: the uncompiled model's (eager), else inductor's. eager is "
            "transformers' flex path without torch.compile (transformers may still compile "
            "flex_attention itself with inductor: where that fails on this CPU the row says so). "
            "llama.cpp: the same weights converted to an F32 / BF16 GGUF by llama.cpp's own converter "
            "(benchmarks/llama_cpp_peer.py; batch 1; KV cache f16), where llama_cpp is installed."]
    return "\n".join(out) + "\n"


RESULTS = os.path.join(ROOT, "benchmarks", "results", "serve.json")


def _merged(rows, host, path=RESULTS):
    """`rows`, each with this run's copy bandwidth, time and host, over the
    rows of earlier runs (benchmarks/results/serve.json,
    results_file.merge_rows); of them, those of this host's kind."""
    order = [c.name for c in DEFAULT + LONG]
    new = [dict(r, bandwidth=host["copy_gbs"], run=rd.now(), host=host) for r in rows]
    return rows_of(merge_rows(path, new, order)["rows"], hs.kind(host))


def headline(rows):
    """The serving row of the README's headline table: ours-api's decode
    ms/token against the uncompiled model and inductor (None when no
    preferred configuration has an ours-api result)."""
    by_name = {r["config"]: r for r in rows}
    for name in HEADLINE:
        res = by_name.get(name, {}).get("results", {})
        ours = res.get("ours-api", {}).get("ms_per_token")
        if ours is None:
            continue
        peer = lambda impl: res.get(impl, {}).get("ms_per_token")  # noqa: E731
        case = name.replace("qwen2 L=24", "Qwen2-0.5B shape").replace("tiny", "tiny Llama")
        return rd.headline_row(PAGE, "serving", f"{case}, decode (hf.generator)", f"{ours:.1f} ms/token",
                               rd.ratio(ours, peer("eager")), rd.ratio(ours, peer("inductor")), "—",
                               rd.where(by_name[name].get("host"), by_name[name].get("run", "")))
    return None


def write_readme(rows, table, rounds, host, readme=rd.README):
    """Host kind `host`'s subsection of the `## Results` section of
    docs/benchmarks/serving.md (other kinds and the notes after it stay)
    and the serving row of that kind in `readme`'s headline table."""
    intro = README_INTRO.format(rounds=_rounds_text(rounds))
    rd.write_page(PAGE, TITLE, intro + table, hs.kind(host), readme)
    row = headline(rows)
    if row:
        rd.update_headline(PAGE, row, hs.kind(host), readme)


def main():
    if "--quant" in sys.argv[1:]:
        from ..serve_quant import main as quant_main

        quant_main(sys.argv[1:])
        return
    if "--concurrent" in sys.argv[1:]:
        from .concurrent import main as concurrent_main

        concurrent_main(sys.argv[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quant", action="store_true", help="the quantized models (python -m benchmarks.serve "
                                                         "--quant --help: its options)")
    ap.add_argument("--concurrent", action="store_true", help="continuous batching under a request stream "
                                                              "(python -m benchmarks.serve --concurrent --help)")
    ap.add_argument("--all", action="store_true", help="add the Qwen2-0.5B-shaped configurations")
    ap.add_argument("--only", default="", help="comma-separated configuration names (as in the table), "
                                               "e.g. 'qwen2 L=24 f32 B=1 P=128'")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2,
                    help="processes per implementation, run in turn; the faster one's decode is kept")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--readme", action="store_true")
    args = ap.parse_args()
    host = hs.describe()  # its copy GB/s: the bandwidth column's
    print(hs.line(host), flush=True)
    configs = DEFAULT + (LONG if args.all or args.only else [])
    if args.only:
        configs = [c for c in configs if c.name in args.only.split(",")]
    rows = []
    for cfg in configs:
        row = {"config": cfg.name, "results": {}}
        with tempfile.TemporaryDirectory() as cache:
            for rnd in range(args.rounds):
                for impl in args.impls.split(","):
                    if rnd and impl == "ours-api-cached":
                        continue  # a first-token measurement only
                    r = run_child(cfg, impl, args.reps, cache, args.timeout)
                    res = row["results"]
                    res[impl] = faster(res[impl], r) if impl in res else r
                    print(json.dumps({"config": cfg.name, "impl": impl, "round": rnd,
                                      **{k: v for k, v in r.items() if k != "tokens"}}), flush=True)
        rows.append(row)
    rows = _merged(rows, host)
    table = markdown(rows, host) + "\n" + hs.line(host) + "\n\n" + format_targets(evaluate(rows)) + "\n"
    print(table)
    with open(os.path.join(ROOT, "benchmarks", "results", "serve.md"), "w") as f:
        f.write(table)
    if args.readme:
        write_readme(rows, table, args.rounds, host)


if __name__ == "__main__":
    main()
