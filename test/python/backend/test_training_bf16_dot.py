"""bf16 training through `torch.compile(backend="torch_mlir_flex")` with the
tiled backward's `bf16-dot` (its five contractions on AVX512-BF16 dot
products, P and dS rounded to bf16; `tiled_pipeline(bf16_dot=True,
bf16_dot_backward=True)`, off in the default pipelines) forced on and
forced off: gradients against torch's math in float64 on the same bf16
inputs.

    PYTHONPATH=python pytest -q test/python/backend/test_training_bf16_dot.py

Tolerance: bf16 gradients are rounded once (relative 2^-8) and the products
of the dot kernels take P and dS rounded to bf16 (as torch's flex backward
and FA2 kernels do); 2e-2 as the e2e suite's bf16 tolerance (TOL_BF16),
which torch's own bf16 flex tests also use as their order of magnitude.
Measured here (causal S=1024 D=64/128 H=8): max |error| 0.005-0.015 for
both paths, SDPA's bf16 backward 0.009-0.026.
"""

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo
from torch_mlir_flex.backend import PIPELINES, cpu_features
from torch_mlir_flex.backend.pipelines import tiled_pipeline
from torch_mlir_flex.dynamo.device_check import allow_cpu_backward

dynamo.register()

TOL = 2e-2
needs_bf16_cpu = pytest.mark.skipif(not cpu_features.host_has_avx512_bf16(),
                                    reason="host CPU has no avx512_bf16")
BF16_DOT = [pytest.param(True, marks=needs_bf16_cpu, id="dot"),
            pytest.param(False, id="generic")]


def _pipeline(monkeypatch, bf16_dot):
    text = tiled_pipeline(bf16_dot=bf16_dot, bf16_dot_backward=True)
    backward = text.split("flex-backward-to-flash", 1)[1].split("}", 1)[0]
    assert ("bf16-dot=1" in backward) == bf16_dot
    name = f"tiled-test-bf16-dot-{int(bf16_dot)}"
    monkeypatch.setitem(PIPELINES, name, text)
    return name


def _grads(fn, tensors, grad, backend=None):
    """Gradients of (out * grad).sum(): compiled with `backend` on the bf16
    tensors, else torch's math in float64."""
    if backend:
        leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
        out = torch.compile(fn, backend=dynamo.NAME, options={"backend": backend})(*leaves)
        out.backward(grad)
    else:
        leaves = [t.detach().double().requires_grad_(True) for t in tensors]
        with allow_cpu_backward():
            fn(*leaves).backward(grad.double())
    return [t.grad for t in leaves]


def _inputs(hq, hkv, s, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, hq, s, d, generator=g).bfloat16()
    k = torch.randn(1, hkv, s, d, generator=g).bfloat16()
    v = torch.randn(1, hkv, s, d, generator=g).bfloat16()
    grad = torch.randn(1, hq, s, d, generator=g).bfloat16()
    return (q, k, v), grad


def _check(fn, tensors, grad, backend, fresh):
    delta, warned = fresh
    got = _grads(fn, tensors, grad, backend)
    ref = _grads(fn, tensors, grad)
    for i, (a, b) in enumerate(zip(got, ref)):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.double(), b, rtol=TOL, atol=TOL, msg=f"grad {i}")
    assert delta("backward") == 1 and delta("eager") == 0, (dict(dynamo.stats), list(warned))


@pytest.mark.parametrize("bf16_dot", BF16_DOT)
@pytest.mark.parametrize("s, d", [(128, 64), (100, 32)], ids=["128x64", "100x32-padded"])
def test_causal(bf16_dot, s, d, fresh, monkeypatch):
    backend = _pipeline(monkeypatch, bf16_dot)
    bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, s, s, device="cpu")
    tensors, grad = _inputs(2, 2, s, d)
    _check(lambda q, k, v: flex_attention(q, k, v, block_mask=bm), tensors, grad, backend, fresh)


@pytest.mark.parametrize("bf16_dot", BF16_DOT)
def test_gqa_softcap(bf16_dot, fresh, monkeypatch):
    backend = _pipeline(monkeypatch, bf16_dot)

    def score(x, b, h, q, kv):
        return 4.0 * torch.tanh(x / 4.0)

    tensors, grad = _inputs(4, 2, 64, 16, seed=1)
    _check(lambda q, k, v: flex_attention(q, k, v, score_mod=score, enable_gqa=True),
           tensors, grad, backend, fresh)


def test_default_pipelines_keep_the_backward_on_fma():
    # vdpbf16ps is half the FMA's FLOP rate on the project's host (see
    # pipelines.py): the default pipelines leave the backward's bf16-dot off.
    for text in (tiled_pipeline(), PIPELINES["tiled"]):
        backward = text.split("flex-backward-to-flash", 1)[1].split("}", 1)[0]
        assert "bf16-dot" not in backward
