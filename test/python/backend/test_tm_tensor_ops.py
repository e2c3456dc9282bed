"""Ops that torch-mlir lowers to tm_tensor (cumsum/cumprod -> scan,
sort/argsort/topk -> sort, scatter/scatter_add/scatter_reduce/index_put/
index_add/bincount -> scatter) and ops it does not know (histc, sort.stable;
decomposed before import) through compile(), against eager.

    PYTHONPATH=python pytest -q test/python/backend/test_tm_tensor_ops.py
"""

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

BACKENDS = ["reference", "tiled"]


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _check(fn, args, backend, exact=True):
    """Compiled vs eager; the inputs must not be modified by the call."""
    model = Fn(fn)
    compiled = torch_mlir_flex.compile(model, args, backend=backend)
    before = [a.clone() for a in args]
    got = compiled(*args)
    for a, b in zip(args, before):
        torch.testing.assert_close(a, b, atol=0, rtol=0, equal_nan=True,
                                   msg="the compiled function modified its input")
    exp = model(*args)
    got, exp = (got, exp) if isinstance(exp, tuple) else ((got,), (exp,))
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape
        tol = 0 if exact else 1e-6
        torch.testing.assert_close(g, e, atol=tol, rtol=tol, equal_nan=True)
    return compiled


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _distinct(*shape, seed=0):
    """Values without ties (sort order then does not depend on stability)."""
    n = 1
    for s in shape:
        n *= s
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).float().view(*shape) / 7


# --- scan ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_float_each_dim(backend, dim):
    _check(lambda x: torch.cumsum(x, dim), (_randn(3, 5, 4),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_int_accumulates_in_int64(backend):
    x = torch.randint(-1000, 1000, (4, 33), generator=torch.Generator().manual_seed(1), dtype=torch.int32)
    c = _check(lambda a: torch.cumsum(a, 1), (x,), backend)
    assert "tm_tensor" not in c.linalg_ir and "scf.for" in c.linalg_ir


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_bool_mask_positions(backend):
    """OPT-style positions / HF packed-sequence detection."""
    def positions(mask):
        return (torch.cumsum(mask, dim=1) * mask - 1).long()
    m = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.int64)
    _check(positions, (m,), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumprod(backend):
    _check(lambda x: torch.cumprod(x, 0), (_randn(6, 3) * 0.5 + 1,), backend)


# --- sort ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_values_and_indices(backend, descending):
    _check(lambda x: torch.sort(x, dim=1, descending=descending), (_distinct(3, 37),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_ties_nan_inf(backend, descending):
    x = torch.tensor([[1.0, float("nan"), 3.0, -1.0, float("nan"), float("inf"), -float("inf"), 1.0, 3.0, -0.0, 0.0]])
    _check(lambda a: torch.sort(a, dim=-1, stable=True, descending=descending), (x,), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_int_dim0(backend):
    x = torch.randint(0, 4, (50, 3), generator=torch.Generator().manual_seed(2))
    _check(lambda a: torch.sort(a, dim=0, stable=True), (x,), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_argsort(backend):
    _check(lambda x: torch.argsort(x, dim=-1, descending=True), (_distinct(4, 9),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(backend, largest):
    _check(lambda x: torch.topk(x, 3, dim=-1, largest=largest), (_distinct(5, 8),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_moe_top2_routing(backend):
    """Mixtral-style router: softmax, top-2, renormalize, one-hot expert mask."""
    def route(h, w):
        logits = h @ w
        probs = F.softmax(logits, dim=-1, dtype=torch.float)
        weights, experts = torch.topk(probs, 2, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        mask = F.one_hot(experts, num_classes=8).permute(2, 1, 0)
        return weights, experts, mask
    _check(route, (_randn(6, 16), _randn(16, 8, seed=1)), backend, exact=False)


# --- scatter ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_add(backend):
    idx = torch.randint(0, 5, (3, 7), generator=torch.Generator().manual_seed(3))
    _check(lambda s, i: torch.zeros(3, 5).scatter_add(1, i, s), (_randn(3, 7), idx), backend, exact=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_src_and_reduce(backend):
    idx = torch.tensor([[0, 2, 4], [1, 3, 0]])
    src = _randn(2, 3)
    _check(lambda s, i: torch.zeros(2, 5).scatter(1, i, s), (src, idx), backend)
    _check(lambda s, i: torch.full((2, 5), -1.0).scatter_reduce(1, i, s, "amax"), (src, idx), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_put_accumulate_negative_indices(backend):
    idx = torch.tensor([0, 1, -1, 3, 1])
    _check(lambda v, i: torch.zeros(5).index_put((i,), v, accumulate=True), (_randn(5), idx), backend, exact=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_put_into_input_does_not_modify_it(backend):
    _check(lambda x, i: x.index_put((i,), torch.ones(2, 4)), (_randn(5, 4), torch.tensor([3, 0])), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_add(backend):
    """MoE expert outputs summed back per token (index_add_)."""
    idx = torch.tensor([0, 2, 2, 4, 0, 1])
    _check(lambda x, v, i: x.index_add(0, i, v), (_randn(5, 3), _randn(6, 3, seed=1), idx), backend, exact=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bincount_data_dependent_size_is_refused(backend):
    """bincount's result length depends on the data (max + 1): the caller
    allocates outputs before the call (docs/runtime.md), so it is refused
    with a clear error instead of being run."""
    x = torch.tensor([0, 1, 1, 3, 7, 3, 3])
    with pytest.raises(torch_mlir_flex.FlexCompileError, match="cannot be computed from the input shapes"):
        torch_mlir_flex.compile(Fn(lambda a: torch.bincount(a, minlength=8)), (x,), backend=backend)


# --- histc (decomposed before import) --------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_histc_edges(backend):
    """Values == max go to the last bin; outside [min, max] and NaN ignored."""
    x = torch.tensor([0.0, 1, 1, 3, 2.5, 3.0000002, -0.1, float("nan"), 0.9999999, 2.9999998])
    _check(lambda a: torch.histc(a, bins=4, min=0, max=3), (x,), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_histc_moe_expert_counts(backend):
    """tokens per expert as transformers' MoE code counts them."""
    experts = torch.randint(0, 8, (12, 2), generator=torch.Generator().manual_seed(4))
    _check(lambda e: torch.histc(e.float(), bins=8, min=0, max=7), (experts,), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_histc_data_range(backend):
    _check(lambda a: torch.histc(a, bins=7), (_randn(3, 40),), backend)
    _check(lambda a: torch.histc(a, bins=3, min=2, max=2), (torch.tensor([1.0, 2, 3, 4]),), backend)


# --- inside a flex_attention model -----------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_document_ids_feed_mask(backend):
    """Document ids from a cumsum of sequence starts, captured by mask_mod."""
    def model(q, k, v, starts):
        doc = torch.cumsum(starts, 0)

        def same_doc(b, h, m, n):
            return doc[m] == doc[n]
        from torch.nn.attention.flex_attention import create_block_mask
        bm = create_block_mask(same_doc, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)
    q, k, v = (_randn(1, 2, 16, 8, seed=i) for i in range(3))
    starts = torch.zeros(16, dtype=torch.int64)
    starts[[5, 11]] = 1
    _check(model, (q, k, v, starts), backend, exact=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_length_sort_and_cumsum(backend):
    """A dynamic line length (the merge sort's pass count is computed at run time)."""
    from torch.export import Dim

    def fn(x):
        s = torch.sort(x, dim=1, descending=True, stable=True)
        return s.values, s.indices, torch.cumsum(x, 1)
    x = torch.randint(0, 5, (2, 9), generator=torch.Generator().manual_seed(5)).float()
    compiled = torch_mlir_flex.compile(Fn(fn), (x,), backend=backend,
                                       dynamic_shapes={"args": ({1: Dim("S", min=2, max=4096)},)})
    for n in (2, 17, 64):
        y = torch.randint(0, 5, (2, n), generator=torch.Generator().manual_seed(n)).float()
        for g, e in zip(compiled(y), fn(y)):
            assert torch.equal(g, e)
