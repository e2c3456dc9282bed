"""benchmarks/host.py and the per-host-kind row sets: the host description
(its fields on this host, measured; the ISA level and kind of made-up
CPUs), two host kinds keeping separate rows in the README's headline
table, in a page's results and in a results file, and a run on one host
replacing only its own kind's rows.

    PYTHONPATH=python pytest -q test/python/harness/test_host.py
"""

import json

import pytest

from benchmarks import host as hs
from benchmarks import readme as rd
from benchmarks.results_file import merge_rows, rows_of
from torch_mlir_flex.backend import cpu_features

FIELDS = {"kind", "caps", "cpu", "name", "vendor", "family", "model", "microarch", "isa", "isa_label", "cores",
          "torch_threads", "f32_gflops", "bf16_gflops", "copy_gbs", "measured", "load"}


def test_this_host_is_described_and_measured():
    desc = hs.describe(gemm_n=256, reps=2)
    assert FIELDS <= set(desc)
    assert desc["isa"] in {level for level, _, _ in hs.ISA_LEVELS} | {hs.GENERIC[0]}
    assert desc["kind"] == f"{desc['name']} ({desc['isa_label']})" and desc["caps"] == ""
    assert desc["cores"] >= 1 and desc["f32_gflops"] > 0 and desc["copy_gbs"] > 0
    # bf16 GEMM measured exactly where the CPU has bf16 dot-product instructions
    assert (desc["bf16_gflops"] is not None) == cpu_features.host_has_bf16_dot()
    assert desc["bf16_gflops"] is None or desc["bf16_gflops"] > 0
    line = hs.line(desc)
    assert line.startswith(f"Host: {desc['kind']}: ") and f"ISA level {desc['isa']}" in line
    assert f"f32 GEMM {desc['f32_gflops']:.0f} GFLOP/s" in line and f"copy {desc['copy_gbs']:.1f} GB/s" in line
    json.dumps(desc)  # stored in the results files
    # without measuring: the same kind, no peaks
    quiet = hs.describe(measure=False)
    assert quiet["kind"] == desc["kind"] and quiet["f32_gflops"] is None and quiet["copy_gbs"] is None


def test_isa_caps_make_their_own_kind(monkeypatch):
    """A run with the JIT's ISA capped below the host's, or the runtime
    kernels' ISA set, measures other kernels than the host's: its rows go
    to a kind of their own. A cap at or above the host's ISA is no cap."""
    host = hs.describe(measure=False)["kind"]
    monkeypatch.setenv(cpu_features.ISA_ENV, "avx512")
    assert hs.describe(measure=False)["kind"] == host
    monkeypatch.setenv(cpu_features.ISA_ENV, "avx2")
    capped = hs.describe(measure=False)
    if cpu_features.host_vector_isa() == "avx512":
        assert capped["kind"] == host + " [JIT ISA avx2]" and "(capped: JIT ISA avx2)" in hs.line(capped)
    else:
        assert capped["kind"] == host and capped["caps"] == ""
    monkeypatch.delenv(cpu_features.ISA_ENV)
    monkeypatch.setenv("TORCH_MLIR_FLEX_RUNTIME_ISA", "generic")
    assert hs.describe(measure=False)["kind"] == host + " [runtime ISA generic]"


@pytest.mark.parametrize("flags, level, label", [
    ({"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, "amx", "AVX-512, AVX512-BF16, AMX"),
    ({"avx2", "fma", "avx512f", "avx512_bf16"}, "avx512_bf16", "AVX-512, AVX512-BF16"),
    ({"avx2", "fma", "avx512f"}, "avx512f", "AVX-512"),
    ({"avx2", "fma"}, "avx2+fma", "AVX2+FMA"),
    ({"avx2"}, "generic", "no AVX2"),  # AVX2 without FMA: not our AVX2 kernels' level
    (set(), "generic", "no AVX2"),
])
def test_isa_levels(flags, level, label):
    assert hs.isa_level(flags) == (level, label)


def test_cpu_names_and_kinds(zen1, xeon):
    assert zen1["kind"] == "AMD EPYC 7571 Zen 1 (AVX2+FMA)" and zen1["isa"] == "avx2+fma"
    assert xeon["kind"] == "Intel Xeon Platinum 8488C (AVX-512, AVX512-BF16, AMX)" and xeon["microarch"] == ""
    assert hs.microarchitecture("AuthenticAMD", 25, 0x11) == "Zen 4"  # Genoa
    assert hs.microarchitecture("AuthenticAMD", 25, 0x01) == "Zen 3"  # Milan
    assert hs.microarchitecture("AuthenticAMD", 23, 0x31) == "Zen 2"  # Rome
    assert hs.microarchitecture("AuthenticAMD", 26, 0x02) == "Zen 5"
    assert hs.cpu_name("AMD EPYC", "Zen 4") == "AMD EPYC Zen 4"
    assert hs.cpu_name("Intel(R) Xeon(R) CPU @ 2.20GHz") == "Intel Xeon"
    assert hs.cpu({}, set())["kind"] == "unknown CPU (no AVX2)"
    assert hs.compact(xeon) == "2 cores (load 1.0), GEMM f32 150 / bf16 900 GFLOP/s, copy 30.0 GB/s"
    assert "no bf16 instructions" in hs.line(zen1) and "bf16 GEMM 900 GFLOP/s" in hs.line(xeon)
    assert hs.kind(None) == hs.kind("") == hs.UNKNOWN and hs.kind("2 CPUs (old row)") == "2 CPUs (old row)"


README = f"# project\n\n{rd.HEADLINE_BEGIN}\n{rd.HEADLINE_END}\n\n## Layout\n"


def _row(name, ours, host):
    return rd.headline_row(name, name, "causal", ours, "—", "0.50", "—", rd.where(host, "2026-12-06 10:00"))


def test_headline_keeps_a_row_set_per_host_kind(tmp_path, zen1, xeon):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    rd.update_headline("attention", _row("attention", "1 ms", zen1), zen1["kind"], str(readme))
    rd.update_headline("serving", _row("serving", "2 ms", zen1), zen1["kind"], str(readme))
    rd.update_headline("attention", _row("attention", "3 ms", xeon), xeon["kind"], str(readme))
    text = readme.read_text()
    # two kinds, two row sets, each under its heading with its own table header
    assert text.count(rd.KIND_HEAD) == 2 and text.count(rd.HEADLINE_HEADER) == 2
    marked = text.split(rd.HEADLINE_BEGIN)[1].split(rd.HEADLINE_END)[0]
    zen_rows, xeon_rows = rd.kind_section(marked, zen1["kind"]), rd.kind_section(marked, xeon["kind"])
    assert zen_rows == "\n".join([rd.HEADLINE_HEADER, _row("attention", "1 ms", zen1), _row("serving", "2 ms", zen1)])
    assert xeon_rows == "\n".join([rd.HEADLINE_HEADER, _row("attention", "3 ms", xeon)])
    assert "GEMM f32 150 / bf16 900 GFLOP/s, copy 30.0 GB/s; 2026-12-06 10:00 UTC" in xeon_rows
    assert text.startswith("# project\n\n") and text.endswith(f"{rd.HEADLINE_END}\n\n## Layout\n")
    # the Zen 1 host runs the attention benchmark again: only its attention row changes
    rd.update_headline("attention", _row("attention", "0.9 ms", zen1), zen1["kind"], str(readme))
    assert readme.read_text() == text.replace(_row("attention", "1 ms", zen1), _row("attention", "0.9 ms", zen1))


def test_page_keeps_a_subsection_per_host_kind(tmp_path, zen1, xeon):
    readme = str(tmp_path / "README.md")
    page = tmp_path / "docs" / "benchmarks" / "training.md"
    page.parent.mkdir(parents=True)
    page.write_text("# Training\n\nHow.\n\n## Results\n\n## Notes\n\nby hand\n")
    rd.write_page("training", "Training", hs.line(zen1) + "\n\nzen table v1\n", zen1["kind"], readme)
    rd.write_page("training", "Training", hs.line(xeon) + "\n\nxeon table\n", xeon["kind"], readme)
    both = page.read_text()
    assert both.index(rd.KIND_HEAD + zen1["kind"]) < both.index("zen table v1") < both.index(
        rd.KIND_HEAD + xeon["kind"]) < both.index("xeon table") < both.index("## Notes\n\nby hand\n")
    rd.write_page("training", "Training", hs.line(zen1) + "\n\nzen table v2\n", zen1["kind"], readme)
    assert page.read_text() == both.replace("zen table v1", "zen table v2")


def test_results_file_keeps_each_host_kinds_rows(tmp_path, zen1, xeon):
    path = str(tmp_path / "models.json")
    merge_rows(path, [{"config": "a", "v": 1, "host": zen1}, {"config": "b", "v": 1, "host": zen1}], ["a", "b"])
    merge_rows(path, [{"config": "a", "v": 2, "host": xeon}], ["a", "b"])
    data = merge_rows(path, [{"config": "a", "v": 3, "host": zen1}], ["a", "b"])
    assert [(r["config"], r["v"]) for r in rows_of(data["rows"], zen1["kind"])] == [("a", 3), ("b", 1)]
    assert [(r["config"], r["v"]) for r in rows_of(data["rows"], xeon["kind"])] == [("a", 2)]


def test_models_rows_and_matmuls_per_host_kind(tmp_path, zen1, xeon):
    """benchmarks.models keeps each kind's rows and matmul rows apart."""
    from benchmarks.models import __main__ as models

    path = str(tmp_path / "models.json")
    gemm = lambda ratio: [{"shape": "1x1x1", "dtype": "f32", "torch": 1.0, "ours": ratio, "ratio": ratio}]  # noqa
    rows, g = models._merged([{"config": "qwen2 L=2 S=128 f32", "results": {}}], gemm(0.5), zen1, path)
    assert [r["host"]["kind"] for r in rows] == [zen1["kind"]] and g == gemm(0.5)
    rows, g = models._merged([{"config": "qwen2 L=2 S=128 f32", "results": {}}], None, xeon, path)
    assert [r["host"]["kind"] for r in rows] == [xeon["kind"]] and g is None
    rows, g = models._merged([], None, zen1, path)
    assert len(rows) == 1 and g == gemm(0.5)


def test_full_tables_of_two_host_kinds_on_one_day(tmp_path, zen1, xeon):
    """benchmarks.run --readme: a second host kind's run on the same day
    does not overwrite the first's attention-<date>.md."""
    from benchmarks import report

    assert report.full_tables_name(str(tmp_path), "2026-12-06", zen1["kind"]) == "attention-2026-12-06.md"
    (tmp_path / "attention-2026-12-06.md").write_text(f"# run\n\n{hs.line(zen1)}\n\n| table |\n")
    assert report.full_tables_name(str(tmp_path), "2026-12-06", zen1["kind"]) == "attention-2026-12-06.md"
    assert (report.full_tables_name(str(tmp_path), "2026-12-06", xeon["kind"])
            == "attention-2026-12-06-intel-xeon-platinum-8488c-avx-512-avx512-bf16-amx.md")
