"""The JSON files under benchmarks/results/ that rows accumulate in: a
configuration run again on a host of the same kind (benchmarks/host.py)
replaces its whole row (its ratios stay from one run); the rows of other
configurations and of other host kinds are kept."""

import json
import os

from .host import kind


def row_key(row):
    """(host kind, configuration) of a row: what a new row replaces."""
    return kind(row.get("host")), row["config"]


def rows_of(rows, host_kind):
    """The rows measured on hosts of kind `host_kind`."""
    return [r for r in rows if kind(r.get("host")) == host_kind]


def merge_rows(path: str, rows, order, **fields) -> dict:
    """`rows` over those saved in `path` ({"rows": [...], ...}), each keyed by
    its host kind and "config" (row_key), sorted by `order` (configuration
    names; others last). `fields`: other top-level entries, a None value
    keeping the saved one. Writes the file back; returns its whole content."""
    saved = {}
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
    by_key = {row_key(r): r for r in saved.get("rows", [])}
    by_key.update({row_key(r): r for r in rows})
    rank = lambda r: order.index(r["config"]) if r["config"] in order else len(order)  # noqa: E731
    data = {"rows": sorted(by_key.values(), key=rank)}
    for name, value in fields.items():
        data[name] = saved.get(name) if value is None else value
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)
    return data
