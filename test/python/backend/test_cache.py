"""The on-disk compile cache (backend/cache.py): hits in this and in a new
process give the same results as the JIT, entries are bounded, bad entries
are replaced.

    PYTHONPATH=python pytest -q test/python/backend/test_cache.py
"""

import os
import subprocess
import sys
import textwrap
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import numpy as np
import pytest
import torch

from torch_mlir_flex.backend import JitFunction
from torch_mlir_flex.backend import cache
from torch_mlir_flex.mlir.execution_engine import ExecutionEngine

warnings.filterwarnings("ignore")

ADD_EXP = """func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = math.exp %s : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""

MODEL = textwrap.dedent("""
    import torch_mlir_flex, torch
    from torch.nn.attention.flex_attention import flex_attention

    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + 0.5 * (m - n))

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 32, 16, generator=g) for _ in range(3))
    fn = torch_mlir_flex.compile(Attn(), (q, k, v))
    torch.testing.assert_close(fn(q, k, v), Attn()(q, k, v), rtol=1e-4, atol=1e-4)
""")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv(cache.CHILD_ENV, raising=False)  # "auto": small modules compile here
    return tmp_path


def entries(d):
    return sorted(p for p in os.listdir(d) if p.endswith(".so"))


def run_add_exp(fn):
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(fn(a, b), torch.exp(a + b))


def test_second_compile_loads_the_stored_library(cache_dir):
    before = dict(cache.stats)
    first = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(first.engine, ExecutionEngine)
    assert len(entries(cache_dir)) == 1
    second = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(second.engine, cache.SharedObjectEngine)
    assert cache.stats["hits"] - before.get("hits", 0) == 1
    run_add_exp(first)
    run_add_exp(second)


def test_key_depends_on_lowered_ir_and_opt_level(cache_dir):
    JitFunction(ADD_EXP, pipeline="reference")
    JitFunction(ADD_EXP, pipeline="reference", opt_level=0)
    JitFunction(ADD_EXP.replace("math.exp", "math.sqrt"), pipeline="reference")
    assert len(entries(cache_dir)) == 3


def test_key_depends_on_host_cpu(cache_dir, monkeypatch):
    """An entry compiled on another CPU (a copied cache directory) is not
    loaded: the host's model and feature flags are part of the key."""
    from torch_mlir_flex.backend import cpu_features

    assert "|" in cpu_features.host_cpu_signature() or not os.path.exists("/proc/cpuinfo")
    JitFunction(ADD_EXP, pipeline="reference")
    monkeypatch.setattr(cache, "host_cpu_signature", lambda: "OtherVendor|1|2|other cpu|sse2")
    other = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(other.engine, ExecutionEngine)  # a miss, compiled anew
    assert len(entries(cache_dir)) == 2
    run_add_exp(other)


def test_tiled_openmp_model_from_a_second_process(cache_dir):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    script = MODEL + "print('hits', torch_mlir_flex.backend.cache.stats['hits'])\n"
    outs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
            for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr[-3000:]
    assert outs[0].stdout.split()[-1] == "0" and outs[1].stdout.split()[-1] == "1"
    assert len(entries(cache_dir)) == 1


def test_unloadable_entry_is_replaced(cache_dir):
    """Found by its record (size and digest, cache_trust.py) before it is
    mapped; test_cache_trust.py has the other damages."""
    JitFunction(ADD_EXP, pipeline="reference")
    (name,) = entries(cache_dir)
    (cache_dir / name).write_bytes(b"not a shared library")
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, ExecutionEngine)
    run_add_exp(fn)
    assert isinstance(JitFunction(ADD_EXP, pipeline="reference").engine, cache.SharedObjectEngine)


def test_disabled_by_environment(cache_dir, monkeypatch):
    monkeypatch.setenv(cache.ENABLE_ENV, "0")
    JitFunction(ADD_EXP, pipeline="reference")
    assert entries(cache_dir) == []


def test_miss_compiled_in_a_child_process(cache_dir, monkeypatch):
    """A miss on a large module (here every module: the switch forces it)
    is compiled by `torch_mlir_flex.codegen_child` and loaded as a hit; the
    small module stays in this process under the default "auto"."""
    monkeypatch.setenv(cache.CHILD_ENV, "1")
    before = dict(cache.stats)
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, cache.SharedObjectEngine)
    assert cache.stats["child"] - before.get("child", 0) == 1
    assert len(entries(cache_dir)) == 1
    run_add_exp(fn)
    assert isinstance(JitFunction(ADD_EXP, pipeline="reference").engine, cache.SharedObjectEngine)
    assert cache.stats["hits"] - before.get("hits", 0) == 1
    monkeypatch.setenv(cache.CHILD_ENV, "auto")
    small = JitFunction(ADD_EXP.replace("math.exp", "math.sqrt"), pipeline="reference")
    assert isinstance(small.engine, ExecutionEngine)


def test_child_killed_by_a_signal_raises(cache_dir, monkeypatch):
    """An LLVM fatal error (an abort) in the child ends the child only: the
    compile raises FlexBackendError naming the signal, nothing is stored."""
    from torch_mlir_flex import FlexBackendError

    monkeypatch.setenv(cache.CHILD_ENV, "1")
    monkeypatch.setattr(cache, "_child_command",
                        lambda *a: [sys.executable, "-c", "import os, sys; print('LLVM ERROR: x', file=sys.stderr); os.abort()"])
    with pytest.raises(FlexBackendError, match="SIGABRT.*LLVM ERROR: x"):
        JitFunction(ADD_EXP, pipeline="reference")
    assert entries(cache_dir) == []


def test_child_failure_compiles_here(cache_dir, monkeypatch):
    monkeypatch.setenv(cache.CHILD_ENV, "1")
    monkeypatch.setattr(cache, "_child_command", lambda *a: [sys.executable, "-c", "raise SystemExit(3)"])
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, ExecutionEngine)
    run_add_exp(fn)
    assert len(entries(cache_dir)) == 1


def test_prune_removes_least_recently_used(tmp_path):
    for i, name in enumerate(["old.so", "mid.so", "new.so"]):
        p = tmp_path / name
        p.write_bytes(b"x" * 1000)
        os.utime(p, (1000 + i, 1000 + i))
    cache.prune(str(tmp_path), 2000)
    assert entries(tmp_path) == ["mid.so", "new.so"]
    cache.prune(str(tmp_path), 0)
    assert entries(tmp_path) == []


def test_prune_removes_records_with_their_entries(tmp_path):
    for name in ["old.so", "new.stage"]:
        (tmp_path / name).write_bytes(b"x" * 1000)
        (tmp_path / (name + ".sum")).write_bytes(b"sha256 0 1000\n")
    os.utime(tmp_path / "old.so", (1000, 1000))
    (tmp_path / "gone.so.sum").write_bytes(b"sha256 0 1000\n")  # its entry removed
    cache.prune(str(tmp_path), 1000)
    assert sorted(os.listdir(tmp_path)) == ["new.stage", "new.stage.sum"]


def test_size_bound_applies_on_store(cache_dir, monkeypatch):
    monkeypatch.setenv(cache.SIZE_ENV, "0")
    JitFunction(ADD_EXP, pipeline="reference")
    assert entries(cache_dir) == []
