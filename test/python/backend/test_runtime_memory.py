"""No per-call memory growth: one compiled module called 2,000 times per
backend keeps the process RSS within 8 MiB (a leaked output of >= 16 KiB per
call would add >= 32 MiB). Also results that are inputs or constants.

    PYTHONPATH=python pytest -q test/python/backend/test_runtime_memory.py
"""

import os

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, flex_attention

from torch_mlir_flex.backend import PIPELINES, JitFunction

CALLS, WARMUP, LIMIT = 2000, 100, 8 << 20
BACKENDS = [b for b in ("reference", "tiled", "tiled-1t") if b in PIPELINES]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def growth(fn, args) -> int:
    for _ in range(WARMUP):
        fn(*args)
    before = rss_bytes()
    for _ in range(CALLS):
        fn(*args)
    return rss_bytes() - before


class Softcap(torch.nn.Module):
    def __init__(self, lse: bool):
        super().__init__()
        self.lse = lse

    def forward(self, q, k, v):
        score = lambda s, b, h, m, n: torch.tanh(s / 8) * 8  # noqa: E731
        if not self.lse:
            return flex_attention(q, k, v, score_mod=score)
        out, aux = flex_attention(q, k, v, score_mod=score, return_aux=AuxRequest(lse=True))
        return out, aux.lse


def qkv():
    g = torch.Generator().manual_seed(0)
    # output 1x2x64x32 f32 = 16 KiB per call
    return tuple(torch.randn(1, 2, 64, 32, generator=g) for _ in range(3))


@pytest.mark.parametrize("lse", [False, True], ids=["out", "out+lse"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_growth_over_2000_calls(backend, lse):
    model = Softcap(lse)
    fn = torch_mlir_flex.compile(model, qkv(), backend=backend)
    args = qkv()
    got = fn(*args)
    torch.testing.assert_close(got, model(*args), rtol=1e-3, atol=1e-5)
    grew = growth(fn, args)
    assert grew < LIMIT, f"RSS grew by {grew / 2**20:.1f} MiB over {CALLS} calls"


# Results that are an input (twice), a constant and a 0-d input: copied into
# fresh outputs; nothing that aliases an input or a global is ever freed.
IDENTITY = """
func.func @main(%a: tensor<64x?xf32>, %i: tensor<i64>) -> (tensor<64x?xf32>, tensor<2xf32>, tensor<64x?xf32>, tensor<i64>) {
  %c = arith.constant dense<[1.5, -2.0]> : tensor<2xf32>
  return %a, %c, %a, %i : tensor<64x?xf32>, tensor<2xf32>, tensor<64x?xf32>, tensor<i64>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_inputs_and_constants(backend):
    fn = JitFunction(IDENTITY, "main", pipeline=backend)
    a, i = torch.randn(64, 64), torch.tensor(7)
    r0, c, r2, ri = fn(a, i)
    assert torch.equal(r0, a) and torch.equal(r2, a) and ri.item() == 7 and ri.dim() == 0
    for r in (r0, r2, ri):
        assert r.data_ptr() not in (a.data_ptr(), i.data_ptr())
    assert r0.data_ptr() != r2.data_ptr()
    c.fill_(0.0)  # the next call still sees the constant
    r0.fill_(0.0)
    assert torch.equal(fn(a, i)[1], torch.tensor([1.5, -2.0]))
    assert torch.equal(fn(a, i)[0], a)
    grew = growth(fn, (a, i))
    assert grew < LIMIT, f"RSS grew by {grew / 2**20:.1f} MiB over {CALLS} calls"


def test_inputs_are_not_written():
    """An init passed as an argument is not overwritten: inputs are read-only."""
    text = """
func.func @main(%x: tensor<8xf32>, %init: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""
    for backend in BACKENDS:
        fn = JitFunction(text, "main", pipeline=backend)
        x, init = torch.arange(8.0), torch.ones(8)
        torch.testing.assert_close(fn(x, init), x + 1)
        assert torch.equal(init, torch.ones(8))
        # the same tensor for both arguments
        torch.testing.assert_close(fn(x, x), 2 * x)
        assert torch.equal(x, torch.arange(8.0))
