"""`python -m torch_mlir_flex compile` on bad input: exit status 1, a
`torch-mlir-flex: error:` message on stderr, no Python traceback, no crash."""

import random
import subprocess
import sys

import pytest

from . import fuzz
from .helpers import ROOT, died_by_signal, require_cli, subprocess_env


def run_cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "torch_mlir_flex", *args], capture_output=True, text=True,
                          timeout=timeout, env=subprocess_env(), cwd=str(ROOT))


def check_clean_error(r, *needles):
    assert not died_by_signal(r.returncode), r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "torch-mlir-flex: error:" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


BAD_MLIR = {
    "syntax": ("func.func @main(%q: tensor<1x2xf32> {\n", "expected"),
    "truncated_flex": ((ROOT / "test/robustness/inputs/gqa_captures.mlir").read_text()[:700], "error"),
    "verifier": ("""
func.func @main(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>)
      outs(%o : tensor<1x2x4x8xf32>) scale(1.0) -> tensor<1x2x4x8xf32>
  return %r : tensor<1x2x4x8xf32>
}
""", "query head dim E = 8 differs from key head dim 4"),
    "garbage_bytes": ("\x00\x01\xff garbage %%% }}}", "error"),
    "empty": ("", "@main"),
    "bool_output": ("""
#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<4xf32>) -> tensor<4xi1> {
  %e = tensor.empty() : tensor<4xi1>
  %z = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xi1>) {
  ^bb0(%x: f32, %o: i1):
    %c = arith.cmpf ogt, %x, %z : f32
    linalg.yield %c : i1
  } -> tensor<4xi1>
  return %r : tensor<4xi1>
}
""", None),  # i1 output: a clean error (JitFunction guard) or success once widened
}


@pytest.mark.parametrize("name", sorted(BAD_MLIR))
def test_malformed_mlir(name, tmp_path):
    require_cli()
    text, needle = BAD_MLIR[name]
    f = tmp_path / f"{name}.mlir"
    f.write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    r = run_cli("compile", str(f), "--run", "--print-after", "loops")
    if needle is None and r.returncode == 0:
        assert "Traceback" not in r.stderr
        return
    check_clean_error(r, *([needle] if needle else []))


def test_missing_file_and_bad_model_file(tmp_path):
    require_cli()
    check_clean_error(run_cli("compile", str(tmp_path / "nope.mlir")), "nope.mlir")
    py = tmp_path / "model.py"
    py.write_text("def get_model(:\n")
    check_clean_error(run_cli("compile", str(py)), "SyntaxError")
    py.write_text("import torch\ndef get_model():\n    return torch.nn.Identity()\n")
    check_clean_error(run_cli("compile", str(py)), "get_inputs")


def test_cli_on_fuzz_mutants(tmp_path):
    """A handful of fuzz mutants through the whole CLI (parse, materialize,
    lower, run): clean errors or success, never a traceback or a signal."""
    require_cli()
    mutants = fuzz.make_mutants(6, seed=11)
    for i, m in enumerate(mutants):
        f = tmp_path / f"m{i}.mlir"
        f.write_text(m.text)
        r = run_cli("compile", str(f), "--run", "--dim-size", "3")
        assert not died_by_signal(r.returncode), (m.seed_name, m.mutations, r.stderr)
        assert r.returncode in (0, 1), (m.seed_name, r.stderr)
        assert "Traceback" not in r.stderr, (m.seed_name, m.mutations, m.text, r.stderr)
        if r.returncode:
            assert "torch-mlir-flex: error:" in r.stderr


def test_crash_in_child_is_exit_1(tmp_path):
    """The CLI works in a child process: even a process crash (here a model
    file that calls os.abort()) ends in `torch-mlir-flex: error:` and exit 1."""
    require_cli()
    py = tmp_path / "model.py"
    py.write_text("import os\ndef get_model():\n    os.abort()\ndef get_inputs():\n    return ()\n")
    check_clean_error(run_cli("compile", str(py)), "crashed (signal SIGABRT)")


def test_transform_size_out_of_range(tmp_path):
    """A tile size of INT64_MIN used to abort the verifier (exit 134)."""
    require_cli()
    text = (ROOT / "test/robustness/inputs/crashes/transform_tile_using_for_int64_min.mlir").read_text()
    f = tmp_path / "t.mlir"
    f.write_text(text)
    check_clean_error(run_cli("compile", str(f)), "has a negative size -9223372036854775808")
