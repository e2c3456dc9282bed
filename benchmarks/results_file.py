"""The JSON files under benchmarks/results/ that rows accumulate in: a
configuration run again replaces its whole row (its ratios stay from one
run), the rows of the others are kept."""

import json
import os


def merge_rows(path: str, rows, order, **fields) -> dict:
    """`rows` over those saved in `path` ({"rows": [...], ...}), each keyed by
    its "config", sorted by `order` (configuration names; others last).
    `fields`: other top-level entries, a None value keeping the saved one.
    Writes the file back; returns its whole content."""
    saved = {}
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
    by_config = {r["config"]: r for r in saved.get("rows", [])}
    by_config.update({r["config"]: r for r in rows})
    rank = lambda r: order.index(r["config"]) if r["config"] in order else len(order)  # noqa: E731
    data = {"rows": sorted(by_config.values(), key=rank)}
    for name, value in fields.items():
        data[name] = saved.get(name) if value is None else value
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)
    return data
