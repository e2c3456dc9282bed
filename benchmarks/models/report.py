"""Markdown of the whole-model benchmark, with a pass/fail line per target
(issue #24), each table under the line naming the host and its measured
peaks (benchmarks/host.py), written to docs/benchmarks/models.md (this host
kind's subsection of its `## Results` section) and to the whole-model row
of the README's headline table."""

import datetime

from .. import host as hs
from .. import readme as rd

SECTION = rd.RESULTS_HEAD
PAGE, TITLE = "models", "Whole-model benchmark"
# The headline row: the first of these that was run, else the last row.
HEADLINE = ("qwen2 L=24 S=1024 f32", "qwen2 L=24 S=128 f32", "qwen2 L=2 S=1024 f32")


def _f(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def _ratio(a, b):
    return None if a is None or b is None or not b else a / b


def forward_ms(res, impl):
    """The interleaved process's median when it ran, else the implementation's own process's."""
    inter = res.get("interleaved", {}).get("forward_ms")
    if isinstance(inter, dict) and impl in inter:
        return inter[impl]
    return res.get(impl, {}).get("forward_ms")


def results_table(rows):
    head = ("| config | GFLOP | eager ms | inductor ms | ours ms | ours/eager | ours/inductor | "
            "ours GFLOP/s | compile s: inductor / ours cold / ours cached | peak RSS MiB (weights): "
            "eager / inductor / ours | ours rel. error | run (UTC); host peaks |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        res = r["results"]
        ms = {k: forward_ms(res, k) for k in ("eager", "inductor", "ours")}
        comp = [res.get(k, {}).get("compile_s") for k in ("inductor", "ours", "ours-cached")]
        # inductor compiles at its first call: that call counts as its compile
        ind = res.get("inductor", {})
        if "first_call_s" in ind:
            comp[0] = ind["first_call_s"]
        rss = [res.get(k, {}).get("peak_extra_mib") for k in ("eager", "inductor", "ours")]
        w = res.get("ours", {}).get("weights_mib")
        errs = [f"{k}: {v['error']}" for k, v in res.items() if "error" in v]
        lines.append(
            f"| {r['config']} | {r['gflop']:.0f} | {_f(ms['eager'])} | {_f(ms['inductor'])} | "
            f"{_f(ms['ours'])} | {_f(_ratio(ms['ours'], ms['eager']), '.2f')} | "
            f"{_f(_ratio(ms['ours'], ms['inductor']), '.2f')} | "
            f"{_f(r['gflop'] / ms['ours'] * 1e3 if ms['ours'] else None, '.0f')} | "
            f"{' / '.join(_f(c) for c in comp)} | "
            f"{' / '.join(_f(x, '.0f') for x in rss)} ({_f(w, '.0f')}) | "
            f"{_f(res.get('ours', {}).get('rel_error'), '.1e')}{' — ' + '; '.join(errs) if errs else ''} | "
            f"{r.get('run', '—')}{'; ' + hs.compact(r['host']) if r.get('host') else ''} |")
    return "\n".join(lines)


def targets(rows):
    """[(target, pass/fail/—, evidence)]."""
    out = []
    fwd = [(r["config"], r["results"]) for r in rows]
    for peer in ("eager", "inductor"):
        worst, cfg_w, missing = None, None, 0
        for name, res in fwd:
            ratio = _ratio(forward_ms(res, "ours"), forward_ms(res, peer))
            if ratio is None:
                missing += 1
                continue
            if worst is None or ratio > worst:
                worst, cfg_w = ratio, name
        ok = worst is not None and worst <= 1.0 and not missing
        out.append((f"forward <= 1.0x {peer}", "pass" if ok else "fail",
                    f"worst {_f(worst, '.2f')} ({cfg_w})" + (f"; {missing} not measured" if missing else "")))
    big = [r for r in rows if " L=24 " in r["config"]]
    for r in big:
        res = r["results"]
        cold, cached = res.get("ours", {}).get("compile_s"), res.get("ours-cached", {}).get("compile_s")
        ind = res.get("inductor", {}).get("first_call_s")
        ok = cold is not None and cold <= 120 and (ind is None or cold <= ind)
        out.append((f"{r['config']}: cold compile <= inductor's and <= 120 s", "pass" if ok else "fail",
                    f"ours {_f(cold)} s, inductor {_f(ind)} s"))
        out.append((f"{r['config']}: compile from the cache <= 5 s",
                    "pass" if cached is not None and cached <= 5 else "fail", f"{_f(cached)} s"))
        rss, w = res.get("ours", {}).get("peak_extra_mib"), res.get("ours", {}).get("weights_mib")
        out.append((f"{r['config']}: peak RSS <= weights + 1 GiB",
                    "pass" if rss is not None and w is not None and rss <= w + 1024 else "fail",
                    f"{_f(rss, '.0f')} MiB, weights {_f(w, '.0f')} MiB"))
    return out


def markdown(rows, host, gemm_rows=None):
    """The results section: `rows` and `gemm_rows` measured on hosts of the
    kind of `host` (this run's description), its line above each table."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    line = hs.line(host)
    parts = [SECTION, "",
             f"`python -m benchmarks.models` (written {now}; each row "
             "names the time of its own run and the peaks measured in it in its last column). Forward times are medians "
             "of calls timed in alternating rounds (eager, inductor, ours) in one process, after a warm-up "
             "call; compile times and peak RSS come from one process per implementation, one after another. Compile: inductor's is its first call; ours cold has an empty compile cache, "
             "cached is a new process on that cache. Peak RSS: the peak after the model was built (its "
             "construction's own peak not counted: transformers builds in f32, then casts) over the "
             "process before it was built, so weights included. Rows accumulate in benchmarks/results/models.json (`--only` "
             "re-runs some); each row's ratios come from one run.", "", line, "", results_table(rows), ""]
    if gemm_rows:
        from .gemm import gemm_table

        parts += [line, "", gemm_table(gemm_rows), ""]
    parts += [line, "", "| target | result | evidence |", "|---|---|---|"]
    parts += [f"| {t} | {r} | {e} |" for t, r, e in targets(rows) + (gemm_targets(gemm_rows) if gemm_rows else [])]
    return "\n".join(parts) + "\n"


def gemm_targets(gemm_rows):
    worst = min(gemm_rows, key=lambda r: r["ratio"])
    return [("matmuls >= 80% of torch.matmul's GFLOP/s", "pass" if worst["ratio"] >= 0.8 else "fail",
             f"worst {worst['ratio']:.2f} ({worst['shape']} {worst['dtype']})")]


def headline(rows):
    """The whole-model row of the README's headline table (None without rows)."""
    by_name = {r["config"]: r for r in rows}
    pick = next((by_name[n] for n in HEADLINE if n in by_name), rows[-1] if rows else None)
    if pick is None:
        return None
    res = pick["results"]
    ours = forward_ms(res, "ours")
    case = pick["config"].replace("qwen2 L=24", "Qwen2-0.5B shape (24 layers),").replace("qwen2", "Qwen2")
    return rd.headline_row(PAGE, "whole model", f"{case} forward", "—" if ours is None else f"{ours:.0f} ms",
                           rd.ratio(ours, forward_ms(res, "eager")), rd.ratio(ours, forward_ms(res, "inductor")),
                           "—", rd.where(pick.get("host", ""), pick.get("run", "")))


def update_readme(text, rows, host, readme=rd.README):
    """Replaces host kind `host`'s subsection of the `## Results` section of
    docs/benchmarks/models.md by `text` (which starts with SECTION; other
    kinds and the notes after it stay) and the whole-model row of that
    kind in `readme`'s headline table."""
    rd.write_page(PAGE, TITLE, text[len(SECTION):].lstrip("\n"), hs.kind(host), readme)
    row = headline(rows)
    if row:
        rd.update_headline(PAGE, row, hs.kind(host), readme)
