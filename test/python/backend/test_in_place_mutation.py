"""Inputs and buffers a compiled program mutates are written where they
stand (destination passing, backend/calling.py `in_place`): the caller's
KV cache is updated by the compiled code itself, with no copy of the
whole cache per call, and nothing else in it changes.

    PYTHONPATH=python pytest -q test/python/backend/test_in_place_mutation.py
"""

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
# A decode step over a static cache (buffers k, v [1, 2, 32, 16]) written
# with index_copy_, attention causal in absolute positions.
from test_dynamo_dynamic import Cache as StaticCache

H, L, D = 2, 32, 16
CACHE_TYPE = f"memref<1x{H}x{L}x{D}xf32>"


def _step(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, H, n, D, generator=g) for _ in range(3)]


def test_buffers_updated_where_they_stand():
    model, ref = StaticCache().eval(), StaticCache().eval()
    pos = torch.arange(0, 4)
    fn = torch_mlir_flex.compile(model, (*_step(4, 0), pos), backend="tiled")
    assert fn.jit_function.in_place == {0: 0, 1: 1}  # results 0, 1 -> buffers k, v
    loops = fn.loops_ir()
    # No copy of a cache and no cache-sized temporary: the scatter loops
    # write the caller's buffers, the attention reads them.
    assert f"memref.alloc() {{alignment = 64 : i64}} : {CACHE_TYPE}" not in loops
    assert not [ln for ln in loops.splitlines() if "copy" in ln and CACHE_TYPE in ln]
    ptrs = (model.k.data_ptr(), model.v.data_ptr())
    for start in (0, 4, 5):
        pos = torch.arange(start, start + 4) if start == 0 else torch.arange(start, start + 1)
        if start:  # the compiled step is for 4 tokens: a second one for 1
            fn1 = torch_mlir_flex.compile(model, (*_step(1, 9), pos), backend="tiled")
            call = fn1
        else:
            call = fn
        before = model.k.clone()
        q, k, v = _step(len(pos), start)
        out = call(q, k, v, pos)
        torch.testing.assert_close(out, ref(q, k, v, pos), rtol=1e-5, atol=1e-5)
        assert torch.equal(model.k, ref.k) and torch.equal(model.v, ref.v)
        untouched = torch.ones(L, dtype=torch.bool)
        untouched[pos] = False
        assert torch.equal(model.k[:, :, untouched], before[:, :, untouched])
        assert (model.k.data_ptr(), model.v.data_ptr()) == ptrs


def write_rows(cache, x, idx):
    """A user input updated in place (index_put), then read."""
    cache[idx] = x
    return cache.sum(-1)


def test_user_input_updated_in_place():
    cache, ref = torch.zeros(6, 8), torch.zeros(6, 8)
    idx = torch.tensor([1, 4])
    fn = torch_mlir_flex.compile(write_rows, (cache, torch.randn(2, 8), idx), backend="tiled")
    assert fn.jit_function.in_place == {0: 0}
    ptr = cache.data_ptr()
    for rows in ([1, 4], [0, 5], [3, 2]):
        idx, x = torch.tensor(rows), torch.randn(2, 8)
        torch.testing.assert_close(fn(cache, x, idx), write_rows(ref, x, idx))
        assert torch.equal(cache, ref)
    assert cache.data_ptr() == ptr


def test_non_contiguous_input_is_written_back():
    """A cache passed as a transposed view: the call runs on a contiguous
    copy, which is written back into the caller's view."""
    cache = torch.zeros(6, 8)
    fn = torch_mlir_flex.compile(write_rows, (cache, torch.randn(2, 8), torch.tensor([0, 1])), backend="tiled")
    base, ref = torch.zeros(8, 6), torch.zeros(6, 8)
    view = base.t()
    assert not view.is_contiguous()
    idx, x = torch.tensor([2, 5]), torch.randn(2, 8)
    torch.testing.assert_close(fn(view, x, idx), write_rows(ref, x, idx))
    assert torch.equal(view, ref)
    assert torch.equal(base.t(), ref)


def test_out_of_range_index_raises_and_writes_nothing_outside():
    """IndexError as in eager, the cache as eager leaves it (the update
    before the bad index applied), and no write outside the tensor (it
    would land in the caller's memory: the process crashed in free())."""
    import pytest

    cache = torch.zeros(6, 8)
    fn = torch_mlir_flex.compile(write_rows, (cache, torch.randn(2, 8), torch.tensor([0, 1])), backend="tiled")
    guard = torch.zeros(64, 8)  # a neighbour on the heap
    ref = torch.zeros(6, 8)
    x = torch.randn(2, 8)
    for bad in ([0, 9], [2, -7], [4, 6]):
        with pytest.raises(IndexError):
            fn(cache, x, torch.tensor(bad))
        with pytest.raises(IndexError):
            write_rows(ref, x, torch.tensor(bad))
        assert torch.equal(cache, ref)
    assert not guard.any()
