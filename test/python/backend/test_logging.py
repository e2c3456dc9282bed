"""Logging under `torch_mlir_flex`: stage times, flex-to-flash choices, IR
dumps (TORCH_MLIR_FLEX_DUMP_IR), off by default.

    PYTHONPATH=python pytest -q test/python/backend/test_logging.py
"""

import logging
import os
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import log
from torch_mlir_flex.backend import compile_mlir

warnings.filterwarnings("ignore")

CAUSAL = """func.func @main(%q: tensor<1x2x128x16xf32>, %k: tensor<1x2x128x16xf32>, %v: tensor<1x2x128x16xf32>) -> tensor<1x2x128x16xf32> {
  %o = tensor.empty() : tensor<1x2x128x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32>)
      outs(%o : tensor<1x2x128x16xf32>) scale(0.25)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x128x16xf32>
  return %r : tensor<1x2x128x16xf32>
}
"""


@pytest.fixture
def records():
    with log.capture(logging.INFO) as messages:
        yield messages


def test_tile_sizes_and_classification_are_logged(records):
    compile_mlir(CAUSAL, backend="tiled-1t")
    assert "flex.attention #0: tiles 64x64, block classification interval" in records
    assert any(m.startswith("stage lower+jit: ") for m in records), records


def test_reference_backend_has_no_flash_choices(records):
    compile_mlir(CAUSAL, backend="reference")
    assert not any("block classification" in m for m in records)


def test_stage_times_and_ir_dumps(records, tmp_path, monkeypatch):
    monkeypatch.setenv(log.DUMP_ENV, str(tmp_path))

    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s - 0.1 * (m - n))

    q = k = v = torch.randn(1, 2, 32, 16)
    torch_mlir_flex.compile(Attn(), (q, k, v))
    stages = [m.split(":")[0] for m in records if m.startswith("stage ")]
    assert stages == ["stage export", "stage import", "stage to_linalg", "stage materialize", "stage lower+jit"]
    dumps = sorted(os.listdir(tmp_path))
    assert [d.split(".")[1] for d in dumps] == ["torch", "linalg", "flex", "llvm"]
    assert "torch.hop_flex_attention" in (tmp_path / dumps[0]).read_text()
    assert "flex.attention" in (tmp_path / dumps[2]).read_text()
    assert "llvm.func" in (tmp_path / dumps[3]).read_text()
    for d in dumps:
        assert f"written to {tmp_path / d}" in " ".join(records)


def test_quiet_by_default():
    assert logging.getLogger("torch_mlir_flex").getEffectiveLevel() >= logging.WARNING or \
        os.environ.get(log.LEVEL_ENV)
