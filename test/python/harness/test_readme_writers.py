"""The `--readme` writers of the benchmarks (benchmarks/readme.py and each
benchmark's writer) on made-up rows and made-up hosts (conftest.py): each
writes its host kind's subsection of the `## Results` section of its page
under docs/benchmarks/ (other kinds' and the notes after it stay) and only
its own row in its host kind's row set of the README's headline table. No
benchmarking.

    PYTHONPATH=python pytest -q test/python/harness/test_readme_writers.py
"""

import pytest

from benchmarks import readme as rd

ZEN1 = "AMD EPYC 7571 Zen 1 (AVX2+FMA)"
ROWS = {name: f"| [{name}](docs/benchmarks/{name}.md) | old {name} | 1 | 1 | 1 | 1 | somewhere |"
        for name in ("attention", "models", "serving", "training")}
README = ("# project\n\n" + rd.HEADLINE_BEGIN + "\n" + rd.KIND_HEAD + ZEN1 + "\n\n" + rd.HEADLINE_HEADER + "\n"
          + "\n".join(ROWS.values()) + "\n" + rd.HEADLINE_END + "\n\n## Layout\n")
NOTES = (f"# Title\n\nHow to run.\n\n## Results\n\n{rd.KIND_HEAD}{ZEN1}\n\nold table\n\n"
         f"{rd.KIND_HEAD}Other CPU (AVX-512)\n\nother table\n\n## Notes\n\nkept by hand\n")


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "README.md").write_text(README)
    pages = tmp_path / "docs" / "benchmarks"
    pages.mkdir(parents=True)
    for name in ROWS:
        (pages / f"{name}.md").write_text(NOTES)
    return tmp_path


def _only_row_changed(tree, name, want):
    """The README equals the original but for benchmark `name`'s row, which is `want`."""
    assert (tree / "README.md").read_text() == README.replace(ROWS[name], want)


def _page_replaced(tree, name, *snippets):
    """Only the Zen 1 subsection of the page's results changed."""
    text = (tree / "docs" / "benchmarks" / f"{name}.md").read_text()
    assert text.startswith(f"# Title\n\nHow to run.\n\n## Results\n\n{rd.KIND_HEAD}{ZEN1}\n\n")
    assert "old table" not in text
    assert text.endswith(f"\n{rd.KIND_HEAD}Other CPU (AVX-512)\n\nother table\n\n## Notes\n\nkept by hand\n")
    for s in snippets:
        assert s in text, s


def test_headline_row_replaced_appended_and_markers_required(tree, zen1):
    readme = str(tree / "README.md")
    row = rd.headline_row("serving", "serving", "c", "2 ms", "0.50", "0.25", "—", rd.where(zen1, "r"))
    assert row == ("| [serving](docs/benchmarks/serving.md) | c | 2 ms | 0.50 | 0.25 | — | "
                   "2 cores (load 1.0), GEMM f32 49 GFLOP/s, copy 16.0 GB/s; r UTC |")
    rd.update_headline("serving", row, ZEN1, readme)
    _only_row_changed(tree, "serving", row)
    new = rd.headline_row("other", "other", "c", "1", "—", "—", "—", rd.where(None, ""))
    assert new.endswith("| host not recorded; time not recorded UTC |")
    rd.update_headline("other", new, ZEN1, readme)
    assert (tree / "README.md").read_text() == README.replace(ROWS["serving"], row).replace(
        ROWS["training"], ROWS["training"] + "\n" + new)
    (tree / "README.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="no headline markers"):
        rd.update_headline("serving", row, ZEN1, readme)


def test_new_page_gets_a_title_and_results(tmp_path):
    (tmp_path / "README.md").write_text(README)
    path = rd.write_page("fresh", "Fresh benchmark", "a table\n", "K (AVX2+FMA)", str(tmp_path / "README.md"))
    assert path == str(tmp_path / "docs" / "benchmarks" / "fresh.md")
    assert open(path).read() == f"# Fresh benchmark\n\n## Results\n\n{rd.KIND_HEAD}K (AVX2+FMA)\n\na table\n"
    assert rd.ratio(1.0, 4.0) == "0.25" and rd.ratio(1.0, None) == "—"
    # below 0.1: two significant digits, not a rounded 0.00 / 0.01
    assert rd.ratio(0.0056, 1.0) == "0.0056" and rd.ratio(0.094, 1.0) == "0.094"
    assert rd.ratio(0.0996, 1.0) == "0.10"


def test_models_writer(tree, zen1):
    from benchmarks.models import __main__ as models

    res = lambda ms: {"forward_ms": ms, "compile_s": 2.0, "peak_extra_mib": 100.0}  # noqa: E731
    rows = [{"config": "qwen2 L=2 S=128 f32", "gflop": 43.0, "run": "2026-12-06 00:58",
             "results": {"eager": res(400.0), "inductor": res(300.0), "ours": res(200.0)}},
            {"config": "qwen2 L=24 S=1024 f32", "gflop": 1057.0, "run": "2026-12-06 06:27", "host": zen1,
             "results": {"eager": res(1000.0), "inductor": res(800.0), "ours": dict(res(700.0), weights_mib=10.0),
                         "ours-cached": res(1.0)}}]
    models._write(rows, None, True, zen1, root=str(tree))
    _page_replaced(tree, "models", "| qwen2 L=2 S=128 f32 | 43 | 400.0 | 300.0 | 200.0 | 0.50 | 0.67 |",
                   "| 2026-12-06 06:27; 2 cores (load 1.0), GEMM f32 49 GFLOP/s, copy 16.0 GB/s |",
                   "| forward <= 1.0x eager | pass |", "Host: " + ZEN1 + ": AMD EPYC 7571 32-Core Processor")
    assert (tree / "benchmarks" / "results" / "models.md").exists()
    _only_row_changed(tree, "models", "| [whole model](docs/benchmarks/models.md) | Qwen2-0.5B shape (24 layers), "
                      "S=1024 f32 forward | 700 ms | 0.70 | 0.88 | — | 2 cores (load 1.0), GEMM f32 49 GFLOP/s, copy 16.0 GB/s; "
                      "2026-12-06 06:27 UTC |")


def test_serving_writer(tree, zen1):
    from benchmarks.serve import __main__ as serve

    ok = dict(first_s=1.0, ttft_ms=2.0, ms_per_token=10.0, bytes_per_token=10**6, tokens=[[5, 6]])
    rows = [{"config": "tiny f32 B=1 P=128", "bandwidth": 10.0, "run": "2026-12-06 14:08", "host": zen1,
             "results": {"eager": dict(ok, ms_per_token=4.0), "inductor": dict(ok, ms_per_token=2.0),
                         "ours-api": dict(ok, ms_per_token=1.0)}},
            {"config": "qwen2 L=24 f32 B=1 P=128", "bandwidth": 10.0,
             "results": {"inductor": dict(ok, ms_per_token=150.0), "ours-api": {"error": "x"}}}]
    table = serve.markdown(rows, zen1)
    assert table.startswith("Host: " + ZEN1 + ": ")
    assert ("Runs (UTC): tiny f32 B=1 P=128: 2026-12-06 14:08, 2 cores (load 1.0), GEMM f32 49 GFLOP/s, copy 16.0 GB/s; "
            "qwen2 L=24 f32 B=1 P=128: time not recorded, host not recorded.") in table
    serve.write_readme(rows, table, 2, zen1, str(tree / "README.md"))
    _page_replaced(tree, "serving", "`python -m benchmarks.serve`", "2 processes per implementation",
                   "| tiny f32 B=1 P=128 | ours-api |")
    # the 0.5B shape's ours-api failed: the tiny row is the headline
    _only_row_changed(tree, "serving", "| [serving](docs/benchmarks/serving.md) | tiny Llama f32 B=1 P=128, decode "
                      "(hf.generator) | 1.0 ms/token | 0.25 | 0.50 | — | 2 cores (load 1.0), GEMM f32 49 GFLOP/s, "
                      "copy 16.0 GB/s; 2026-12-06 14:08 UTC |")


def test_training_writer(tree, zen1):
    from benchmarks.train import __main__ as train

    def row(case, kind, S, D, dtype, ours):
        return {"case": case, "kind": kind, "S": S, "D": D, "dtype": dtype,
                "time": {"ours": ours, "sdpa": 2 * ours, "eager": 10 * ours}}

    rows = [row("causal-4096-128", "causal", 4096, 128, "bf16", 0.5),
            row("causal-1024-64", "causal", 1024, 64, "f32", 0.02),
            row("causal-4096-128", "causal", 4096, 128, "f32", 0.6),
            row("sliding-4096-128", "sliding", 4096, 128, "f32", 0.1)]
    train.write_readme(rows, "the table\n", zen1, str(tree / "README.md"))
    _page_replaced(tree, "training", "the table")
    text = (tree / "README.md").read_text()
    want = ("| [training](docs/benchmarks/training.md) | causal f32 S=4096 D=128, forward + backward "
            "(eager: math attention) | 600 ms | 0.10 | — | 0.50 | 2 cores (load 1.0), GEMM f32 49 GFLOP/s, copy 16.0 GB/s; ")
    assert want in text
    assert text.replace(text[text.index(want):text.index(" UTC |", text.index(want)) + 6], ROWS["training"]) == README
