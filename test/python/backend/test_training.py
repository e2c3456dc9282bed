"""Training through `torch.compile(backend="torch_mlir_flex")`: flex_attention's
backward compiled (flex.attention_backward), gradients against torch's own
math in float64 (eager flex_attention with the CPU check lifted:
`sdpa_dense_backward`)."""

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo
from torch_mlir_flex.dynamo.device_check import allow_cpu_backward

dynamo.register()

B, H, S, D = 1, 2, 32, 8


def _inputs(b=B, hq=H, hkv=H, s=S, d=D, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, s, d, generator=g)
    k = torch.randn(b, hkv, s, d, generator=g)
    v = torch.randn(b, hkv, s, d, generator=g)
    return q, k, v


def _grads(fn, tensors, compiled: bool, weight=None):
    """Gradients of sum(out * weight) w.r.t. `tensors` (copies; float64 when
    not compiled)."""
    dtype = torch.float32 if compiled else torch.float64
    leaves = [t.detach().to(dtype).requires_grad_(True) for t in tensors]
    if compiled:
        out = torch.compile(fn, backend=dynamo.NAME)(*leaves)
    else:
        with allow_cpu_backward():
            out = fn(*leaves)
    outs = out if isinstance(out, tuple) else (out,)
    loss = 0
    for i, o in enumerate(outs):
        w = torch.linspace(-1, 1, o.numel(), dtype=o.dtype).reshape(o.shape)
        loss = loss + (o * w).sum()
    loss.backward()
    return [o.detach() for o in outs], [t.grad for t in leaves]


def _check(fn, tensors, fresh, rtol=1e-4, atol=1e-5):
    delta, warned = fresh
    got_out, got = _grads(fn, tensors, compiled=True)
    ref_out, ref = _grads(fn, tensors, compiled=False)
    for a, b in zip(got_out, ref_out):
        torch.testing.assert_close(a.double(), b, rtol=rtol, atol=atol)
    for i, (a, b) in enumerate(zip(got, ref)):
        assert a is not None, f"no gradient for input {i}"
        torch.testing.assert_close(a.double(), b, rtol=rtol, atol=atol, msg=f"grad {i}")
    assert delta("forward") == 1 and delta("backward") == 1, (dict(dynamo.stats), list(warned))
    assert delta("eager") == 0, list(warned)


def test_plain(fresh):
    _check(lambda q, k, v: flex_attention(q, k, v), _inputs(), fresh)


def test_causal_block_mask(fresh):
    bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, S, S, device="cpu", BLOCK_SIZE=8)
    _check(lambda q, k, v: flex_attention(q, k, v, block_mask=bm), _inputs(), fresh)


def test_softcap_and_alibi(fresh):
    def score(s, b, h, q, kv):
        s = 5.0 * torch.tanh(s / 5.0)
        return s - (h + 1) * 0.25 * (q - kv).abs()

    _check(lambda q, k, v: flex_attention(q, k, v, score_mod=score), _inputs(), fresh)


def test_gqa(fresh):
    _check(lambda q, k, v: flex_attention(q, k, v, enable_gqa=True), _inputs(hq=4, hkv=2), fresh)


def test_learnable_bias(fresh):
    """A relative-position bias indexed by (h, q - kv + S - 1): its gradient
    is a scatter-add over every kept point."""
    bias0 = torch.randn(H, 2 * S - 1) * 0.1

    def fn(q, k, v, bias):
        def score(s, b, h, qi, ki):
            return s + bias[h, qi - ki + S - 1]

        def causal(b, h, qi, ki):
            return qi >= ki

        bm = create_block_mask(causal, None, None, S, S, device="cpu", BLOCK_SIZE=8)
        return flex_attention(q, k, v, score_mod=score, block_mask=bm)

    _check(fn, _inputs() + (bias0,), fresh)


def test_logsumexp_in_loss(fresh):
    def fn(q, k, v):
        out, lse = flex_attention(q, k, v, return_lse=True)
        return out, lse

    _check(fn, _inputs(), fresh)


def test_eager_check_still_raises():
    q, k, v = (t.requires_grad_(True) for t in _inputs())
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q, k, v)
    with pytest.raises(Exception, match="backward on CPU"):
        torch.compile(lambda q, k, v: flex_attention(q, k, v), backend="eager")(q, k, v)


def test_dynamic_sizes_compile_once(fresh):
    """dynamic=True: the forward and backward graphs compile once for every
    sequence length."""
    delta, warned = fresh

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s - 0.1 * (qi - ki).abs())

    compiled = torch.compile(fn, backend=dynamo.NAME, dynamic=True)
    for s in (32, 48, 40):
        q, k, v = (t.requires_grad_(True) for t in _inputs(s=s, seed=s))
        compiled(q, k, v).sum().backward()
        ref = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
        with allow_cpu_backward():
            fn(*ref).sum().backward()
        for a, b in zip((q, k, v), ref):
            torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-5)
    assert delta("forward") == 1 and delta("backward") == 1 and delta("eager") == 0, list(warned)


def test_compile_train_true(fresh):
    """torch_mlir_flex.compile(model, args, train=True): a callable that
    supports autograd (the model through this backend)."""
    delta, warned = fresh
    proj = torch.nn.Linear(D, D)

    def fn(q, k, v):
        return proj(flex_attention(q, k, v))

    q, k, v = (t.requires_grad_(True) for t in _inputs())
    compiled = torch_mlir_flex.compile(fn, (q, k, v), train=True)
    compiled(q, k, v).sum().backward()
    assert q.grad is not None and proj.weight.grad is not None
    assert delta("forward") == 1 and delta("backward") == 1 and delta("eager") == 0, list(warned)
