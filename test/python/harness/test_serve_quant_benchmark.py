"""The quantized serving benchmark (`python -m benchmarks.serve --quant`,
benchmarks/serve_quant.py): the harness end to end on the tiny Llama
(eager and ours in their own processes, the table, the targets and the
README writers on copies), the bytes a decode step reads counted from
torchao's tensors, and the targets and headline from made-up rows. No
timing assertions; an engine that fails is a row with its error.

    PYTHONPATH=python pytest -q test/python/harness/test_serve_quant_benchmark.py
"""

import os
import shutil
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchao")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, ROOT)
from benchmarks import serve_quant as sq  # noqa: E402
from benchmarks.quant_models import QuantServeConfig, build, bytes_per_token  # noqa: E402

OK = dict(first_s=1.0, ttft_ms=100.0, ms_per_token=10.0, bytes_per_token=4 * 10**8, bandwidth_pct=85.0,
          tokens=[[5, 6]])


def test_bytes_per_token_count_the_quantized_tensors():
    """int8: one byte a weight plus an f32 scale per output row; int4 g32:
    half a byte a weight plus an f32 (scale, zero) pair per group of 32;
    the float embedding table read for the batch's rows only."""
    for quant, per_weight in (("int8", 1.0), ("int4", 0.5 + 8 / 32)):
        cfg = QuantServeConfig("tiny", quant, batch=2, prompt=16, new_tokens=4)
        model, ids, mask = build(cfg)
        assert ids.shape == (2, 16) and mask[1, :4].sum() == 0
        got = bytes_per_token(model, cfg)
        h, f, L, v = 128, 256, 2, 256  # tiny Llama: hidden, MLP, layers, vocab
        linears = L * (h * h * 2 + h * 64 * 2 + 3 * h * f) + v * h
        rows = L * (h + 64 * 2 + h + 2 * f + h) + v  # output rows (int8: one scale each)
        scales = 4 * rows if quant == "int8" else 0
        norms = 4 * (2 * L * h + h)
        emb = 2 * h * 4  # two rows of the f32 table
        inv_freq = 2 * 4 * 16  # the rotary embedding's inv_freq and original_inv_freq buffers
        assert got["weights"] == int(linears * per_weight) + scales + norms + emb + inv_freq, got
        assert got["kv"] == 2 * L * 2 * 32 * (16 + 2) * 2 * 4


def _row(config, **res):
    return {"config": config, "results": res, "run": "2026-12-06 23:00", "host": None}


def test_targets_and_headline_from_rows():
    rows = [_row("qwen2-0.5b int8 f32 B=1 P=128", ours=OK, inductor=dict(OK, ms_per_token=40.0),
                 eager=dict(OK, ms_per_token=50.0), **{"llama.cpp Q8_0": dict(OK, ms_per_token=12.5,
                                                                                ttft_ms=200.0)}),
            _row("qwen2-0.5b int4 g32 f32 B=1 P=128", ours=dict(OK, bandwidth_pct=70.0),
                 inductor={"error": "boom"}, **{"llama.cpp Q4_0": dict(OK, ms_per_token=8.0)}),
            _row("qwen2-0.5b int8 f32 B=4 P=128", ours=dict(OK, ms_per_token=30.0),
                 inductor=dict(OK, ms_per_token=40.0)),
            _row("tiny int8 f32 B=1 P=16", ours=dict(OK, bandwidth_pct=1.0))]
    found = {name: (value, where) for name, _, _, value, where in sq.evaluate(rows)}
    assert found[sq.TARGETS[0][0]] == (70.0, "qwen2-0.5b int4 g32 f32 B=1 P=128")  # tiny rows not counted
    assert found[sq.TARGETS[1][0]][0] == 0.75  # the worst ratio: B=4
    assert found[sq.TARGETS[2][0]] == (1.25, "qwen2-0.5b int4 g32 f32 B=1 P=128 vs llama.cpp Q4_0")
    assert found[sq.TARGETS[3][0]] == (1.0, "qwen2-0.5b int4 g32 f32 B=1 P=128 vs llama.cpp Q4_0")
    row = sq.headline(rows)  # int4 first: no eager or inductor time to compare with
    assert "(docs/benchmarks/serving.md#quantized-models)" in row and "Qwen2-0.5B shape int4 g32 B=1" in row
    assert "| 10.0 ms/token | — | — | — |" in row
    row = sq.headline([rows[0]])
    assert "Qwen2-0.5B shape int8 B=1" in row and "| 10.0 ms/token | 0.20 | 0.25 | — |" in row
    table = sq.markdown(rows, None)
    assert "| qwen2-0.5b int4 g32 f32 B=1 P=128 | inductor | error |" in table and "| | | boom |" in table
    assert "| qwen2-0.5b int8 f32 B=1 P=128 | ours | 400 | 100.0 | 10.00 | 0.25 | 85 | yes |" in table


def test_llama_cpp_rows_not_run_say_why(tmp_path):
    """llama.cpp (optional) at batch 4, or not installed: a "not run" row
    with the reason, never an exception."""
    from benchmarks.llama_cpp_peer import available

    cfg = QuantServeConfig("tiny", "int4", batch=4, prompt=16, new_tokens=8)
    assert sq.peer_names(cfg) == ["llama.cpp Q4_0", "llama.cpp Q4_0-emb4"]
    r = sq.run_engine(cfg, "llama.cpp Q4_0", 1, str(tmp_path), 60, str(tmp_path))
    assert r["error"].startswith("not run: ")
    assert ("batch 1" in r["error"]) == (available() == "")


def test_a_run_of_some_engines_keeps_the_others(tmp_path):
    """`--impls llama.cpp` after a run of the others: the row has both, in
    the table's order, each with its own run time."""
    import json

    path = str(tmp_path / "r.json")
    first = dict(_row("qwen2-0.5b int8 f32 B=1 P=128", eager=OK, ours=OK), run="t1")
    rows = sq.keep_other_engines(path, [first])
    assert list(rows[0]["results"]) == ["ours", "eager"] and rows[0]["results"]["ours"]["run"] == "t1"
    with open(path, "w") as f:
        json.dump({"rows": rows}, f)
    later = dict(_row("qwen2-0.5b int8 f32 B=1 P=128", **{"llama.cpp Q8_0": OK}), run="t2")
    res = sq.keep_other_engines(path, [later])[0]["results"]
    assert list(res) == ["ours", "eager", "llama.cpp Q8_0"]
    assert res["eager"]["run"] == "t1" and res["llama.cpp Q8_0"]["run"] == "t2"


def _copies(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(os.path.join(ROOT, "README.md"), readme)
    (tmp_path / "docs" / "benchmarks").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "docs", "benchmarks", "serving.md"), tmp_path / "docs" / "benchmarks")
    return readme, tmp_path / "docs" / "benchmarks" / "serving.md"


def test_report_only_writes_the_page_and_headline_from_saved_rows(tmp_path):
    """--report-only --readme: nothing runs; this host kind's saved rows
    make the section (twice: replaced, not appended) and the headline row,
    the serving benchmark's own row kept."""
    import json

    from benchmarks import host as hs

    readme, page = _copies(tmp_path)
    host = dict(hs.describe(measure=False), copy_gbs=30.0)
    row = dict(_row("qwen2-0.5b int8 f32 B=1 P=128", ours=OK, inductor=dict(OK, ms_per_token=40.0)), host=host)
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"rows": [row]}))
    before = readme.read_text().count("(docs/benchmarks/serving.md)")
    for _ in range(2):
        sq.main(["--quant", "--report-only", "--readme"], results=str(results),
                table_path=str(tmp_path / "t.md"), readme=str(readme))
    text = page.read_text()
    assert text.count("## Quantized models") == 1 and text.count("| qwen2-0.5b int8 f32 B=1 P=128 | ours |") == 1
    section = text[text.index("## Quantized models"):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section else section  # up to the next section
    assert "copy 30.0 GB/s" in section and section.count("| pass |") == 2  # bandwidth, inductor
    assert section.count("| not run |") == 2  # llama.cpp
    lines = [l for l in readme.read_text().splitlines() if "#quantized-models)" in l]
    assert len(lines) == 1 and "Qwen2-0.5B shape int8 B=1" in lines[0] and "| 0.25 |" in lines[0]
    assert readme.read_text().count("(docs/benchmarks/serving.md)") == before


def test_quick_run_end_to_end(tmp_path):
    """One tiny configuration, eager and ours, through the CLI's main: the
    rows, the results file, the table and the README writers (on copies).
    Ours' row is a result or an error row, never a crash."""
    readme, _ = _copies(tmp_path)
    name = sq.QUICK[0].name
    rows = sq.main(["--quant", "--only", name, "--impls", "eager,ours", "--reps", "1", "--no-measure-host",
                    "--readme"], results=str(tmp_path / "r.json"), table_path=str(tmp_path / "t.md"),
                   readme=str(readme))
    res = {r["config"]: r for r in rows}[name]["results"]
    assert set(res) == {"eager", "ours"}
    assert "error" not in res["eager"], res["eager"]
    assert res["eager"]["ms_per_token"] > 0 and len(res["eager"]["tokens"][0]) == sq.QUICK[0].new_tokens
    assert "error" in res["ours"] or res["ours"]["ms_per_token"] > 0
    page = (tmp_path / "docs" / "benchmarks" / "serving.md").read_text()
    assert page.count("## Quantized models") == 1 and f"| {name} | eager |" in page
    assert "## Results" in page and "## Notes" in page  # the other sections kept
    assert (tmp_path / "t.md").read_text().count("| not run |") == 4  # tiny rows: not the targets
    if "error" in res["ours"]:
        assert "#quantized-models" not in readme.read_text()
    else:
        assert "(docs/benchmarks/serving.md#quantized-models)" in readme.read_text()
