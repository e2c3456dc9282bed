"""Whole-model benchmark: `python -m benchmarks.models [--all] [--only NAME]
[--reps N] [--readme]`.

For each configuration (configs.py) five processes run one after another:
eager PyTorch, inductor (`torch.compile`), ours with an empty compile cache
and ours again on that cache each report compile time and peak RSS over the
process before the model was built (weights included); a fifth process
compiles the model with all three and times their forwards in alternating
rounds (`--reps` rounds after a warm-up call), so that the forward ratios
compare calls made under the same load. Those interleaved medians are the
table's forward times. Outputs are compared with
eager's (max abs error over max abs value). Prints a markdown table and
writes it to benchmarks/results/models.md; `--readme` also replaces the
results of docs/benchmarks/models.md and the whole-model row of the
README's headline table, both for this host's kind (benchmarks/host.py:
described and its peaks measured once per run, the line above each
table). Rows accumulate in benchmarks/results/models.json: a configuration
run again (`--only`) on a host of the same kind replaces its row, the
others keep theirs (each row says when it ran, on which host).
"""

import argparse
import json
import os
import tempfile

import torch_mlir_flex  # noqa: F401  (before torch-mlir)
import torch

from .. import host as hs
from .. import readme as rd
from ..child_process import run_json_child
from ..results_file import merge_rows, rows_of
from .configs import DEFAULT, LONG, ROOT, matmul_gflop
from .report import markdown, update_readme

IMPLS = ("eager", "inductor", "ours", "ours-cached", "interleaved")


def run_child(cfg, impl, reps, out, cache_dir, timeout):
    spec = dict(model=cfg.model, seq=cfg.seq, dtype=cfg.dtype, layers=cfg.layers, impl=impl,
                reps=reps, out=out)
    return run_json_child("benchmarks.models.child", spec, cache_dir, timeout)


def rel_error(path, ref_path):
    if not (os.path.exists(path) and os.path.exists(ref_path)):
        return None
    got, ref = torch.load(path).float(), torch.load(ref_path).float()
    return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def run_config(cfg, reps, timeout, log):
    row = {"config": cfg.name, "gflop": matmul_gflop(cfg), "results": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        for impl in IMPLS:
            out = os.path.join(tmp, f"{impl}.pt")
            res = run_child(cfg, impl, reps, out, cache, timeout)
            if impl not in ("eager", "interleaved") and "error" not in res:
                res["rel_error"] = rel_error(out, os.path.join(tmp, "eager.pt"))
            row["results"][impl] = res
            log(f"  {cfg.name:28s} {impl:12s} {json.dumps(res)}")
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--all", action="store_true", help="also the long configurations (24 layers, S=1024, bf16)")
    p.add_argument("--only", default="", help="run the configurations whose name contains this")
    p.add_argument("--reps", type=int, default=3, help="timed forward calls per implementation")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per process")
    p.add_argument("--readme", action="store_true", help="update docs/benchmarks/models.md and the README's headline row")
    p.add_argument("--no-gemm", action="store_true", help="skip the matmul micro-benchmark")
    p.add_argument("--from-log", default="", help="rebuild the tables from the printed lines of a run")
    args = p.parse_args(argv)
    if args.from_log:
        rows, gemm_rows, host = parse_log(args.from_log)
        return _write(rows, gemm_rows or None, args.readme, host)
    configs = [c for c in DEFAULT + (LONG if args.all else []) if args.only in c.name]
    log = lambda s: print(s, flush=True)  # noqa: E731
    host = hs.describe()
    log(hs.line(host))
    log("host " + json.dumps(host))  # for --from-log
    gemm_rows = None
    if not args.no_gemm:
        from .gemm import run as run_gemm

        gemm_rows = run_gemm(log=log)
    rows = []
    for cfg in configs:
        rows.append(run_config(cfg, args.reps, args.timeout, log))
    rows, gemm_rows = _merged(rows, gemm_rows, host)
    _write(rows, gemm_rows, args.readme, host)


RESULTS = os.path.join(ROOT, "benchmarks", "results", "models.json")


def _merged(rows, gemm_rows, host, path=RESULTS):
    """`rows`, dated now and carrying this host's description, over those
    of earlier runs (benchmarks/results/models.json,
    results_file.merge_rows); of them, those of this host's kind, and the
    matmul rows of the last run on this kind that measured them."""
    order = [c.name for c in DEFAULT + LONG]
    gemm = {}
    if os.path.exists(path):
        with open(path) as f:
            gemm = json.load(f).get("gemm_by_host") or {}
    if gemm_rows:
        gemm[hs.kind(host)] = gemm_rows
    data = merge_rows(path, [dict(r, run=rd.now(), host=host) for r in rows], order, gemm_by_host=gemm)
    return rows_of(data["rows"], hs.kind(host)), gemm.get(hs.kind(host))


def parse_log(path):
    """Rows, gemm rows and the host description from the lines a run
    printed (a run stopped early gives the configurations it finished; a
    log without a host line, None)."""
    import re

    from .configs import DEFAULT, LONG

    names = {c.name: c for c in DEFAULT + LONG}
    rows, gemm_rows, host = {}, [], None
    with open(path) as f:
        for line in f:
            if line.startswith("host {"):
                host = json.loads(line[len("host "):])
                continue
            m = re.match(r"\s+gemm (\S+)\s+(\w+): torch (\d+) ours (\d+) GFLOP/s", line)
            if m:
                t, o = float(m.group(3)), float(m.group(4))
                gemm_rows.append({"shape": m.group(1), "dtype": m.group(2), "torch": t, "ours": o,
                                  "ratio": o / t})
                continue
            m = re.match(r"\s+(.+?)\s+(eager|inductor|ours-cached|ours|interleaved)\s+(\{.*\})\s*$", line)
            if m and m.group(1) in names:
                cfg = names[m.group(1)]
                row = rows.setdefault(cfg.name, {"config": cfg.name, "gflop": matmul_gflop(cfg), "results": {}})
                row["results"][m.group(2)] = json.loads(m.group(3))
    return list(rows.values()), gemm_rows, host


def _write(rows, gemm_rows, readme, host, root=ROOT):
    """Prints the tables, writes them to benchmarks/results/models.md under
    `root` and, with `readme`, to docs/benchmarks/models.md and the README's
    headline row there, for the kind of `host`."""
    text = markdown(rows, host, gemm_rows)
    print(text)
    os.makedirs(os.path.join(root, "benchmarks", "results"), exist_ok=True)
    with open(os.path.join(root, "benchmarks", "results", "models.md"), "w") as f:
        f.write(text)
    if readme:
        update_readme(text, rows, host, os.path.join(root, "README.md"))


if __name__ == "__main__":
    main()
