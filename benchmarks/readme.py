"""Where the benchmarks write with `--readme`: each benchmark's page under
docs/benchmarks/ (its generated `## Results` section replaced as a whole,
the hand-written notes after it kept), its one row of the README's
headline table (between the headline markers), and the pass/fail table
of an issue's targets."""

import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PAGES = "docs/benchmarks"  # relative to the README's directory, also in its links
RESULTS_HEAD = "## Results"
HEADLINE_BEGIN = "<!-- headline:begin (one row per benchmark, written by its --readme) -->"
HEADLINE_END = "<!-- headline:end -->"
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


def replace_section(head: str, block: str, path: str, title: str = "Benchmark"):
    """Replaces the section that starts with the line `head` (up to the next
    ``## `` heading) by `head` + `block`; appends it when absent (to a new
    page titled `title` when `path` does not exist)."""
    text = _read_or_new(path, title)
    if head in text:
        start = text.index(head)
        end = text.find("\n## ", start + len(head))
        end = len(text) if end < 0 else end
    else:
        text = text.rstrip("\n") + "\n\n"
        start = end = len(text)
    with open(path, "w") as f:
        f.write(text[:start] + head + "\n\n" + block.rstrip("\n") + "\n" + text[end:])


def write_page(name: str, title: str, block: str, readme: str = README) -> str:
    """The `## Results` section of docs/benchmarks/<name>.md; its path."""
    path = page_path(name, readme)
    replace_section(RESULTS_HEAD, block, path, title)
    return path


def ratio(ours, peer) -> str:
    """our time / the peer's (< 1: ours faster), or a dash."""
    return DASH if ours is None or peer is None or not peer else f"{ours / peer:.2f}"


def headline_row(name: str, title: str, case: str, ours: str, eager: str, inductor: str, sdpa: str,
                 where: str) -> str:
    link = f"[{title}]({PAGES}/{name}.md)"
    return f"| {link} | {case} | {ours} | {eager} | {inductor} | {sdpa} | {where} |"


def update_headline(name: str, row: str, readme: str = README):
    """Replaces the headline row of benchmark `name` (the row whose first
    cell links docs/benchmarks/<name>.md) between the README's headline
    markers; appends it at the end of the table when absent."""
    with open(readme) as f:
        text = f.read()
    if HEADLINE_BEGIN not in text or HEADLINE_END not in text:
        raise ValueError(f"{readme} has no headline markers ({HEADLINE_BEGIN} ... {HEADLINE_END})")
    head, rest = text.split(HEADLINE_BEGIN, 1)
    table, tail = rest.split(HEADLINE_END, 1)
    lines = table.split("\n")
    link = f"]({PAGES}/{name}.md)"
    found = [i for i, line in enumerate(lines) if line.startswith("|") and link in line.split("|")[1]]
    if found:
        lines[found[0]] = row
    else:
        last = max([i for i, line in enumerate(lines) if line.startswith("|")], default=len(lines) - 1)
        lines.insert(last + 1, row)
    with open(readme, "w") as f:
        f.write(head + HEADLINE_BEGIN + "\n".join(lines) + HEADLINE_END + tail)


def cpu_model() -> str:
    """The host CPU as /proc/cpuinfo names it, with its family and model
    numbers (hosts of one name differ: family 25 is Zen 3/4, 26 Zen 5)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown CPU"
    return (f"{info.get('model name', 'unknown CPU')}, family {info.get('cpu family', '?')} "
            f"model {info.get('model', '?')}")


def host() -> str:
    """This machine, as the headline rows and benchmarks.run's header name it."""
    return f"{os.cpu_count()} CPUs ({cpu_model()})"


def where(host_name: str, run: str) -> str:
    """The last cell of a headline row: the host and the run's time (UTC)."""
    return f"{host_name or 'host not recorded'}, {run or 'time not recorded'} UTC"


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


def format_targets(results) -> str:
    """Markdown table of [(target, op, limit, measured or None, where)]:
    the worst measured value against the limit, pass / FAIL / not run."""
    out = ["| target | limit | measured (worst) | where | |", "|---|---|---|---|---|"]
    for name, op, limit, value, where in results:
        verdict = "not run" if value is None else "pass" if passed(op, value, limit) else "FAIL"
        shown = "-" if value is None else f"{value:.2f}"
        out.append(f"| {name} | {op} {limit:g} | {shown} | {where} | {verdict} |")
    return "\n".join(out)
