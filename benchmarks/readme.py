"""Where the benchmarks write with `--readme`: each benchmark's page under
docs/benchmarks/ (in its generated `## Results` section, the subsection of
this run's host kind replaced as a whole; other host kinds' subsections and
the hand-written notes after the section kept), its one row in the
README's headline table (between the headline markers, in the row set of
this run's host kind; a new kind gets its own row set), and the pass/fail
table of an issue's targets. Host kinds: benchmarks/host.py."""

import os
import time

from . import host as hs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PAGES = "docs/benchmarks"  # relative to the README's directory, also in its links
RESULTS_HEAD = "## Results"
KIND_HEAD = "### Host: "  # a host kind's subsection, in the README's headline table and in pages
HEADLINE_BEGIN = ("<!-- headline:begin (one row set per host kind, one row per benchmark, "
                  "written by its --readme) -->")
HEADLINE_END = "<!-- headline:end -->"
HEADLINE_HEADER = ("| benchmark | case | ours | ours / eager | ours / inductor | ours / SDPA | host peaks; run |\n"
                   "|---|---|---|---|---|---|---|")
DASH = "—"


def page_path(name: str, readme: str = README) -> str:
    """docs/benchmarks/<name>.md next to `readme`."""
    return os.path.join(os.path.dirname(os.path.abspath(readme)), *PAGES.split("/"), name + ".md")


def _read_or_new(path: str, title: str) -> str:
    if os.path.exists(path):
        with open(path) as f:
            return f.read()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return f"# {title}\n"


def _section_span(text: str, head: str):
    """(start, end) of the section that starts with the line `head`, up to
    the next ``## `` heading; None when absent."""
    if head not in text:
        return None
    start = text.index(head)
    end = text.find("\n## ", start + len(head))
    return start, len(text) if end < 0 else end


def replace_section(head: str, block: str, path: str, title: str = "Benchmark"):
    """Replaces the section that starts with the line `head` (up to the next
    ``## `` heading) by `head` + `block`; appends it when absent (to a new
    page titled `title` when `path` does not exist)."""
    text = _read_or_new(path, title)
    span = _section_span(text, head)
    if span is None:
        text = text.rstrip("\n") + "\n\n"
        span = (len(text), len(text))
    with open(path, "w") as f:
        f.write(text[:span[0]] + head + "\n\n" + block.rstrip("\n") + "\n" + text[span[1]:])


def kind_section(text: str, kind: str):
    """The body of host kind `kind`'s subsection of `text` (the lines after
    its ``### Host: <kind>`` heading up to the next such heading), or None."""
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith(KIND_HEAD)]
    mine = [i for i in heads if lines[i] == KIND_HEAD + kind]
    if not mine:
        return None
    end = next((i for i in heads if i > mine[0]), len(lines))
    return "\n".join(lines[mine[0] + 1:end]).strip("\n")


def replace_kind_section(text: str, kind: str, body: str) -> str:
    """`text` with host kind `kind`'s subsection replaced by `body` (appended
    after the others when the kind is new); the other kinds' subsections and
    any text before the first one stay as they are."""
    lines = text.strip("\n").split("\n") if text.strip("\n") else []
    heads = [i for i, line in enumerate(lines) if line.startswith(KIND_HEAD)]
    mine = [i for i in heads if lines[i] == KIND_HEAD + kind]
    new = [KIND_HEAD + kind, "", *body.strip("\n").split("\n")]
    if mine:
        end = next((i for i in heads if i > mine[0]), None)
        lines[mine[0]:len(lines) if end is None else end] = new + ([""] if end is not None else [])
    else:
        lines += ([""] if lines else []) + new
    return "\n".join(lines) + "\n"


def write_page(name: str, title: str, block: str, kind: str, readme: str = README) -> str:
    """Host kind `kind`'s subsection of the `## Results` section of
    docs/benchmarks/<name>.md (the other kinds' kept); its path."""
    path = page_path(name, readme)
    text = _read_or_new(path, title)
    span = _section_span(text, RESULTS_HEAD)
    body = "" if span is None else text[span[0] + len(RESULTS_HEAD):span[1]]
    replace_section(RESULTS_HEAD, replace_kind_section(body, kind, block), path, title)
    return path


def ratio(ours, peer) -> str:
    """our time / the peer's (< 1: ours faster), or a dash; two significant
    digits below 0.1 (0.0049, not 0.00)."""
    if ours is None or peer is None or not peer:
        return DASH
    r = ours / peer
    return f"{r:.2f}" if round(r, 2) >= 0.1 else f"{r:.2g}"


def headline_row(name: str, title: str, case: str, ours: str, eager: str, inductor: str, sdpa: str,
                 where: str) -> str:
    link = f"[{title}]({PAGES}/{name}.md)"
    return f"| {link} | {case} | {ours} | {eager} | {inductor} | {sdpa} | {where} |"


def update_headline(name: str, row: str, kind: str, readme: str = README, link: str = ""):
    """Replaces the headline row of benchmark `name` (the row whose first
    cell links docs/benchmarks/<name>.md) in the row set of host kind
    `kind` between the README's headline markers; appends it to that row
    set when absent, and the row set (under its ``### Host:`` heading)
    when the kind is new. Other kinds' rows stay as they are. `link`: the
    first cell's link target that identifies the row, when not the page
    itself (``](docs/benchmarks/serving.md#quantized-models)``)."""
    with open(readme) as f:
        text = f.read()
    if HEADLINE_BEGIN not in text or HEADLINE_END not in text:
        raise ValueError(f"{readme} has no headline markers ({HEADLINE_BEGIN} ... {HEADLINE_END})")
    head, rest = text.split(HEADLINE_BEGIN, 1)
    table, tail = rest.split(HEADLINE_END, 1)
    lines = (kind_section(table, kind) or HEADLINE_HEADER).split("\n")
    link = link or f"]({PAGES}/{name}.md)"
    found = [i for i, line in enumerate(lines) if line.startswith("|") and link in line.split("|")[1]]
    if found:
        lines[found[0]] = row
    else:
        last = max([i for i, line in enumerate(lines) if line.startswith("|")], default=len(lines) - 1)
        lines.insert(last + 1, row)
    table = replace_kind_section(table, kind, "\n".join(lines))
    with open(readme, "w") as f:
        f.write(head + HEADLINE_BEGIN + "\n" + table + HEADLINE_END + tail)


def where(host, run: str) -> str:
    """The last cell of a headline row: the host's cores and measured peaks
    (host.compact; an older row's host string as it is) and the run's time."""
    return f"{hs.compact(host) if host else hs.UNKNOWN}; {run or 'time not recorded'} UTC"


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime())


def worst(values, largest=True):
    """(value, where) of the largest (or smallest) of (value, where) pairs
    whose value is not None; (None, "") when there is none."""
    values = [v for v in values if v[0] is not None]
    if not values:
        return None, ""
    return max(values) if largest else min(values)


def passed(op: str, value: float, limit: float) -> bool:
    return value <= limit if op == "<=" else value < limit if op == "<" else value >= limit


def latest_host(rows, host, measured_key=None):
    """The host line of the latest saved row that measured `measured_key`
    (any row without a key), for a --report-only run; `host` without one."""
    saved = [r for r in rows if isinstance(r.get("host"), dict)
             and (measured_key is None or r["host"].get(measured_key))]
    return max(saved, key=lambda r: r.get("run", ""))["host"] if saved else host


def ok(result) -> bool:
    """Whether an engine's result was measured (present, no "error")."""
    return bool(result) and "error" not in result


def first_result(rows, names, impl, key):
    """For a headline row: the first configuration of `names` (in that
    order) whose `impl` result is ok, as (its row, that result's `key`,
    peer), `peer(engine)` being `engine`'s `key` in the same row (None when
    it failed or did not run); None when no configuration has one."""
    by_name = {r["config"]: r for r in rows}
    for name in names:
        row = by_name.get(name, {})
        res = row.get("results", {})
        if ok(res.get(impl)):
            def peer(engine, res=res):
                return res[engine][key] if ok(res.get(engine)) else None
            return row, res[impl][key], peer
    return None


def report_table(rows, host, markdown, evaluate, path, suffix="") -> str:
    """The run's markdown table (`markdown(rows, host)`), its targets
    (`evaluate(rows)`) and `suffix`: printed, written to `path`, returned."""
    table = markdown(rows, host) + "\n" + format_targets(evaluate(rows)) + "\n" + suffix
    print(table)
    with open(path, "w") as f:
        f.write(table)
    return table


def format_targets(results) -> str:
    """Markdown table of [(target, op, limit, measured or None, where)]:
    the worst measured value against the limit, pass / FAIL / not run."""
    out = ["| target | limit | measured (worst) | where | |", "|---|---|---|---|---|"]
    for name, op, limit, value, where in results:
        verdict = "not run" if value is None else "pass" if passed(op, value, limit) else "FAIL"
        shown = "-" if value is None else f"{value:.2f}"
        out.append(f"| {name} | {op} {limit:g} | {shown} | {where} | {verdict} |")
    return "\n".join(out)
