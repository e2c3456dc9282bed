"""torch.compile(model, backend="torch_mlir_flex"): numerics against eager,
graph breaks, no recompilation for the same shapes, eager fallback with a
logged reason.

    PYTHONPATH=python pytest -q test/python/backend/test_dynamo.py
"""

import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo

warnings.filterwarnings("ignore")
dynamo.register()  # no-op when the entry point is installed


def causal(b, h, q, kv):
    return q >= kv


S = 64
BM = create_block_mask(causal, None, None, S, S, device="cpu")


class AttnProj(torch.nn.Module):
    """flex_attention (score_mod + block mask) then a projection."""

    def __init__(self, E=32):
        super().__init__()
        self.proj = torch.nn.Linear(E, E)

    def forward(self, q, k, v):
        o = flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + 0.1 * (m - n), block_mask=BM)
        return self.proj(o).relu()


class BrokenBlock(torch.nn.Module):
    """Two graphs: attention, a graph break, then an MLP on the result."""

    def __init__(self, E=32):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(E, 2 * E), torch.nn.SiLU(), torch.nn.Linear(2 * E, E))

    def forward(self, q, k, v):
        o = flex_attention(q, k, v, block_mask=BM)
        torch._dynamo.graph_break()
        return self.mlp(o) + o


class SortTail(torch.nn.Module):
    """aten.kthvalue (tm_tensor.topk) has no lowering in our pipeline: the
    graph runs eagerly."""

    def forward(self, x):
        return torch.kthvalue(x * 2.0, 2, dim=-1).values


def mlp_fn(x, w):
    return torch.tanh(x @ w).sum(dim=-1, keepdim=True) * x


def qkv(S=S, E=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 2, S, E, generator=g) for _ in range(3))


def test_registered_by_name():
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend(dynamo.NAME) is dynamo.flex_backend


def test_attention_projection_matches_eager_and_does_not_recompile(fresh):
    delta, warned = fresh
    model = AttnProj().eval()
    fn = torch.compile(model, backend="torch_mlir_flex")
    args = qkv()
    with torch.no_grad():
        ref = model(*args)
        out = fn(*args)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        assert delta("compiled") == 1 and delta("eager") == 0, warned
        args2 = qkv(seed=1)  # same shapes: the compiled graph is reused
        torch.testing.assert_close(fn(*args2), model(*args2), rtol=1e-4, atol=1e-4)
    assert delta("graphs") == 1
    assert warned == []


def test_graph_break_compiles_both_graphs(fresh):
    delta, warned = fresh
    model = BrokenBlock().eval()
    fn = torch.compile(model, backend="torch_mlir_flex")
    args = qkv()
    with torch.no_grad():
        torch.testing.assert_close(fn(*args), model(*args), rtol=1e-4, atol=1e-4)
        fn(*args)
    assert delta("graphs") == 2 and delta("compiled") == 2, warned


def test_plain_function_without_attention(fresh):
    delta, _ = fresh

    x, w = torch.randn(8, 16), torch.randn(16, 16)
    out = torch.compile(mlp_fn, backend="torch_mlir_flex")(x, w)
    torch.testing.assert_close(out, mlp_fn(x, w), rtol=1e-5, atol=1e-5)
    assert delta("compiled") == 1


def test_unsupported_graph_falls_back_with_warning(fresh):
    delta, warned = fresh
    x = torch.randn(4, 16)
    out = torch.compile(SortTail(), backend="torch_mlir_flex")(x)
    torch.testing.assert_close(out, SortTail()(x))
    assert delta("eager") == 1 and delta("compiled") == 0
    assert len(warned) == 1 and "eager PyTorch" in warned[0] and "kthvalue" in warned[0], warned


def test_training_mode_compiles_forward_and_backward(fresh):
    """Grad mode on and parameters that require grad: AOTAutograd's forward
    and backward graphs are both ours (docs/training.md)."""
    delta, warned = fresh
    model = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    out = torch.compile(model, backend="torch_mlir_flex")(x)
    out.sum().backward()
    torch.testing.assert_close(model.weight.grad, torch.ones(8, 1) * x.sum(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.bias.grad, torch.full((8,), 2.0))
    assert delta("forward") == 1 and delta("backward") == 1 and delta("eager") == 0, warned


def test_new_shape_with_dynamic_false_recompiles(fresh):
    delta, warned = fresh
    fn = torch.compile(mlp_fn, backend="torch_mlir_flex", dynamic=False)
    w = torch.randn(16, 16)
    for rows in (8, 8, 5):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(fn(x, w), mlp_fn(x, w), rtol=1e-5, atol=1e-5)
    assert delta("compiled") == 2 and warned == []


def test_dynamic_sizes_compile_once_for_the_range(fresh):
    """Automatic dynamic: the second shape compiles a graph with a dynamic
    dim, which then serves every later size (no recompilation, no eager)."""
    delta, warned = fresh
    fn = torch.compile(mlp_fn, backend="torch_mlir_flex")
    w = torch.randn(16, 16)
    for rows in (8, 5, 7, 12, 3):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(fn(x, w), mlp_fn(x, w), rtol=1e-5, atol=1e-5)
    assert delta("compiled") == 2 and delta("dynamic") == 1 and delta("eager") == 0, warned
    assert warned == []
