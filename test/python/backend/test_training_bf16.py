"""bf16 training through `torch.compile(backend="torch_mlir_flex")` with the
tiled backward's five contractions on AMX tiles (`tiled_pipeline(amx=True)`,
the default where the host has amx_bf16), on AVX512-BF16 dot products
(`bf16_dot_backward=True`, off by default) and on the widening FMA kernels:
gradients against torch's math in float64 on the same bf16 inputs.

    PYTHONPATH=python pytest -q test/python/backend/test_training_bf16.py

Tolerance: bf16 gradients are rounded once (relative 2^-8) and the AMX and
dot products take P and dS rounded to bf16 (as torch's flex backward and
FA2 kernels do); 2e-2 as the e2e suite's bf16 tolerance (TOL_BF16), which
torch's own bf16 flex tests also use as their order of magnitude.
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
needs_amx = pytest.mark.skipif(not cpu_features.host_has_amx_bf16(),
                               reason="host CPU has no amx_bf16 (or no AMX permission)")
MODES = [pytest.param("amx", marks=needs_amx, id="amx"),
         pytest.param("dot", marks=needs_bf16_cpu, id="dot"),
         pytest.param("generic", id="generic")]


def _pipeline(monkeypatch, mode):
    text = tiled_pipeline(bf16_dot=mode == "dot", bf16_dot_backward=True, amx=mode == "amx")
    backward = text.split("flex-backward-to-flash", 1)[1].split("}", 1)[0]
    assert ("bf16-dot=1" in backward) == (mode == "dot")
    assert ("amx=1" in backward) == (mode == "amx")
    name = f"tiled-test-bf16-{mode}"
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


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("s, d", [(128, 64), (100, 32)], ids=["128x64", "100x32-padded"])
def test_causal(mode, s, d, fresh, monkeypatch):
    backend = _pipeline(monkeypatch, mode)
    bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, s, s, device="cpu")
    tensors, grad = _inputs(2, 2, s, d)
    _check(lambda q, k, v: flex_attention(q, k, v, block_mask=bm), tensors, grad, backend, fresh)


@pytest.mark.parametrize("mode", MODES)
def test_gqa_softcap(mode, fresh, monkeypatch):
    backend = _pipeline(monkeypatch, mode)

    def score(x, b, h, q, kv):
        return 4.0 * torch.tanh(x / 4.0)

    tensors, grad = _inputs(4, 2, 64, 32, seed=1)
    _check(lambda q, k, v: flex_attention(q, k, v, score_mod=score, enable_gqa=True),
           tensors, grad, backend, fresh)


def test_default_pipelines():
    # vdpbf16ps is half the FMA's FLOP rate on the project's host (see
    # pipelines.py): the default pipelines leave the backward's bf16-dot
    # off; AMX where the host has it.
    for text in (tiled_pipeline(), PIPELINES["tiled"]):
        backward = text.split("flex-backward-to-flash", 1)[1].split("}", 1)[0]
        assert "bf16-dot" not in backward
        assert ("amx=1" in backward) == cpu_features.amx_default()
        assert ("flex-amx-contractions" in text) == cpu_features.amx_default()


def test_amx_default_follows_host_and_env(monkeypatch):
    monkeypatch.setenv(cpu_features.AMX_ENV, "0")
    backward = tiled_pipeline().split("flex-backward-to-flash", 1)[1].split("}", 1)[0]
    assert "amx" not in backward and "enable-amx" not in tiled_pipeline()
    # Without the vector kernels the backward stays on linalg.generic.
    monkeypatch.delenv(cpu_features.AMX_ENV)
    if cpu_features.host_has_amx_bf16():
        assert "amx=1" not in tiled_pipeline(vectorize=False, amx=True)
    monkeypatch.setattr(cpu_features, "host_cpu_flags", lambda: frozenset({"avx512f"}))
    with pytest.raises(ValueError, match="amx_bf16"):
        tiled_pipeline(amx=True)
    assert "amx" not in tiled_pipeline()
