"""Attention benchmark report: markdown tables (results, compile times,
targets), each table under the line naming the host and its measured
peaks (benchmarks/host.py), a matplotlib plot (when matplotlib is
installed), this host kind's subsection between the marker comments of
docs/benchmarks/attention.md and the attention row of the README's
headline table."""

import os

from . import cases
from . import readme as rd
from . import targets as tg

PAGE = "attention"
TITLE = "Attention benchmark"
README_BEGIN = "<!-- benchmark-table:begin (python -m benchmarks.run --readme) -->"
README_END = "<!-- benchmark-table:end -->"
STAGES = ("export", "import", "to_linalg", "materialize", "lower+jit")
DASH = "—"


def fmt(value, spec=".2f", scale=1.0):
    return DASH if value is None else format(value * scale, spec)


def table(header, body):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in body]


def impls(rows):
    """Implementations in report order: ours first, then the peers."""
    seen = dict.fromkeys(n for r in rows for n in r["time"])
    ours = [n for n in seen if n.startswith("ours")]
    return ours + [n for n in ("torch.compile", "SDPA", "eager") if n in seen]


def percent_of_peak(row, peaks):
    g = tg.gflops(row)
    peak = peaks.get(row["dtype"])
    return None if g is None or not peak else 100.0 * g / peak


def _mib(row, impl):
    m = row["mem"].get(impl)
    return None if m is None else m / 2**20


def _check_cell(row):
    if row["ok"] is None:
        return DASH
    return f"{row['max_abs_diff']:.1e} {'ok' if row['ok'] else 'FAIL'}"


def results_table(rows, peaks):
    names = impls(rows)
    header = (["case", "dtype", "S", "D", "M×N"] + [f"{n} ms" for n in names]
              + [f"ours / {p}" for p in names[1:]]
              + ["ours GFLOP/s", "% peak", "peak extra MiB (" + " / ".join(names) + ")",
                 "max abs diff vs ref"])
    body = []
    for r in rows:
        body.append([r["case"], r["dtype"], r["S"], r["D"], f"{r['M']}×{r['N']}"]
                    + [fmt(r["time"].get(n), scale=1e3) for n in names]
                    + [fmt(tg.ratio(r, peer=p)) for p in names[1:]]
                    + [fmt(tg.gflops(r), ".1f"), fmt(percent_of_peak(r, peaks), ".1f"),
                       " / ".join(fmt(_mib(r, n), ".1f") for n in names), _check_cell(r)])
    return table(header, body)


def compile_table(rows):
    header = ["case", "dtype", "S", "D", "compile s"] + [f"{s} s" for s in STAGES] + [
        "torch.compile first call s (inductor caches on)"]
    body = []
    for r in rows:
        st = r["stages"].get("ours", {})
        body.append([r["case"], r["dtype"], r["S"], r["D"], fmt(r["compile_s"].get("ours"))]
                    + [fmt(st.get(s), ".3f") for s in STAGES]
                    + [fmt(r["first_call_s"].get("torch.compile"), ".1f")])
    return table(header, body)


def targets_table(results):
    body = []
    for t in results:
        passed = {None: "not run", True: "pass", False: "FAIL"}[t.passed]
        body.append([t.name, f"{t.op} {t.limit:g}", fmt(t.measured), t.where or DASH, passed])
    return table(["target", "limit", "measured", "where (worst)", "result"], body)


def errors_lines(rows):
    out = [f"- {tg.label(r)}: {impl}: {msg}" for r in rows for impl, msg in r["errors"].items()]
    out += [f"- {tg.label(r)}: ours differs from {r['reference']} by {r['max_abs_diff']:.2e}"
            for r in rows if r["ok"] is False]
    return out


def markdown(rows, meta, peaks, target_results, host_line):
    """The full report; `host_line` (host.line) above each table."""
    lines = ["# torch-mlir-flex benchmark", ""] + [f"- {m}" for m in meta] + [""]
    lines += ["Cases (B=1, H=8, N(0,1) inputs; `benchmarks/cases.py`):", ""]
    lines += [f"- {name}: {text}" for name, text in cases.CASES.items()] + [""]
    lines += ["## Results", "", "Times are medians of calls in interleaved blocks (benchmarks/timing.py); ratios are "
              "time(ours) / time(peer) (< 1: ours faster); GFLOP/s count the kept (unmasked) "
              "work only; % peak is relative to the measured matmul peak of the dtype.", "", host_line, ""]
    lines += results_table(rows, peaks)
    lines += ["", "## Compile time (ours, cache off) per stage", "", host_line, ""] + compile_table(rows)
    lines += ["", "## Targets (issue #11)", "", host_line, ""] + targets_table(target_results)
    errs = errors_lines(rows)
    if errs:
        lines += ["", "## Failures", ""] + errs
    return "\n".join(lines) + "\n"


def headline_shape(rows):
    """(S, D) of the README table: the largest S up to 4096, D=128 if run."""
    sizes = [r["S"] for r in rows if r.get("purpose") != "memory"]
    S = max([s for s in sizes if s <= 4096] or sizes or [0])
    dims = sorted({r["D"] for r in rows})
    return S, 128 if 128 in dims else (dims[-1] if dims else 0)


def readme_section(rows, meta, peaks, target_results, host_line, full_tables=""):
    """The page's subsection of this run's host kind: `host_line` above each table."""
    S, D = headline_shape(rows)
    body = [[r["case"], r["dtype"], fmt(r["time"].get("ours"), scale=1e3), fmt(tg.ratio(r)),
             fmt(tg.ratio(r, peer="SDPA")), fmt(tg.gflops(r), ".1f"),
             fmt(percent_of_peak(r, peaks), ".0f")]
            for r in rows if r["S"] == S and r["D"] == D and r.get("purpose") != "memory"]
    ratios = [x for r in rows for x in [tg.ratio(r)] if x is not None]
    where = f"; all configurations in [{full_tables}]({full_tables})" if full_tables else ""
    lines = [host_line, "", f"S={S}, D={D}, B=1, H=8 ({meta[0]}{where}):", ""]
    lines += table(["case", "dtype", "ours ms", "/ torch.compile", "/ SDPA", "GFLOP/s", "% peak"],
                   body)
    if ratios:
        lines += ["", f"ours / torch.compile over all {len(ratios)} configurations: "
                      f"{min(ratios):.2f} – {max(ratios):.2f}."]
    lines += ["", "Targets (issue #11):", "", host_line, ""] + targets_table(target_results)
    return "\n".join(lines)


def full_tables_name(page_dir, date, kind):
    """The file of a run's full tables beside the page: attention-<date>.md,
    unless a run on another host kind wrote that one (its host line names
    another kind): then attention-<date>-<kind, lower case, dashed>.md."""
    name = f"{PAGE}-{date}.md"
    path = os.path.join(page_dir, name)
    if os.path.exists(path):
        with open(path) as f:
            if f"\nHost: {kind}: " not in f.read():
                slug = "".join(c if c.isalnum() else "-" for c in kind.lower())
                name = f"{PAGE}-{date}-{'-'.join(w for w in slug.split('-') if w)}.md"
    return name


def update_page(path, section, kind):
    """Replaces host kind `kind`'s subsection between the benchmark markers
    of `path` by `section` (other kinds' stay; a page that does not exist
    yet is made with the markers)."""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        text = f"# {TITLE}\n\n{README_BEGIN}\n{README_END}\n"
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{path} has no benchmark markers ({README_BEGIN} ... {README_END})")
    head, rest = text.split(README_BEGIN, 1)
    marked, tail = rest.split(README_END, 1)
    with open(path, "w") as f:
        f.write(head + README_BEGIN + "\n" + rd.replace_kind_section(marked, kind, section) + README_END + tail)


def run_time(meta):
    """The time of a run from its first header line ("<date> UTC; torch
    ..."), empty where it does not say."""
    first = (meta[0] if meta else "").split(";")[0].strip()
    return first[:-len(" UTC")] if first.endswith(" UTC") else ""


def headline(rows, meta, host):
    """The attention row of the README's headline table: causal f32 (else
    the first case) at the README table's shape, forward; `host` the run's
    description (host.describe)."""
    S, D = headline_shape(rows)
    shown = [r for r in rows if r["S"] == S and r["D"] == D and r.get("purpose") != "memory"]
    pick = next((r for r in shown if (r["case"], r["dtype"]) == ("causal", "f32")), shown[0] if shown else None)
    if pick is None:
        return None
    t = pick["time"]
    ours = t.get("ours")
    return rd.headline_row(PAGE, "attention", f"{pick['case']} {pick['dtype']}, S={S} D={D}, forward",
                           DASH if ours is None else f"{ours * 1e3:.1f} ms", rd.ratio(ours, t.get("eager")),
                           rd.ratio(ours, t.get("torch.compile")), rd.ratio(ours, t.get("SDPA")),
                           rd.where(host, run_time(meta)))


def plot(rows, path):
    """ours / torch.compile against S, one panel per case, one line per
    (dtype, D); False when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    speed = [r for r in rows if r.get("purpose") != "memory" and tg.ratio(r) is not None]
    case_names = list(dict.fromkeys(r["case"] for r in speed))
    if not case_names:
        return False
    fig, axes = plt.subplots(1, len(case_names), figsize=(3.0 * len(case_names), 3.2),
                             squeeze=False, sharey=True)
    for ax, case in zip(axes[0], case_names):
        for key in dict.fromkeys((r["dtype"], r["D"]) for r in speed if r["case"] == case):
            pts = sorted((r["S"], tg.ratio(r)) for r in speed
                         if r["case"] == case and (r["dtype"], r["D"]) == key)
            ax.plot(*zip(*pts), marker="o", label=f"{key[0]} D={key[1]}")
        ax.axhline(0.8, color="gray", linestyle="--", linewidth=0.8)
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_title(case, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("S")
    axes[0][0].set_ylabel("time ours / torch.compile")
    axes[0][-1].legend(fontsize=6)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
