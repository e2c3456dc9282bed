"""The concurrent-serving benchmark (`python -m benchmarks.serve
--concurrent`, benchmarks/serve/concurrent.py and concurrent_child.py):
the request stream and its Poisson arrivals, the metrics computed from
recorded times (percentiles, tokens/s, TTFT, ITL), the stream driver run
in-process on the tiny Llama through transformers' continuous batching
without compile (the concurrency cap, tokens equal per-request greedy
generation), and the tables, targets, headline and page writer from saved
rows. No timing assertions.

    PYTHONPATH=python pytest -q test/python/harness/test_serve_concurrent_benchmark.py
"""

import json
import math
import os
import shutil
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, ROOT)
from benchmarks import readme as rd  # noqa: E402
from benchmarks.serve import concurrent as cc  # noqa: E402
from benchmarks.serve import concurrent_child as ch  # noqa: E402


def test_stream_is_fixed_and_arrivals_are_scaled_gaps():
    spec = ch.StreamSpec(20, 8, 64, 4, 16, min_requests=4, seed=3)
    a, b = ch.make_stream(spec, 256), ch.make_stream(spec, 256)
    assert a == b and len(a) == 20
    assert all(8 <= len(r["prompt"]) <= 64 and 4 <= r["max_new_tokens"] <= 16 for r in a)
    assert all(3 <= t < 256 for r in a for t in r["prompt"])
    assert ch.make_stream(ch.StreamSpec(20, 8, 64, 4, 16, seed=4), 256) != a
    slow, fast = ch.arrivals(a, 1.0), ch.arrivals(a, 4.0)
    assert slow[0] == 0.0 and all(x < y for x, y in zip(slow, slow[1:]))
    assert all(math.isclose(s, 4 * f) for s, f in zip(slow, fast))  # the same gaps, divided by the rate
    assert math.isclose(slow[2], a[0]["gap"] + a[1]["gap"])
    assert ch.arrivals(a, math.inf) == [0.0] * 20
    assert [spec.requests_at(c) for c in (1, 4, 16)] == [4, 8, 20]


def test_percentile_matches_linear_interpolation():
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0]
    assert ch.percentile(values, 50) == 3.5
    assert ch.percentile(values, 0) == 1.0 and ch.percentile(values, 100) == 10.0
    assert math.isclose(ch.percentile(values, 99), 5.0 + 0.95 * 5.0)  # pos 4.95 between 5 and 10
    assert ch.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        ch.percentile([], 50)


def test_metrics_from_recorded_times():
    """Two requests: tokens/s over first submission -> last token, TTFT from
    submission, ITL pooled over both requests' gaps, queue wait."""
    records = [dict(arrival=0.0, submit=0.0, times=[0.1, 0.2, 0.3], tokens=[1, 2, 3]),
               dict(arrival=0.05, submit=0.25, times=[0.45, 0.5], tokens=[4, 5])]
    m = ch.metrics(records)
    assert m["requests"] == 2 and m["output_tokens"] == 5
    assert math.isclose(m["duration_s"], 0.5) and math.isclose(m["tokens_per_s"], 10.0)
    assert math.isclose(m["requests_per_s"], 4.0)
    assert math.isclose(m["ttft_p50_ms"], 150.0) and math.isclose(m["ttft_p99_ms"], 100 + 0.99 * 100)
    # gaps: 100, 100, 50 ms
    assert math.isclose(m["itl_p50_ms"], 100.0) and math.isclose(m["itl_p99_ms"], 100.0)
    assert math.isclose(m["queue_p50_ms"], 100.0)
    one_token = ch.metrics([dict(arrival=0.0, submit=0.0, times=[0.2], tokens=[9])])
    assert "itl_p50_ms" not in one_token and math.isclose(one_token["tokens_per_s"], 5.0)


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("transformers")
    from benchmarks.serve.configs import ServeConfig, build

    model, _, _ = build(ServeConfig("tiny", "f32", 1, 16))
    model.set_attn_implementation("sdpa")
    return model


def test_driver_serves_the_stream_under_the_cap(tiny):
    """The driver on a running manager (no compile): at 1 in flight no two
    requests overlap; every request gets its max_new_tokens tokens, equal
    to its own greedy generation; the metrics are those of the records."""
    import torch

    stream = ch.make_stream(ch.StreamSpec(6, 4, 24, 2, 6, seed=1), tiny.config.vocab_size)
    with torch.no_grad():
        manager = tiny.init_continuous_batching(
            generation_config=_gen(), continuous_batching_config=ch.cb_config("eager", 40, 3, 16, 64))
        manager.start()
        try:
            one = ch.drive(manager, stream, math.inf, 1, timeout=120)
            three = ch.drive(manager, stream, 200.0, 3, timeout=120)
        finally:
            manager.stop(block=True, timeout=30)
    tiny.set_attn_implementation("sdpa")
    want = ch.greedy_tokens(tiny, stream)
    for records in (one, three):
        assert [r["tokens"] for r in records] == want
        assert [len(r["times"]) for r in records] == [r["max_new_tokens"] for r in stream]
        assert all(r["arrival"] <= r["submit"] < r["times"][0] <= r["times"][-1] <= r["done"] for r in records)
    by_submit = sorted(one, key=lambda r: r["submit"])
    assert all(a["times"][-1] <= b["submit"] for a, b in zip(by_submit, by_submit[1:]))
    m = ch.metrics(three)
    assert m["output_tokens"] == sum(r["max_new_tokens"] for r in stream) and m["tokens_per_s"] > 0


def _gen():
    from transformers import GenerationConfig

    return GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=-1, pad_token_id=0)


def test_serve_runs_the_points_and_counts_compilations(tiny, fresh):
    """`serve` (the child's loop) without compile: one point per
    (concurrency, rate), each serving `requests_at` requests; no graph
    (Dynamo's counters cleared first: other tests of the process compile)."""
    stream = ch.make_stream(ch.StreamSpec(5, 4, 16, 2, 4, seed=2), tiny.config.vocab_size)
    res = ch.serve(tiny, "eager", stream, [1, 2], [math.inf, 100.0], requests_at=lambda c: 2 + c,
                   page_size=16, max_batch_tokens=64, timeout=120)
    assert [(p["concurrency"], p["rate"], p["requests"]) for p in res["points"]] == [
        (1, "inf", 3), (1, 100.0, 3), (2, "inf", 4), (2, 100.0, 4)]
    assert res["compiles_total"]["dynamo_graphs"] == 0 and res["warmup_s"] > 0
    assert list(res["tokens"]) == ["1@inf", "1@100.0", "2@inf", "2@100.0"]


def _point(c, rate, tps, itl99=5.0):
    return dict(concurrency=c, rate=rate, requests=8, output_tokens=100, duration_s=1.0, tokens_per_s=tps,
                requests_per_s=tps / 12.5, ttft_p50_ms=20.0, ttft_p99_ms=40.0, queue_p50_ms=0.0, itl_p50_ms=2.0,
                itl_p99_ms=itl99)


def _impl(points, graphs=2, eager=0, differ=()):
    return dict(points=points, warmup_s=3.0, compiles_warmup=dict(dynamo_graphs=graphs),
                compiles_total=dict(dynamo_graphs=graphs + 1, eager=eager, compiled=graphs + 1),
                tokens_checked=8, tokens_differ=list(differ))


def _rows(host="Zen 5 test"):
    q = dict(config="qwen2 L=24 f32", run="2026-12-07 02:00", host=host, single=dict(ms_per_token=50.0),
             results=dict(ours=_impl([_point(1, "inf", 18.0), _point(16, 4.0, 100.0), _point(16, "inf", 150.0, 80.0),
                                      _point(64, "inf", 400.0)]),
                          inductor=_impl([_point(16, "inf", 50.0)], graphs=6),
                          eager=_impl([_point(16, "inf", 30.0)], differ=[3]),
                          **{"llama.cpp": {"error": "not run: no llama-server"}}))
    t = dict(config="tiny f32 quick", run="2026-12-07 02:00", host=host, single={"error": "boom"},
             results=dict(ours=dict(_impl([_point(1, 8.0, 10.0), _point(4, "inf", 40.0)], eager=1, differ=[0]),
                                    padding=[8, 0])))
    return [t, q]


def test_targets_from_rows():
    """The 0.5B f32 row's 16-in-flight point at its highest rate; the tiny
    quick row only when no 0.5B row exists (its largest point, 4)."""
    found = {name: (value, where) for name, _, _, value, where in cc.evaluate(_rows())}
    t = [name for name, _, _ in cc.TARGETS]
    assert found[t[0]] == (150.0 * 50.0 / 1e3, "qwen2 L=24 f32, 16 in flight, rate inf")  # 7.5x single stream
    assert found[t[1]][0] == 3.0 and found[t[2]] == (None, "")  # llama.cpp not run
    assert found[t[3]][0] == 80.0 / 50.0
    assert found[t[4]] == (0.0, "qwen2 L=24 f32") and found[t[5]] == (3.0, "qwen2 L=24 f32")
    assert found[t[6]] == (0.0, "qwen2 L=24 f32")
    verdicts = rd.format_targets(cc.evaluate(_rows()))
    assert verdicts.count("| pass |") == 6 and verdicts.count("| not run |") == 1
    quick = {name: (value, where) for name, _, _, value, where in cc.evaluate(_rows()[:1])}
    assert quick[t[0]] == (None, "") and quick[t[1]] == (None, "")  # no single stream, no inductor
    assert quick[t[4]][0] == 1.0 and quick[t[6]][0] == 1.0
    assert "FAIL" in rd.format_targets(cc.evaluate(_rows()[:1]))


def test_tables_headline_and_page_from_saved_json(tmp_path):
    """The tables from a saved JSON; the page section written twice
    (replaced, not appended; its hand-written text and the other sections
    kept) and the README's headline row, on copies."""
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps({"rows": _rows()}))
    rows = json.loads(saved.read_text())["rows"]
    table = cc.markdown(rows, None)
    assert "| qwen2 L=24 f32 | ours | 16 | inf | 8 | 150.0 | 12.00 | 20.0 | 40.0 | 2.00 | 80.00 |" in table
    assert "| qwen2 L=24 f32 | llama.cpp | not run: no llama-server |" in table
    assert "| qwen2 L=24 f32 | inductor | 64 / 16384 | 3.0 | 7 | 1 | – | yes (8 requests) |" in table
    assert "| qwen2 L=24 f32 | eager | – | 3.0 | 3 | 1 | – | no: requests [3] of 8 |" in table
    assert "| tiny f32 quick | ours | 8 / 16384 | 3.0 | 3 | 1 | 1 (0 calls) | no: requests [0] of 8 |" in table
    assert "qwen2 L=24 f32: 50.00 ms/token" in table
    row = cc.headline(rows)
    assert "(docs/benchmarks/serving.md#concurrent-serving)" in row
    assert "| Qwen2-0.5B shape f32, 16 in flight (generate_batch) | 150 output tok/s | 0.20 | 0.33 | — |" in row
    readme = tmp_path / "README.md"
    shutil.copy(os.path.join(ROOT, "README.md"), readme)
    (tmp_path / "docs" / "benchmarks").mkdir(parents=True)
    page = tmp_path / "docs" / "benchmarks" / "serving.md"
    shutil.copy(os.path.join(ROOT, "docs", "benchmarks", "serving.md"), page)
    before = page.read_text()
    for _ in range(2):
        cc.write_readme(rows, table, {"kind": "Zen 5 test"}, str(readme))
    text = page.read_text()
    assert text.count(cc.SECTION) == 1 and text.count("### Host: Zen 5 test") == 1
    assert text.count("| qwen2 L=24 f32 | ours | 16 | inf |") == 1
    assert "## Results" in text and "## Quantized models" in text
    if cc.SECTION in before:  # the section's hand-written text, before the host subsections, stays
        intro = before[before.index(cc.SECTION):].split("### Host:")[0]
        assert intro in text
    lines = [l for l in readme.read_text().splitlines() if "#concurrent-serving)" in l]
    assert len(lines) == 1 and "150 output tok/s" in lines[0]


def test_keep_other_impls_and_the_cli_refuses_unknown_names(tmp_path):
    path = tmp_path / "r.json"
    rows = _rows()
    path.write_text(json.dumps({"rows": rows}))
    later = dict(rows[1], results={"eager": _impl([_point(16, "inf", 35.0)])}, single={"error": "skipped"})
    merged = cc.keep_other_impls(str(path), [later])[0]
    assert list(merged["results"]) == ["ours", "inductor", "eager", "llama.cpp"]
    assert merged["results"]["eager"]["points"][0]["tokens_per_s"] == 35.0 and merged["single"]["ms_per_token"] == 50
    with pytest.raises(SystemExit):
        cc.main(["--concurrent", "--impls", "ours,vllm", "--no-measure-host"], results=str(path))
    with pytest.raises(SystemExit):
        cc.main(["--concurrent", "--rates", "0", "--no-measure-host"], results=str(path))


def test_llama_cpp_row_says_why_it_did_not_run(monkeypatch):
    """llama.cpp (optional, dev venv only) where llama_cpp cannot run: a
    "not run" row with the reason, never an exception."""
    import benchmarks.llama_cpp_peer as peer

    monkeypatch.setattr(peer, "available", lambda: "llama_cpp not importable (test)")
    assert cc.llama_cpp_row({}, ["inf"], "", 1) == {"error": "not run: llama_cpp not importable (test)"}


def test_llama_cpp_slots_serve_the_stream(tmp_path):
    """Where llama-cpp-python is installed (never in CI): the slot server on
    the tiny model's GGUF, through the same driver, at 1 and 3 in flight:
    every request gets its tokens, one stamp each."""
    from benchmarks.llama_cpp_peer import available, gguf_file
    from benchmarks.quant_models import QuantServeConfig
    from benchmarks.serve.concurrent_llama import SlotServer

    if available():
        pytest.skip(available())
    path = gguf_file(QuantServeConfig("tiny", "int8"), "F32", str(tmp_path))
    stream = ch.make_stream(ch.StreamSpec(5, 4, 40, 2, 6, seed=5), 256)
    server = SlotServer(path, 3, 64, n_batch=32)  # prompts longer than the batch: chunked prefill
    server.start()
    try:
        one = ch.drive(server, stream, math.inf, 1, timeout=60)
        three = ch.drive(server, stream, math.inf, 3, timeout=60)
    finally:
        server.stop()
        server.close()
    for records in (one, three):
        assert [len(r["tokens"]) for r in records] == [r["max_new_tokens"] for r in stream]
        assert [len(r["times"]) for r in records] == [r["max_new_tokens"] for r in stream]
        assert all(0 <= t < 256 for r in records for t in r["tokens"])
    assert [r["tokens"] for r in one] == [r["tokens"] for r in three]


def test_report_only_writes_tables_plot_and_page_from_saved_rows(tmp_path):
    """--report-only --readme: nothing runs; this host kind's saved rows
    make the tables, the targets, the plot and the page's section (on
    copies); rows of another host kind stay out of them."""
    from benchmarks import host as hs

    here = dict(hs.describe(measure=False), copy_gbs=20.0)
    rows = [dict(r, host=here) for r in _rows()] + [dict(_rows()[1], host="another host kind")]
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps({"rows": rows}))
    readme = tmp_path / "README.md"
    shutil.copy(os.path.join(ROOT, "README.md"), readme)
    (tmp_path / "docs" / "benchmarks").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "docs", "benchmarks", "serving.md"), tmp_path / "docs" / "benchmarks")
    got = cc.main(["--concurrent", "--report-only", "--readme"], results=str(saved), table_path=str(tmp_path / "t.md"),
                  plot_path=str(tmp_path / "p.png"), readme=str(readme))
    assert [r["config"] for r in got] == ["tiny f32 quick", "qwen2 L=24 f32"]
    table = (tmp_path / "t.md").read_text()
    assert table.count("| qwen2 L=24 f32 | ours | 16 | inf |") == 1 and "| pass |" in table
    pytest.importorskip("matplotlib")
    assert (tmp_path / "p.png").stat().st_size > 0
    page = (tmp_path / "docs" / "benchmarks" / "serving.md").read_text()
    assert page.count(f"### Host: {hs.kind(here)}") >= 1 and "| tiny f32 quick | ours | 1 | 8.0 |" in page


def test_full_run_configurations_use_the_quick_run_functions():
    """The full run's configurations (not run here): the tiny model and the
    0.5B shape in f32 and bf16, the issue's stream and numbers in flight,
    the greedy check in f32 only; the quick run differs only in these
    values (same child, driver and metrics)."""
    full = dict(cc.configs(["tiny", "qwen2"], False))
    assert list(full) == ["tiny f32", "qwen2 L=24 f32", "qwen2 L=24 bf16"]
    q = full["qwen2 L=24 f32"]
    assert q["concurrency"] == [1, 4, 16, 64] and q["stream"] == ch.FULL.__dict__
    assert (q["stream"]["prompt_min"], q["stream"]["prompt_max"], q["stream"]["out_min"], q["stream"]["out_max"]) == (
        32, 1024, 16, 256)
    assert q["check"] > 0 and full["qwen2 L=24 bf16"]["check"] == 0
    assert [ch.FULL.requests_at(c) for c in (1, 4, 16, 64)] == [16, 16, 32, 128]
    (name, quick), = cc.configs(["qwen2"], True)
    assert name == "tiny f32 quick" and quick["concurrency"] == [1, 4] and quick["stream"] == ch.QUICK.__dict__
    assert set(quick) == set(q)
