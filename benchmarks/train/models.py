"""The whole-model training benchmark (issue #42): `python -m benchmarks.train
--models [--quick] [--only NAMES] [--impls ours,inductor,eager] [--readme]`.

Configurations (TrainModelConfig): the issue's Llama (hidden 512, 8 / 4
heads, 4 layers, intermediate 1408, vocab 8192, batch 2, sequence 512, f32,
AdamW) and the Qwen2-0.5B shape (benchmarks/models/configs.py; 2 and 24
layers, sequence 512 and 2048, f32 and bf16 autocast, batch 1);
`--quick`: a tiny Llama (hidden 64, 2 layers, sequence 32, 3 steps), ours
and eager unless `--impls` names inductor too (its cold compile alone
takes most of the quick run's 2 minutes on a shared 2-core host).
Engines per configuration: ours with flex_attention and with SDPA,
inductor with SDPA (it cannot train flex_attention on CPU), eager with SDPA
(eager flex_attention has no backward on CPU).

Each (configuration, engine) runs in its own process
(benchmarks/train/models_child.py) on fresh, empty cache directories (ours'
TORCH_MLIR_FLEX_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR): its first step is the
cold one; a second process on the same directories runs one step, the warm
first step (benchmarks/train_warm.py's phases of it). Rows accumulate in
benchmarks/results/train_models.json (a configuration run again on a host
of the same kind replaces the results of the engines it ran); the table,
the host line and the targets of #42 go to
benchmarks/results/train_models.md; `--readme` writes this host kind's
part of docs/benchmarks/training.md's "Whole models" section and the
whole-model training row of the README's headline table.
"""

import argparse
import dataclasses
import fnmatch
import json
import os
import tempfile

from benchmarks import host as hs
from benchmarks import readme as rd
from benchmarks.child_process import ROOT, run_json_child
from benchmarks.readme import ok as _ok, worst
from benchmarks.results_file import merge_rows, row_key, rows_of

CHILD = "benchmarks.train.models_child"
RESULTS = os.path.join(ROOT, "benchmarks", "results", "train_models.json")
TABLE = os.path.join(ROOT, "benchmarks", "results", "train_models.md")
PAGE, SECTION = "training", "## Whole models"
ANCHOR = "training.md#whole-models"
# (engine name, implementation, attention)
ENGINES = (("ours flex", "ours", "flex"), ("ours sdpa", "ours", "sdpa"),
           ("inductor sdpa", "inductor", "sdpa"), ("eager sdpa", "eager", "sdpa"))
ENGINE_NAMES = [e[0] for e in ENGINES]
LOSS_STEPS, LOSS_TOL = 3, 1e-4  # ours' first losses against eager's (f32)


@dataclasses.dataclass(frozen=True)
class TrainModelConfig:
    name: str
    model: str = "llama"  # "llama" or "qwen2" (Qwen2-0.5B's shape, its vocabulary and widths)
    layers: int = 4
    hidden: int = 512
    heads: int = 8
    kv_heads: int = 4
    inter: int = 1408
    vocab: int = 8192
    batch: int = 2
    seq: int = 512
    dtype: str = "f32"  # "bf16": torch.autocast("cpu", torch.bfloat16) over f32 weights
    warmup: int = 2  # steps after the first one, not timed
    steps: int = 8  # timed steps (their median is the step time)

    def spec(self, impl, attn, threads=0):
        return dict(dataclasses.asdict(self), impl=impl, attn=attn, threads=threads)

    def describe(self):
        if self.model == "qwen2":
            shape = f"Qwen2-0.5B shape, {self.layers} layers"
        else:
            shape = (f"Llama hidden {self.hidden}, {self.heads} / {self.kv_heads} heads, {self.layers} layers, "
                     f"MLP {self.inter}, vocab {self.vocab}")
        dtype = "bf16 autocast" if self.dtype == "bf16" else self.dtype
        return f"{shape}, B={self.batch} S={self.seq}, {dtype}"


LLAMA_4L = TrainModelConfig("llama-4l-s512-f32")
QWEN2_05B = [TrainModelConfig(f"qwen2-0.5b-l{layers}-s{seq}-{dtype}", model="qwen2", layers=layers, hidden=896,
                              heads=14, kv_heads=2, inter=4864, vocab=151936, batch=1, seq=seq, dtype=dtype,
                              warmup=1, steps=3)
             for layers in (2, 24) for seq in (512, 2048) for dtype in ("f32", "bf16")]
FULL = [LLAMA_4L] + QWEN2_05B
QUICK = [TrainModelConfig("tiny-llama-s32-f32", layers=2, hidden=64, heads=4, kv_heads=2, inter=128, vocab=256,
                          batch=2, seq=32, warmup=0, steps=2)]
HEADLINE = (LLAMA_4L.name, "qwen2-0.5b-l24-s512-f32", QUICK[0].name)
# The configurations the warm first step's targets are about (the 4-layer Llama).
WARM_TARGET_CONFIGS = (LLAMA_4L.name,)


def select(only: str, quick: bool):
    """The configurations to run: `only` (comma-separated names or
    fnmatch patterns over every configuration), else QUICK or FULL."""
    if not only:
        return list(QUICK if quick else FULL)
    every = QUICK + FULL
    picked = [c for c in every if any(fnmatch.fnmatchcase(c.name, p) for p in only.split(","))]
    if not picked:
        raise SystemExit(f"no configuration matches {only!r}: {[c.name for c in every]}")
    return picked


def engines_for(impls):
    """The engines of implementations `impls` (names of models_child.IMPLS)."""
    known = {e[1] for e in ENGINES}
    unknown = [i for i in impls if i not in known]
    if unknown:
        raise SystemExit(f"unknown implementations {unknown}: expected some of {sorted(known)}")
    return [e for e in ENGINES if e[1] in impls]


def run_engine(cfg, impl, attn, timeout, threads=0) -> dict:
    """Cold (fresh cache directories) then warm (a second process on the same
    directories, one step) for a compiled engine; one process for eager
    (nothing to cache: its first step is both). The cold process's metrics
    with warm_first_s, warm (its phases, losses, peak RSS) and
    warm_losses_equal (the warm step's loss bit for bit the cold one's)."""
    with tempfile.TemporaryDirectory(prefix="train_models_") as cache:
        cold = run_json_child(CHILD, cfg.spec(impl, attn, threads), cache, timeout)
        if impl == "eager" or not _ok(cold):
            return dict(cold, warm_first_s=cold.get("first_s")) if _ok(cold) else cold
        warm = run_json_child(CHILD, dict(cfg.spec(impl, attn, threads), warmup=0, steps=0), cache, timeout)
    if not _ok(warm):
        return dict(cold, warm={"error": warm["error"]}, warm_first_s=None)
    keep = ("first_s", "losses", "phases", "peak_rss_mib", "children_peak_rss_mib", "dynamo_graphs",
            "compiled_graphs", "eager_graphs", "cache_stats", "build_id")
    out = dict(cold, warm={k: warm[k] for k in keep if k in warm}, warm_first_s=warm["first_s"],
               warm_losses_equal=warm["losses"][:1] == cold["losses"][:1])
    if cold.get("build_id") != warm.get("build_id"):
        out["warm_rebuilt"] = True  # the package changed between the processes: its stage entries missed
    return out


def add_checks(results: dict) -> dict:
    """Each of ours' results with loss_diff: the largest |ours - eager| of
    the first LOSS_STEPS losses (eager: SDPA, the same model, weights and
    batches)."""
    ref = results.get("eager sdpa")
    for name, r in results.items():
        if name.startswith("ours") and _ok(r) and _ok(ref):
            n = min(LOSS_STEPS, len(r["losses"]), len(ref["losses"]))
            r["loss_diff"] = max(abs(a - b) for a, b in zip(r["losses"][:n], ref["losses"][:n]))
    return results


def _f(value, fmt):
    return "–" if value is None else fmt.format(value)


def _graphs(r):
    if "compiled_graphs" in r:
        return f"{r['dynamo_graphs']} / {r['compiled_graphs']} / {r['eager_graphs']}"
    return f"{r['dynamo_graphs']} / – / –"


def markdown(rows, host) -> str:
    out = [hs.line(host), "", "| config | engine | step ms | × inductor | tokens/s | first step cold s | "
           "warm s | peak RSS MiB | × eager | codegen children MiB | graphs: Dynamo / ours / eager | "
           "graph breaks | loss − eager (first 3) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        res = row["results"]
        ind, eag = res.get("inductor sdpa"), res.get("eager sdpa")
        for name, r in res.items():
            if not _ok(r):
                out.append(f"| {row['config']} | {name} | error | | | | | | | | | | |")
                out.append(f"| | | {r['error'][:200]} | | | | | | | | | | |")
                continue
            x_ind = _f(r["step_s"] / ind["step_s"] if _ok(ind) else None, "{:.2f}")
            x_rss = _f(r["peak_rss_mib"] / eag["peak_rss_mib"] if _ok(eag) and eag.get("peak_rss_mib")
                       and r.get("peak_rss_mib") else None, "{:.2f}")
            warm = "–" if name.startswith("eager") else _f(r.get("warm_first_s"), "{:.2f}")
            if r.get("warm_losses_equal") is False:
                warm += " (loss differs)"
            if r.get("warm_rebuilt"):
                warm += " (package edited between)"
            out.append(f"| {row['config']} | {name} | {r['step_s'] * 1e3:.0f} | {x_ind} | {r['tokens_per_s']:.0f} | "
                       f"{r['first_s']:.2f} | {warm} | {_f(r.get('peak_rss_mib'), '{:.0f}')} | {x_rss} | "
                       f"{_f(r.get('children_peak_rss_mib'), '{:.0f}')} | {_graphs(r)} | {r['graph_breaks']} | "
                       f"{_f(r.get('loss_diff'), '{:.1e}')} |")
    out += ["", "Runs (UTC): " + "; ".join(f"{r['config']}: {_runs(r)}" for r in rows) + ".", ""]
    out += [f"- {r['config']}: {_describe(r['config'])}." for r in rows]
    return "\n".join(out) + "\n"


def _runs(row):
    """When a row's engines ran, with torch's threads and the load average
    before each."""
    res = [r for r in row["results"].values()]
    when = ", ".join(sorted({r.get("run", row.get("run", "?")) for r in res}))
    threads = sorted({r["threads"] for r in res if "threads" in r})
    loads = [r["load_before"] for r in res if "load_before" in r]
    extra = [f"torch threads {'/'.join(map(str, threads))}"] if threads else []
    extra += [f"load {min(loads):.1f}-{max(loads):.1f}"] if loads else []
    return when + (f" ({', '.join(extra)})" if extra else "")


def _describe(name):
    cfg = {c.name: c for c in QUICK + FULL}.get(name)
    return cfg.describe() if cfg else name


TARGETS = (
    ("step time, ours / inductor (SDPA), every model row", "<=", 0.8),
    ("warm first step, ours / inductor's (4-layer Llama)", "<=", 1.0),
    ("warm first step of ours, s (4-layer Llama)", "<=", 5.0),
    ("peak RSS, ours / eager's", "<=", 1.1),
    ("graphs run in eager (ours)", "<=", 0),
    ("compiled graphs per training step (ours, Llama, flex and sdpa)", "<=", 2),
    ("largest loss difference ours − eager, first 3 steps (f32), × 1e-4", "<=", 1.0),
)


def evaluate(rows):
    """[(target, op, limit, measured or None, where)] over the issue's
    configurations (the quick tiny rows are not counted)."""
    rows = [r for r in rows if r["config"] in {c.name for c in FULL}]
    ours = [(row, name, r) for row in rows for name, r in row["results"].items()
            if name.startswith("ours") and _ok(r)]

    def peer(row, name):
        r = row["results"].get(name)
        return r if _ok(r) else None

    where = lambda row, name: f"{row['config']} {name}"  # noqa: E731
    found = [
        worst([(r["step_s"] / peer(row, "inductor sdpa")["step_s"], where(row, n)) for row, n, r in ours
               if peer(row, "inductor sdpa")]),
        worst([(r["warm_first_s"] / peer(row, "inductor sdpa")["warm_first_s"], where(row, n))
               for row, n, r in ours if row["config"] in WARM_TARGET_CONFIGS and r.get("warm_first_s")
               and peer(row, "inductor sdpa") and peer(row, "inductor sdpa").get("warm_first_s")]),
        worst([(r["warm_first_s"], where(row, n)) for row, n, r in ours
               if row["config"] in WARM_TARGET_CONFIGS and r.get("warm_first_s") is not None]),
        worst([(r["peak_rss_mib"] / peer(row, "eager sdpa")["peak_rss_mib"], where(row, n)) for row, n, r in ours
               if peer(row, "eager sdpa") and r.get("peak_rss_mib")]),
        worst([(r["eager_graphs"], where(row, n)) for row, n, r in ours]),
        worst([(r["compiled_graphs"], where(row, n)) for row, n, r in ours if row["config"].startswith("llama")]),
        worst([(r["loss_diff"] / 1e-4, where(row, n)) for row, n, r in ours
               if "loss_diff" in r and row["config"].endswith("f32")]),
    ]
    return [(name, op, limit, value, w) for (name, op, limit), (value, w) in zip(TARGETS, found)]


def headline(rows):
    """The README's headline row for whole-model training: ours' step time
    (flex_attention) on the first HEADLINE configuration with a result,
    against eager and inductor (both SDPA)."""
    found = rd.first_result(rows, HEADLINE, "ours flex", "step_s")
    if found is None:
        return None
    row, ours, peer = found
    case = f"{_describe(row['config'])}, flex_attention, AdamW training step"
    link = f"[whole-model training]({rd.PAGES}/{ANCHOR})"
    return (f"| {link} | {case} | {ours * 1e3:.0f} ms/step | {rd.ratio(ours, peer('eager sdpa'))} | "
            f"{rd.ratio(ours, peer('inductor sdpa'))} | — | {rd.where(row.get('host'), row.get('run', ''))} |")


INTRO = ("`python -m benchmarks.train --models` (benchmarks/train/models.py): a transformers causal LM "
         "trained with AdamW (lr 1e-3) from one seed on the same batches in every engine, each (configuration, "
         "engine) in its own process. Step ms: the median of the timed steps after the warmup steps; "
         "tokens/s: batch × sequence / step. First step cold: compilation included, every compile cache "
         "empty (ours' and inductor's in fresh directories); warm: a second process on the same caches. Peak "
         "RSS: getrusage's maxrss of the cold process (model, optimizer, compilation, all steps); codegen "
         "children: the largest child process (our LLVM code generation, the linker), when one ran. Graphs: "
         "Dynamo's / ours compiled (forward + backward) / ours run in eager. Loss − eager: the largest "
         "difference of the first 3 losses from eager SDPA's. Eager flex_attention has no backward on CPU "
         "and inductor cannot train it, so both run SDPA; inductor's SDPA row is the reference of the "
         "step-time target.\n\n")


def write_readme(rows, table, host, readme=rd.README):
    """Host kind `host`'s subsection of training.md's "Whole models"
    section (the intro rewritten, other kinds kept) and the whole-model
    training row of the README's headline table."""
    path = rd.page_path(PAGE, readme)
    text = rd._read_or_new(path, "Training benchmark")
    span = rd._section_span(text, SECTION)
    body = "" if span is None else text[span[0] + len(SECTION):span[1]]
    kinds = body[body.index(rd.KIND_HEAD):] if rd.KIND_HEAD in body else ""
    body = INTRO + rd.replace_kind_section(kinds, hs.kind(host), table)
    rd.replace_section(SECTION, body, path)
    row = headline(rows)
    if row:
        rd.update_headline(PAGE, row, hs.kind(host), readme, link=f"]({rd.PAGES}/{ANCHOR})")


def keep_other_engines(path, rows):
    """`rows` with the results of the engines they did not run taken from
    the saved row of the same host kind and configuration; each result
    carries the time of its own run ("run")."""
    saved = {}
    if os.path.exists(path):
        with open(path) as f:
            saved = {row_key(r): r for r in json.load(f).get("rows", [])}
    out = []
    for row in rows:
        results = dict(saved.get(row_key(row), {}).get("results", {}))
        results.update({k: dict(v, run=row["run"]) for k, v in row["results"].items()})
        order = sorted(results, key=lambda k: ENGINE_NAMES.index(k) if k in ENGINE_NAMES else len(ENGINE_NAMES))
        out.append(dict(row, results={k: results[k] for k in order}))
    return out


def main(argv=None, results=RESULTS, table_path=TABLE, readme=rd.README):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.train --models", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", action="store_true", help="(the flag benchmarks.train hands over)")
    ap.add_argument("--quick", action="store_true", help="the tiny Llama only (a smoke test of the harness)")
    ap.add_argument("--only", default="", help="comma-separated configuration names or patterns, e.g. "
                                               "'llama-4l-s512-f32,qwen2-0.5b-l2-*'")
    ap.add_argument("--impls", default="", help="implementations: ours,inductor,eager (default: all; --quick: "
                                                "ours,eager, as inductor's cold compile alone takes most of 2 min)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per process")
    ap.add_argument("--threads", type=int, default=0, help="torch threads per process (default: torch's)")
    ap.add_argument("--no-measure-host", action="store_true", help="skip the host's GEMM / copy peaks")
    ap.add_argument("--readme", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: the table (and --readme) from this host kind's saved rows")
    args = ap.parse_args(argv)
    configs = select(args.only, args.quick)
    engines = engines_for((args.impls or ("ours,eager" if args.quick else "ours,inductor,eager")).split(","))
    host = hs.describe(measure=not (args.no_measure_host or args.report_only))
    print(hs.line(host), flush=True)
    new = []
    for cfg in [] if args.report_only else configs:
        row = {"config": cfg.name, "results": {}}
        for name, impl, attn in engines:
            with open("/proc/loadavg") as f:
                load = float(f.read().split()[0])
            r = dict(run_engine(cfg, impl, attn, args.timeout, args.threads), load_before=load)
            row["results"][name] = r
            print(json.dumps({"config": cfg.name, "engine": name,
                              **{k: v for k, v in r.items() if k not in ("steps_s", "dynamo_stats")}}), flush=True)
        new.append(dict(row, run=rd.now(), host=host))
    rows = keep_other_engines(results, new)
    for row in rows:
        add_checks(row["results"])
    order = [c.name for c in QUICK + FULL]
    rows = rows_of(merge_rows(results, rows, order)["rows"], hs.kind(host))
    for row in rows:  # saved rows too (--report-only, a run of some engines)
        add_checks(row["results"])
    if args.report_only:  # the host line of the latest run that measured the host's peaks
        host = rd.latest_host(rows, host, "f32_gflops")
    table = rd.report_table(rows, host, markdown, evaluate, table_path)
    if args.readme:
        write_readme(rows, table, host, readme)
    return rows
