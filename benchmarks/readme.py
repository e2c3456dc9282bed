"""README sections written by the benchmarks (`--readme`): one `## ...`
section replaced as a whole, and the pass/fail table of an issue's
targets."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def replace_section(head: str, block: str, path: str = os.path.join(ROOT, "README.md")):
    """Replaces the section that starts with the line `head` (up to the next
    ``## `` heading) by `head` + `block`; appends it when absent."""
    text = open(path).read()
    if head in text:
        start = text.index(head)
        end = text.find("\n## ", start + len(head))
        end = len(text) if end < 0 else end
    else:
        start = end = len(text)
        text += "\n"
    open(path, "w").write(text[:start] + head + "\n\n" + block.rstrip("\n") + "\n" + text[end:])


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
