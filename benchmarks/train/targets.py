"""The targets of issue #26 on the training benchmark's rows (pass/fail:
benchmarks/readme.py's format_targets)."""

from benchmarks.readme import worst

TARGETS = (
    # (name, comparison, limit)
    ("causal fwd+bwd time / SDPA's (f32, S 1024-4096)", "<=", 1.0),
    ("causal fwd+bwd time / SDPA's (bf16, S 1024-4096)", "<=", 1.0),
    ("every case: time / eager float32 math's", "<=", 0.2),
    ("causal f32: % of the f32 matmul peak (3.5x forward FLOPs of kept blocks)", ">=", 60.0),
    ("extra memory of a call at S=8192, MiB", "<", 128.0),
    ("compile time (our stages) of forward + backward per attention op, s", "<", 2.0),
)


def evaluate(rows, memory, peaks):
    """[(name, op, limit, measured or None, where)]."""
    def causal(dtype):
        return [(r["time"]["ours"] / r["time"]["sdpa"], f"{r['case']} {dtype}") for r in rows
                if r["kind"] == "causal" and r["dtype"] == dtype and "sdpa" in r["time"]]

    found = [
        worst(causal("f32")),
        worst(causal("bf16")),
        worst([(r["time"]["ours"] / r["time"]["eager"], f"{r['case']} {r['dtype']}") for r in rows]),
        worst([(100 * r["flops"] / r["time"]["ours"] / 1e9 / peaks["f32"], r["case"]) for r in rows
                if r["kind"] == "causal" and r["dtype"] == "f32"], largest=False),
        worst([(m["extra_mib"], f"causal {m['dtype']} S={m['S']} D={m['D']}") for m in memory]),
        worst([(r["compile_s"], f"{r['case']} {r['dtype']}") for r in rows]),
    ]
    return [(name, op, limit, value, where) for (name, op, limit), (value, where) in zip(TARGETS, found)]
