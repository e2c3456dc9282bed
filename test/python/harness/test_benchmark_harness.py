"""Smoke test of the benchmark harness (benchmarks/): one tiny configuration
end to end through the CLI (benchmarks.run.main), the report built from
it, the targets evaluation and the `--readme` rewrite (docs/benchmarks/
attention.md and the README's headline row). No timing assertions.

    PYTHONPATH=python pytest -q test/python/harness/test_benchmark_harness.py
"""

import importlib.util
import json
import re
import os
import sys

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import cases, readme, report, run  # noqa: E402
from benchmarks import host as hs  # noqa: E402
from benchmarks import targets as tg  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The CLI on one tiny configuration: document mask (runtime ids), f32,
    S=64, D=16, H=8; ours, torch.compile, SDPA."""
    out = tmp_path_factory.mktemp("bench")
    assert run.main(["--cases", "document", "--sizes", "64", "--heads-dims", "16", "--dtypes", "f32",
                     "--mem-size", "0", "--no-target-extras", "--peak-n", "256", "--budget", "0",
                     "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def document_row(run_dir):
    data = json.loads((run_dir / "results.json").read_text())
    assert len(data["rows"]) == 1 and set(data["peaks"]) == {"f32"}
    return data["rows"][0]


def test_cli_writes_the_report(run_dir):
    md = (run_dir / "results.md").read_text()
    assert "| document | f32 | 64 | 16 | 64×64 |" in md
    assert "## Compile time" in md and "## Targets (issue #11)" in md and "## Failures" not in md
    # the run described this host, kept it in results.json, named it above each of the three tables
    host = json.loads((run_dir / "results.json").read_text())["host"]
    assert host["kind"] == hs.describe(measure=False)["kind"] and host["f32_gflops"] > 0 and host["copy_gbs"] > 0
    assert md.count(hs.line(host) + "\n\n|") == 3
    # the process's one-time set-up is timed apart from the per-op compiles
    assert re.search(r"first compile of the process .*: \d+\.\d+ s \(export ", md)
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert (run_dir / "results.png").exists() == has_matplotlib


def test_row_measures_every_implementation(document_row):
    r = document_row
    assert r["errors"] == {}
    assert set(r["time"]) == {"ours", "torch.compile", "SDPA"}
    assert all(t > 0 for t in r["time"].values())
    assert set(r["mem"]) == set(r["time"])
    assert r["reference"] == "torch.compile" and r["ok"] is True
    assert r["max_abs_diff"] < 1e-4
    assert r["compile_s"]["ours"] > 0
    assert set(report.STAGES) <= set(r["stages"]["ours"])
    doc = cases.document_ids(64)
    m, n = torch.arange(64).view(-1, 1), torch.arange(64).view(1, -1)
    assert r["kept"] == int(((doc[m] == doc[n]) & (m >= n)).sum())
    assert r["flops"] == 4.0 * 16 * 8 * r["kept"]


OLD_ROW = "| [attention](docs/benchmarks/attention.md) | old | old | old | old | old | old |"
HEADLINE = (f"top\n{readme.HEADLINE_BEGIN}\n{readme.KIND_HEAD}K\n\n{readme.HEADLINE_HEADER}\n{OLD_ROW}\n"
            "| [serving](docs/benchmarks/serving.md) | kept | kept | kept | kept | kept | kept |\n"
            f"{readme.HEADLINE_END}\nbottom\n")


def test_report_and_readme_from_json(document_row, tmp_path, zen1):
    """--readme: the run's host kind's subsection of the page's marked
    table, the full tables beside it (dated), the attention row of the
    README's headline table in the host kind's row set; nothing else moves."""
    data = dict(rows=[document_row], peaks={"f32": 100.0}, overhead=None, dtypes="f32", host=zen1,
                meta=["2026-12-06 10:00 UTC; torch x; torch threads 2"])
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(data))
    readme_path = tmp_path / "README.md"
    readme_path.write_text(HEADLINE)
    page = tmp_path / "docs" / "benchmarks" / "attention.md"
    page.parent.mkdir(parents=True)
    page.write_text(f"intro\n{report.README_BEGIN}\n{readme.KIND_HEAD}K\n\nold\n{report.README_END}\noutro\n")
    assert run.main(["--from-json", str(saved), "--out", str(tmp_path / "out"),
                     "--readme", str(readme_path)]) == 0
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| document | f32 | 64 | 16 | 64×64 |" in md
    assert "ours / torch.compile" in md and "## Targets (issue #11)" in md
    assert md.count("| not run |") == len(tg.evaluate([document_row])) - 4
    text = page.read_text()
    assert text.startswith(f"intro\n{report.README_BEGIN}\n{readme.KIND_HEAD}K\n\nold\n\n")
    assert text.endswith("outro\n")
    mine = readme.kind_section(text, zen1["kind"])
    assert mine.startswith(hs.line(zen1) + "\n\nS=64, D=16") and "| document | f32 |" in mine
    full = list(page.parent.glob("attention-*.md"))
    assert len(full) == 1 and full[0].read_text() == md and f"]({full[0].name})" in text
    # no causal f32 row ran: the headline row is the first case at the table's shape
    t = document_row["time"]
    want = (f"| [attention](docs/benchmarks/attention.md) | document f32, S=64 D=16, forward | "
            f"{t['ours'] * 1e3:.1f} ms | — | {readme.ratio(t['ours'], t['torch.compile'])} | "
            f"{readme.ratio(t['ours'], t['SDPA'])} | 2 cores (load 1.0), GEMM f32 49 GFLOP/s, copy 16.0 GB/s; 2026-12-06 10:00 UTC |")
    # a new host kind: its own row set after K's, which stays
    assert readme_path.read_text() == HEADLINE.replace(
        readme.HEADLINE_END, f"\n{readme.KIND_HEAD}{zen1['kind']}\n\n{readme.HEADLINE_HEADER}\n{want}\n"
        + readme.HEADLINE_END)


def test_page_without_markers_is_an_error(tmp_path):
    path = tmp_path / "attention.md"
    path.write_text("no markers\n")
    with pytest.raises(ValueError, match="no benchmark markers"):
        report.update_page(str(path), "table", "K")


def _row(case, dtype, S, D, ours, peer, sdpa=None, **kw):
    time = {"ours": ours, "torch.compile": peer}
    if sdpa:
        time["SDPA"] = sdpa
    return dict(case=case, dtype=dtype, S=S, D=D, flops=1e9, time=time, **kw)


def test_targets_pass_fail_and_not_run():
    rows = [_row("causal", "f32", 2048, 128, 1.0, 4.0, sdpa=1.0, compile_s={"ours": 0.5}),
            _row("causal", "bf16", 2048, 128, 0.6, 1.0, compile_s={"ours": 1.5},
                 stages={"ours": {"export": 0.9, "import": 0.3, "lower+jit": 0.2}}),
            _row("decode", "f32", 1024, 64, 0.7, 1.0)]
    got = {t.name: t for t in tg.evaluate(rows, memory_dtypes=("f32",))}
    every = got["ours / torch.compile, every case"]
    assert (every.measured, every.where, every.passed) == (0.7, "decode f32 S=1024 D=64", True)
    assert got["causal f32 S=1024..4096: ours / torch.compile"].passed is True
    assert got["causal bf16 S=1024..4096: ours / torch.compile"].passed is False
    assert got["causal f32: ours / SDPA"].passed is False  # 1.0 > 0.9
    assert got["causal bf16: ours / SDPA"].passed is None
    assert got["causal S=2048 D=128: ours bf16 GFLOP/s / ours f32 GFLOP/s"].measured == pytest.approx(1 / 0.6)
    assert got["compile time per op, s (torch_mlir_flex.compile, cache off)"].passed is False
    assert got["compile time per op without torch.export, s (our stages)"].measured == pytest.approx(0.5)
    assert got["causal S=8192 f32: ours peak extra memory, MiB"].passed is None


def test_decode_gqa_heads_work_and_target():
    """decode_gqa: GQA_GROUP * H query heads over H kv heads, one query row;
    the work and SDPA count the query heads; it feeds the decode target."""
    inst = cases.instance(cases.Config("decode_gqa", torch.float32, 64, 16, H=2))
    q, k, v = inst.args
    G = cases.GQA_GROUP
    assert q.shape == (1, 2 * G, 1, 16) and k.shape == v.shape == (1, 2, 64, 16)
    assert (inst.M, inst.Hq, inst.Hkv, inst.kept) == (1, 2 * G, 2, 64)
    assert cases.flops(inst) == 4.0 * 16 * 2 * G * 64
    ref = inst.module(q, k, v)
    torch.testing.assert_close(inst.sdpa(), ref, rtol=1e-4, atol=1e-5)
    rows = [_row("decode", "f32", 1024, 64, 0.5, 1.0), _row("decode_gqa", "f32", 1024, 64, 0.9, 1.0)]
    got = {t.name: t for t in tg.evaluate(rows)}["decode: ours / torch.compile"]
    assert (got.measured, got.where, got.passed) == (0.9, "decode_gqa f32 S=1024 D=64", False)


def test_default_grid_covers_every_target():
    configs = {(c.case, str(c.dtype), c.S, c.D, p) for c, p in run.configurations(run.parse_args([]))}
    for dt in ("torch.float32", "torch.bfloat16"):
        assert ("document", dt, 4096, 256, "speed") in configs
        assert ("causal", dt, 2048, 128, "speed") in configs
        assert ("causal", dt, 8192, 64, "memory") in configs
        for case in cases.CASES:
            assert {(case, dt, S, D, "speed") for S in (1024, 4096) for D in (64, 128, 256)} <= configs


def test_failures_are_reported_and_set_the_exit_status(document_row, tmp_path):
    bad = dict(document_row, ok=False, errors={"SDPA": "run: RuntimeError: boom"})
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(dict(rows=[bad], peaks={}, overhead=None, dtypes="f32", meta=["m"])))
    assert run.main(["--from-json", str(saved), "--out", str(tmp_path)]) == 1
    md = (tmp_path / "results.md").read_text()
    assert "## Failures" in md and "SDPA: run: RuntimeError: boom" in md
    assert "ours differs from torch.compile" in md and "FAIL |" in md


def test_unknown_names_are_usage_errors():
    for flag in ("--dtypes", "--peers", "--cases"):
        with pytest.raises(SystemExit):
            run.parse_args([flag, "nonsense"])
