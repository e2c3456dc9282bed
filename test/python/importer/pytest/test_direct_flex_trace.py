"""pytest: flex_attention traced without Dynamo (importer/direct_flex_trace.py)
imports to the same Torch IR as torch's Dynamo path, keeps captured tensors
as inputs, and leaves torch as it found it."""

import importlib
import os
import sys

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_mlir_flex
from torch_mlir_flex.backend.compile import export_model, import_model
from torch_mlir_flex.importer import direct_flex_trace
from torch_mlir_flex.importer.direct_flex_trace import ENV, direct_flex_tracing

# the repository root, for projects.e2e
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from projects.e2e import selection  # noqa: E402
from projects.e2e.registry import all_cases  # noqa: E402
from projects.e2e.runner import build  # noqa: E402

# A fixed quarter of the e2e cases (all with FLEX_TESTS_FULL=1: projects/e2e/selection.py).
CASES = [c for c in all_cases() if c.xfail is None and selection.sampled(c.name)]


def _torch_ir(model, args, dynamic_shapes, direct, monkeypatch):
    monkeypatch.setenv(ENV, "1" if direct else "0")
    return str(import_model(export_model(model, args, dynamic_shapes)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_torch_ir_as_dynamo(case, monkeypatch):
    model, sets = build(case)
    dyn = case.dynamic_shapes() if case.dynamic_shapes else None
    with_dynamo = _torch_ir(model, sets[0], dyn, False, monkeypatch)
    direct = _torch_ir(model, sets[0], dyn, True, monkeypatch)
    assert direct == with_dynamo


S = 32


class RuntimeDocs(torch.nn.Module):
    """Document ids a forward input, read by the mask_mod (built in
    forward) and by a score_mod beside a module buffer and a constant the
    score_mod makes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("slopes", torch.tensor([0.5, 0.25]))

    def forward(self, q, k, v, doc):
        def mask_mod(b, h, i, j):
            return (doc[i] == doc[j]) & (i >= j)

        def score_mod(s, b, h, i, j):
            return s + self.slopes[h] * (j - i) * torch.tensor(0.1) + doc[j].float()

        bm = create_block_mask(mask_mod, None, None, S, S, device="cpu")
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=bm)


def _inputs(seed, cuts):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, S, 8, generator=g) for _ in range(3))
    doc = torch.zeros(S, dtype=torch.int64)
    for c in cuts:
        doc[c:] += 1
    return q, k, v, doc


def test_no_dynamo_and_captures_stay_inputs(monkeypatch):
    def no_compile(*a, **kw):
        raise AssertionError("torch.compile called during export")

    model = RuntimeDocs()
    args = _inputs(0, [10, 20])
    with monkeypatch.context() as m:
        m.setattr(torch, "compile", no_compile)
        fn = torch_mlir_flex.compile(model, args, backend="reference")
    for seed, cuts in ((0, [10, 20]), (1, [3]), (2, [5, 6, 30])):
        new = _inputs(seed, cuts)
        torch.testing.assert_close(fn(*new), model(*new), rtol=1e-4, atol=1e-5)


def test_torch_restored_after_the_block():
    hop = importlib.import_module("torch._higher_order_ops.flex_attention")
    fa = importlib.import_module("torch.nn.attention.flex_attention")
    flag, trace = fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG, hop.trace_flex_attention
    with pytest.raises(RuntimeError, match="inside"):
        with direct_flex_tracing():
            assert fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG is True
            assert hop.trace_flex_attention.__wrapped__ is trace
            raise RuntimeError("inside")
    assert fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG is flag
    assert hop.trace_flex_attention is trace


def test_threads_take_turns_and_restore():
    import threading

    hop = importlib.import_module("torch._higher_order_ops.flex_attention")
    fa = importlib.import_module("torch.nn.attention.flex_attention")
    flag, trace = fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG, hop.trace_flex_attention
    inside, release = threading.Event(), threading.Event()
    order = []

    def first():
        with direct_flex_tracing():
            order.append("first in")
            inside.set()
            release.wait(10)
            order.append("first out")

    def second():
        inside.wait(10)
        with direct_flex_tracing():
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    inside.wait(10)
    release.set()
    for t in threads:
        t.join(10)
    assert order == ["first in", "first out", "second in"]
    assert fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG is flag
    assert hop.trace_flex_attention is trace


def test_environment_switch(monkeypatch):
    monkeypatch.setenv(ENV, "0")
    assert not direct_flex_trace.enabled()
    monkeypatch.setenv(ENV, "1")
    assert direct_flex_trace.enabled()
