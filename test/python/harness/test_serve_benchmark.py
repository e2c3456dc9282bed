"""The serving benchmark's child end to end on the tiny Llama for ours
(a real model.generate through torch.compile(backend="torch_mlir_flex")),
and the table built from results. No timing assertions.

    PYTHONPATH=python pytest -q test/python/harness/test_serve_benchmark.py
"""

import json
import os
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks.serve import __main__ as serve  # noqa: E402
from benchmarks.serve.configs import ServeConfig  # noqa: E402


def test_child_reports_a_compiled_generate(tmp_path):
    cfg = ServeConfig("tiny", "f32", 1, 16, new_tokens=4)
    r = serve.run_child(cfg, "ours", 1, str(tmp_path), timeout=900)
    assert "error" not in r, r
    assert r["graphs"].get("eager", 0) == 0 and r["graphs"]["compiled"] >= 1, r["graphs"]
    assert len(r["tokens"][0]) == 4 and r["ms_per_token"] > 0 and r["bytes_per_token"] > 0


def test_table_marks_errors_and_token_agreement(zen1):
    ok = dict(first_s=1.0, ttft_ms=2.0, ms_per_token=1.0, bytes_per_token=10**6, tokens=[[5, 6]])
    rows = [{"config": "tiny", "bandwidth": 10.0, "results": {
        "eager": {"error": "RuntimeError: no"},
        "inductor": dict(ok, ms_per_token=2.0),
        "ours": ok,
        "ours-static": dict(ok, tokens=[[5, 7]]),
        "ours-api": dict(ok, ms_per_token=0.5, first_s=0.5),
    }}]
    table = serve.markdown(rows, zen1)
    lines = {l.split("|")[2].strip(): l for l in table.splitlines() if l.startswith("| tiny")}
    assert "| 0.50 |" in lines["ours"] and lines["ours"].rstrip().endswith("| yes |")
    assert lines["ours-static"].rstrip().endswith("| no |")
    assert "error" in lines["eager"] and "RuntimeError: no" in table
    # 1 MB per token at 1 ms/token over 10 GB/s: 10 % of the limit.
    assert "| 10 |" in lines["ours"]
    json.dumps(rows)


def test_targets_from_rows():
    """The issue's targets evaluated on a row: ratios to inductor, eager graphs."""
    from benchmarks.readme import format_targets
    from benchmarks.serve.targets import evaluate

    ok = dict(first_s=1.0, ttft_ms=2.0, ms_per_token=1.0, bytes_per_token=10**6, tokens=[[5, 6]])
    rows = [{"config": "tiny f32 B=1 P=128", "bandwidth": 10.0, "results": {
        "inductor": dict(ok, ms_per_token=2.0, first_s=4.0),
        "ours": dict(ok, graphs={"eager": 0, "compiled": 3}),
        "ours-api": dict(ok, ms_per_token=0.5),
    }}, {"config": "qwen2 L=24 f32 B=1 P=128", "bandwidth": 10.0, "results": {
        "ours-api-cached": dict(ok, first_s=2.5),
    }}]
    found = {name: value for name, _, _, value, _ in evaluate(rows)}
    assert found["decode ms/token, ours-api / inductor (tiny Llama)"] == 0.25
    assert found["decode ms/token, ours-api / inductor (0.5B shape)"] is None
    assert found["model.generate + torch.compile(backend=ours): graphs run in eager"] == 0.0
    assert found["model.generate + torch.compile(backend=ours): ms/token / inductor's"] == 0.5
    assert found["first token in a new process, empty cache: ours-api / inductor"] == 0.25
    assert found["first token in a new process, with the disk cache (0.5B shape), s"] == 2.5
    table = format_targets(evaluate(rows))
    assert table.count("| pass |") == 5 and table.count("| not run |") == 2


def test_rows_accumulate_in_the_results_file(tmp_path):
    """A configuration run again replaces its row; the others stay, in the
    configurations' order; a None field keeps the saved one."""
    from benchmarks.results_file import merge_rows

    path = str(tmp_path / "r.json")
    merge_rows(path, [{"config": "b", "v": 1}, {"config": "a", "v": 1}], ["a", "b"], gemm=[1])
    data = merge_rows(path, [{"config": "b", "v": 2}, {"config": "z", "v": 2}], ["a", "b"], gemm=None)
    assert data == {"rows": [{"config": "a", "v": 1}, {"config": "b", "v": 2}, {"config": "z", "v": 2}],
                    "gemm": [1]}
    assert json.load(open(path)) == data


def test_faster_process_keeps_the_cold_first_generate():
    """With two processes per implementation the row keeps the faster
    one's warm times and the first one's cold first generate; an error
    in either process keeps the first result."""
    first = dict(first_s=9.0, ttft_ms=3.0, ms_per_token=2.0, copy_gbs=30.0, bandwidth_pct=5.0, tokens=[[1]])
    later = dict(first_s=1.0, ttft_ms=2.5, ms_per_token=1.5, copy_gbs=31.0, bandwidth_pct=6.0, tokens=[[1]])
    got = serve.faster(first, later)
    assert got["first_s"] == 9.0 and got["ms_per_token"] == 1.5 and got["ttft_ms"] == 2.5
    assert got["rounds_ms"] == [2.0, 1.5]
    slower = serve.faster(first, dict(later, ms_per_token=2.5))
    assert slower["ms_per_token"] == 2.0 and slower["rounds_ms"] == [2.0, 2.5]
    assert serve.faster(first, {"error": "boom"}) is first
    assert serve.faster({"error": "x"}, later) == {"error": "x"}
