"""The stage cache (backend/stage_cache.py): a second compile of the same
model skips torch.export (pre_export_cache.py), import, frontend,
materialize and the lowering pipeline, and gives eager's results; what the module keeps as literals
(a captured bias) is part of the key, weights passed as arguments are not;
a new shape misses; a broken entry is dropped.

    PYTHONPATH=python pytest -q test/python/backend/test_stage_cache.py
"""

import os
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex.backend import cache, stage_cache

warnings.filterwarnings("ignore")


class BiasedAttn(torch.nn.Module):
    """A projection (weights: runtime arguments) and flex attention whose
    score_mod captures a per-head bias buffer (kept as a literal)."""

    def __init__(self, seed, bias_scale=1.0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.proj = torch.nn.Linear(16, 16)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(16, 16, generator=g) * 0.2)
        self.register_buffer("bias", torch.arange(2, dtype=torch.float32) * bias_scale)

    def forward(self, q, k, v):
        bias = self.bias

        def score_mod(s, b, h, m, n):
            return s + bias[h] * (m - n) * 0.1

        return flex_attention(self.proj(q), k, v, score_mod=score_mod)


def _inputs(seq=32):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, 2, seq, 16, generator=g) for _ in range(3))


def _compile_and_check(model, args):
    fn = torch_mlir_flex.compile(model, args)
    with torch.no_grad():
        torch.testing.assert_close(fn(*args), model(*args), rtol=1e-4, atol=1e-4)
    return fn


def _stages(d):
    return sorted(p for p in os.listdir(d) if p.endswith(stage_cache.SUFFIX))


def test_second_compile_skips_the_stages(cache_dir):
    args = _inputs()
    first = _compile_and_check(BiasedAttn(0), args)
    # exported, imported, lowered
    assert len(_stages(cache_dir)) == 3 and cache.stats["stage_hits"] == 0
    second = _compile_and_check(BiasedAttn(0), args)
    assert cache.stats["stage_hits"] == 3 and cache.stats["hits"] == 1  # and LLVM's object code
    assert second.flex_ir == first.flex_ir and second.lowered_ir == first.lowered_ir
    assert "flex.attention" in second.flex_ir
    assert first.exported_program is not None and second.exported_program is None  # not exported


def test_other_weights_reuse_the_code(cache_dir):
    args = _inputs()
    _compile_and_check(BiasedAttn(0), args)
    _compile_and_check(BiasedAttn(1), args)  # another projection weight: an argument
    assert cache.stats["stage_hits"] == 3


def test_a_captured_literal_is_part_of_the_key(cache_dir):
    args = _inputs()
    _compile_and_check(BiasedAttn(0), args)
    # The bias the score_mod captures is a literal of the module: another
    # value must not reuse the first module (the check against eager would
    # fail), so neither stage hits.
    _compile_and_check(BiasedAttn(0, bias_scale=3.0), args)
    assert cache.stats["stage_hits"] == 0


def test_another_shape_misses(cache_dir):
    _compile_and_check(BiasedAttn(0), _inputs(32))
    _compile_and_check(BiasedAttn(0), _inputs(48))
    assert cache.stats["stage_hits"] == 0


def test_unreadable_entry_is_dropped(cache_dir):
    args = _inputs()
    _compile_and_check(BiasedAttn(0), args)
    for name in _stages(cache_dir):
        with open(os.path.join(cache_dir, name), "wb") as f:
            f.write(b"not a pickle")
    _compile_and_check(BiasedAttn(0), args)
    assert cache.stats["stage_hits"] == 0 and len(_stages(cache_dir)) == 3


def test_key_depends_on_the_build(monkeypatch):
    k = stage_cache.key("lowered", "text")
    monkeypatch.setattr(stage_cache, "build_id", lambda: "another build")
    assert stage_cache.key("lowered", "text") != k


@pytest.mark.parametrize("env", [cache.ENABLE_ENV, stage_cache.ENABLE_ENV])
def test_disabled_by_environment(cache_dir, monkeypatch, env):
    monkeypatch.setenv(env, "0")
    _compile_and_check(BiasedAttn(0), _inputs())
    _compile_and_check(BiasedAttn(0), _inputs())
    assert _stages(cache_dir) == [] and cache.stats["stage_hits"] == 0
