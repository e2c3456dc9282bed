"""The quantized serving benchmark (issue #41): `python -m benchmarks.serve
--quant [--quick] [--only NAMES] [--impls ...] [--readme]`.

For the Qwen2-0.5B and Qwen2-1.5B shapes (`--quick`: the tiny Llama only),
int8 (torchao Int8WeightOnlyConfig) and int4 (PrototypeInt4WeightOnlyConfig
group 32, torch's CPU packing), batch 1 and 4, each engine in its own
process (serve_quant_child.py: ours = hf.generator, torchao + inductor,
eager transformers; llama_cpp_peer.py: llama.cpp at the same bits when
llama_cpp imports): decode ms/token, time to first token of the 128-token
prompt, and the % of the bandwidth limit of the bytes a decode step reads
(quant_models.bytes_per_token). An engine that fails is a row with its
error. Rows accumulate in benchmarks/results/serve_quant.json (a
configuration run again on a host of the same kind replaces its row);
the table, the host line and a pass/fail line per target of #41 go to
benchmarks/results/serve_quant.md; `--readme` writes this host kind's part
of docs/benchmarks/serving.md's "Quantized models" section and the
quantized-serving row of the README's headline table."""

import argparse
import json
import os
import tempfile

from . import host as hs
from . import readme as rd
from .child_process import ROOT, run_json_child
from .llama_cpp_peer import PEERS, available
from .quant_models import NICE, QuantServeConfig
from .readme import ok as _ok, worst
from .results_file import merge_rows, row_key, rows_of

FULL = [QuantServeConfig(m, q, b) for m in ("qwen2-0.5b", "qwen2-1.5b") for q in ("int8", "int4") for b in (1, 4)]
QUICK = [QuantServeConfig("tiny", q, 1, prompt=16, new_tokens=8) for q in ("int8", "int4")]
ENGINES = ("ours", "inductor", "eager", "llama.cpp")
RESULTS = os.path.join(ROOT, "benchmarks", "results", "serve_quant.json")
TABLE = os.path.join(ROOT, "benchmarks", "results", "serve_quant.md")
PAGE, SECTION = "serving", "## Quantized models"
ANCHOR = "serving.md#quantized-models"
HEADLINE = ("qwen2-0.5b int4 g32 f32 B=1 P=128", "qwen2-0.5b int8 f32 B=1 P=128", "tiny int4 g32 f32 B=1 P=16")


def peer_names(cfg: QuantServeConfig):
    """The llama.cpp rows of a configuration: "llama.cpp <format>" per
    format of the same bits."""
    return [f"llama.cpp {fmt}" for fmt in PEERS[cfg.quant]]


def run_engine(cfg, impl, reps, cache_dir, timeout, work):
    """One engine's result (a dict with "error" when it failed or could not run)."""
    spec = dict(config=cfg.__dict__, reps=reps)
    if impl.startswith("llama.cpp"):
        why = available()
        if why:
            return {"error": "not run: " + why}
        if cfg.batch != 1:
            return {"error": "not run: llama-cpp-python's Llama runs one sequence (batch 1)"}
        return run_json_child("benchmarks.llama_cpp_peer", dict(spec, format=impl.split()[1], work=work),
                              cache_dir, timeout)
    return run_json_child("benchmarks.serve_quant_child", dict(spec, impl=impl), cache_dir, timeout)


def _cell(r, key, fmt):
    return "error" if not _ok(r) else fmt.format(r[key])


def markdown(rows, host) -> str:
    out = [hs.line(host), "", "| config | engine | MB read / token | TTFT warm (ms) | decode ms/token | "
           "× inductor | % of bandwidth limit | tokens = eager |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        res = row["results"]
        ref, want = res.get("inductor", {}), res.get("eager", {}).get("tokens")
        for impl, r in res.items():
            ok = _ok(r)
            ratio = f"{r['ms_per_token'] / ref['ms_per_token']:.2f}" if ok and _ok(ref) else "–"
            same = "–" if not ok or want is None or impl.startswith("llama") else (
                "yes" if r["tokens"] == want else "no")
            mb = f"{r['bytes_per_token'] / 1e6:.4g}" if ok else "error"
            out.append(f"| {row['config']} | {impl} | {mb} | "
                       f"{_cell(r, 'ttft_ms', '{:.1f}')} | {_cell(r, 'ms_per_token', '{:.2f}')} | {ratio} | "
                       f"{_cell(r, 'bandwidth_pct', '{:.0f}')} | {same} |")
            if not ok:
                out.append(f"| | | {r['error'][:200]} | | | | | |")
    runs = lambda r: ", ".join(sorted({v.get("run", r.get("run", "?")) for v in r["results"].values()}))  # noqa: E731
    out += ["", "Runs (UTC): " + "; ".join(f"{r['config']}: {runs(r)}" for r in rows) + ".", "",
            "MB read / token: the quantized weights as the model holds them (torchao's int8 data and "
            "scales, the int4 packed bytes and scale_and_zero; the embedding's rows of the batch; llama.cpp: "
            "the GGUF's tensors) plus the KV cache mid-generation (ours, inductor, eager: in the model's "
            "dtype; llama.cpp: f16). The % of the bandwidth limit divides it by the decode ms/token and by "
            "the copy bandwidth measured around each round in the same process. Tokens: greedy, against "
            "eager transformers on the same quantized model (llama.cpp's numerics differ: not compared)."]
    return "\n".join(out) + "\n"


TARGETS = (
    ("ours at B=1: % of the bandwidth limit of the quantized bytes (both shapes)", ">=", 80.0),
    ("decode ms/token, ours / torchao + inductor", "<=", 0.5),
    ("decode ms/token at B=1, ours / llama.cpp at the same bits (Q8_0 / Q4_0)", "<=", 1.0),
    ("time to first token (128 tokens), ours / llama.cpp at the same bits", "<=", 1.0),
)


def evaluate(rows):
    """[(target, op, limit, measured or None, where)] over the rows of the
    0.5B and 1.5B shapes (the quick tiny rows are not the issue's)."""
    rows = [r for r in rows if r["config"].startswith("qwen2")]

    def ratio(key, peer, only_b1):
        found = []
        for row in rows:
            res = row["results"]
            name = peer(row) if callable(peer) else peer
            if only_b1 and " B=1 " not in row["config"] + " ":
                continue
            if _ok(res.get("ours")) and _ok(res.get(name)):
                found.append((res["ours"][key] / res[name][key], f"{row['config']} vs {name}"))
        return worst(found)

    def same_bits(row):  # the first peer format: Q8_0 for int8, Q4_0 for int4
        return "llama.cpp " + PEERS["int4" if " int4" in row["config"] else "int8"][0]

    share = [(row["results"]["ours"]["bandwidth_pct"], row["config"]) for row in rows
             if " B=1 " in row["config"] + " " and _ok(row["results"].get("ours"))]
    found = [worst(share, largest=False), ratio("ms_per_token", "inductor", False),
             ratio("ms_per_token", same_bits, True), ratio("ttft_ms", same_bits, True)]
    return [(name, op, limit, value, where) for (name, op, limit), (value, where) in zip(TARGETS, found)]


def headline(rows):
    """The README's headline row for quantized serving: ours' decode on the
    first HEADLINE configuration with a result, against eager and inductor."""
    found = rd.first_result(rows, HEADLINE, "ours", "ms_per_token")
    if found is None:
        return None
    row, ours, peer = found
    name = row["config"]
    model, quant = name.split()[0], " ".join(name.split()[1:-3])
    case = f"{NICE.get(model, model)} {quant} B=1, decode (hf.generator)"
    link = f"[quantized serving]({rd.PAGES}/{ANCHOR})"
    return (f"| {link} | {case} | {ours:.1f} ms/token | {rd.ratio(ours, peer('eager'))} | "
            f"{rd.ratio(ours, peer('inductor'))} | — | {rd.where(row.get('host'), row.get('run', ''))} |")


def write_readme(rows, table, host, readme=rd.README):
    """Host kind `host`'s subsection of serving.md's quantized section and
    the quantized row of the README's headline table."""
    path = rd.page_path(PAGE, readme)
    with open(path) as f:
        text = f.read()
    span = rd._section_span(text, SECTION)
    body = "" if span is None else text[span[0] + len(SECTION):span[1]]
    intro = ("`python -m benchmarks.serve --quant` (docs/quantization.md): greedy, 32 new tokens after a "
             "prompt of P tokens (`--quick`'s tiny rows: 8), one process per engine; random weights from "
             "one seed in every engine.\n\n")
    rd.replace_section(SECTION, rd.replace_kind_section(body, hs.kind(host), intro + table), path)
    row = headline(rows)
    if row:
        rd.update_headline(PAGE, row, hs.kind(host), readme, link=f"]({rd.PAGES}/{ANCHOR})")


def engine_order(config: str):
    """The engines of a configuration's rows, in the table's order."""
    quant = "int4" if " int4" in config else "int8"
    return ["ours", "inductor", "eager"] + [f"llama.cpp {f}" for f in PEERS[quant]]


def keep_other_engines(path, rows):
    """`rows` with the results of the engines they did not run taken from
    the saved row of the same host kind and configuration (so `--impls
    llama.cpp` adds the peer to an earlier run's row); each result carries
    the time of its own run ("run")."""
    saved = {}
    if os.path.exists(path):
        with open(path) as f:
            saved = {row_key(r): r for r in json.load(f).get("rows", [])}
    out = []
    for row in rows:
        old = saved.get(row_key(row), {})
        if not (row.get("host") or {}).get("copy_gbs") and (old.get("host") or {}).get("copy_gbs"):
            row = dict(row, host=old["host"])  # a run that did not measure the host keeps the peaks measured
        results = dict(old.get("results", {}))
        results.update({k: dict(v, run=row["run"]) for k, v in row["results"].items()})
        names = engine_order(row["config"])
        order = sorted(results, key=lambda k: names.index(k) if k in names else len(names))
        out.append(dict(row, results={k: results[k] for k in order}))
    return out


def main(argv=None, results=RESULTS, table_path=TABLE, readme=rd.README):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quant", action="store_true", help="(the flag benchmarks.serve hands over)")
    ap.add_argument("--quick", action="store_true", help="the tiny Llama only (a smoke test of the harness)")
    ap.add_argument("--only", default="", help="comma-separated configuration names, e.g. "
                                               "'qwen2-0.5b int8 f32 B=1 P=128'")
    ap.add_argument("--impls", default=",".join(ENGINES), help="engines: " + ",".join(ENGINES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--no-measure-host", action="store_true", help="skip the host's GEMM / copy peaks")
    ap.add_argument("--gguf-dir", default=os.path.join(tempfile.gettempdir(), "flex-bench-gguf"),
                    help="where llama.cpp's GGUF files are made and kept between runs")
    ap.add_argument("--readme", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: the table (and --readme) from this host kind's saved rows")
    args = ap.parse_args(argv)
    host = hs.describe(measure=not (args.no_measure_host or args.report_only))
    print(hs.line(host), flush=True)
    configs = QUICK if args.quick else FULL
    if args.only:
        configs = [c for c in QUICK + FULL if c.name in args.only.split(",")]
        if not configs:
            raise SystemExit(f"no configuration named {args.only!r}: {[c.name for c in QUICK + FULL]}")
    engines = args.impls.split(",")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise SystemExit(f"unknown engines {unknown}: expected some of {ENGINES}")
    new = []
    for cfg in [] if args.report_only else configs:
        row = {"config": cfg.name, "results": {}}
        with tempfile.TemporaryDirectory() as cache:
            for impl in engines:
                for name in (peer_names(cfg) if impl == "llama.cpp" else [impl]):
                    r = run_engine(cfg, name, args.reps, cache, args.timeout, args.gguf_dir)
                    row["results"][name] = r
                    print(json.dumps({"config": cfg.name, "engine": name,
                                      **{k: v for k, v in r.items() if k != "tokens"}}), flush=True)
        new.append(dict(row, run=rd.now(), host=host))
    order = [c.name for c in QUICK + FULL]
    rows = rows_of(merge_rows(results, keep_other_engines(results, new), order)["rows"], hs.kind(host))
    if args.report_only:  # the host line of the latest run that measured the host's peaks
        host = rd.latest_host(rows, host, "copy_gbs")
    table = rd.report_table(rows, host, markdown, evaluate, table_path)
    if args.readme:
        write_readme(rows, table, host, readme)
    return rows
