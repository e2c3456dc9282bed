"""The targets of issue #25 on the serving benchmark's rows (pass/fail:
benchmarks/readme.py's format_targets). A row: {"config": name, "results":
{impl: child result}} (child.py)."""

from benchmarks.readme import worst

TARGETS = (
    # (name, comparison, limit)
    ("decode ms/token, ours-api / inductor (tiny Llama)", "<=", 0.5),
    ("decode ms/token, ours-api / inductor (0.5B shape)", "<=", 0.8),
    ("ours-api at B=1 on the 0.5B shape: % of the memory-bandwidth limit", ">=", 70.0),
    ("model.generate + torch.compile(backend=ours): graphs run in eager", "<=", 0.0),
    ("model.generate + torch.compile(backend=ours): ms/token / inductor's", "<=", 1.0),
    ("first token in a new process, empty cache: ours-api / inductor", "<=", 1.0),
    ("first token in a new process, with the disk cache (0.5B shape), s", "<=", 3.0),
)


def _ok(r):
    return r is not None and "error" not in r


def evaluate(rows):
    """[(name, op, limit, measured or None, where)]."""
    def ratio(impl, key, model):
        found = []
        for row in rows:
            res = row["results"]
            if row["config"].startswith(model) and _ok(res.get(impl)) and _ok(res.get("inductor")):
                found.append((res[impl][key] / res["inductor"][key], row["config"]))
        return worst(found)

    def share(row):
        return bandwidth_pct(row["results"]["ours-api"], row["bandwidth"])

    eager_graphs = [(float(r["graphs"].get("eager", 0)), f"{row['config']} {impl}")
                    for row in rows for impl, r in row["results"].items() if _ok(r) and "graphs" in r]
    found = [
        ratio("ours-api", "ms_per_token", "tiny"),
        ratio("ours-api", "ms_per_token", "qwen2"),
        worst([(share(row), row["config"]) for row in rows
                if row["config"].startswith("qwen2") and " B=1 " in row["config"]
                and _ok(row["results"].get("ours-api"))], largest=False),
        worst(eager_graphs),
        ratio("ours", "ms_per_token", ""),
        ratio("ours-api", "first_s", ""),
        worst([(row["results"]["ours-api-cached"]["first_s"], row["config"]) for row in rows
               if row["config"].startswith("qwen2") and _ok(row["results"].get("ours-api-cached"))]),
    ]
    return [(name, op, limit, value, where) for (name, op, limit), (value, where) in zip(TARGETS, found)]


def bandwidth_pct(r, run_bandwidth):
    """% of the memory-bandwidth limit of one implementation's result `r`:
    its own per-round measure (child.py), else against the copy bandwidth
    measured at the start of the run (older rows)."""
    if "bandwidth_pct" in r:
        return r["bandwidth_pct"]
    return 100 * r["bytes_per_token"] / (run_bandwidth * 1e6 * r["ms_per_token"])
