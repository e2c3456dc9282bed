"""A compiled callable (JitFunction, compile() result) called from 4 Python
threads at once returns the right results."""

import threading
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from .helpers import ROOT, backends, require_compile

THREADS, ROUNDS = 4, 6


def _hammer(fn, inputs, expected):
    errors, barrier = [], threading.Barrier(THREADS)

    def work(t):
        try:
            barrier.wait()
            for r in range(ROUNDS):
                i = (t + r) % len(inputs)
                got = fn(*inputs[i])
                got = got if isinstance(got, tuple) else (got,)
                for a, b in zip(got, expected[i]):
                    torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-5)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((t, e))

    ts = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "a thread hung"
    assert not errors, errors[:2]


def test_jit_function_from_threads():
    from torch_mlir_flex.backend import JitFunction

    text = (ROOT / "test/robustness/inputs/gqa_captures.mlir").read_text()
    g = torch.Generator().manual_seed(0)
    inputs = [(torch.randn(1, 4, 16, 8, generator=g), torch.randn(1, 2, 32, 8, generator=g),
               torch.randn(1, 2, 32, 8, generator=g), torch.randn(4, generator=g)) for _ in range(THREADS)]
    for b in backends():
        fn = JitFunction(text, "main", pipeline=b)
        # single-threaded results as the reference (same compiled code)
        expected = [fn(*x) for x in inputs]
        _hammer(fn, inputs, expected)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.linspace(-1, 1, 4))

    def forward(self, q, k, v):
        def score(s, b, h, i, j):
            return torch.tanh(s / 4) * 4 + self.bias[h] * (j - i)

        def mask(b, h, i, j):
            return j <= i

        from torch.nn.attention.flex_attention import create_block_mask

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, score_mod=score, block_mask=bm, return_lse=True, enable_gqa=True)


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_compiled_model_from_threads(backend):
    compile_ = require_compile()
    if backend not in backends():
        pytest.skip(f"backend {backend!r} is not registered yet")
    g = torch.Generator().manual_seed(1)
    inputs = [(torch.randn(1, 4, 40, 16, generator=g), torch.randn(1, 2, 70, 16, generator=g),
               torch.randn(1, 2, 70, 16, generator=g)) for _ in range(THREADS)]
    fn = compile_(Model(), inputs[0], backend=backend)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        expected = [Model()(*x) for x in inputs]
    _hammer(fn, inputs, expected)
