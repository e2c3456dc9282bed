"""A mutated input written through a view taken inside the graph (a KV
cache's `cache.view(...)[rows].index_copy_`, `cache[:, :, 3:5].copy_`,
`cache[:, :, 5] = x`, `cache.view(...)[:, idx] = x`) is updated where it
stands: the compiled code writes only the rows the update names into the
caller's buffer, with no cache-sized copy or temporary (one used to be made
per call: a private copy of the view before the scatter loops, or the
`where(arange == i, x, cache)` that torch-mlir's select_scatter
decomposition is). Numerics against eager PyTorch, the storage kept
(data_ptr) and the IR checked for a cache-sized copy.

    PYTHONPATH=python pytest -q test/python/backend/test_in_place_views.py
"""

import math
import re
import warnings

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from torch_mlir_flex import dynamo

warnings.filterwarnings("ignore")
dynamo.register()

B, H, L, D = 2, 3, 16, 8
N = 2  # rows written per call


def view_index_copy(cache, new, idx):
    """index_copy_ into a slice of a reshaped view (rows 2..5 of B*H)."""
    cache.view(B * H, L, D)[2:6].index_copy_(1, idx, new.view(B * H, N, D)[2:6])
    return new.sum()


def select_index_copy(cache, new, idx):
    cache[1].index_copy_(1, idx, new[1])
    return new.sum()


def slice_copy(cache, new, idx):
    cache.narrow(2, 3, N).copy_(new * 2)
    return new.sum()


def select_copy(cache, new, idx):
    """select_scatter, a negative index."""
    cache[:, :, -2].copy_(new[:, :, 0])
    return new.sum()


def index_put_view(cache, new, idx):
    cache.view(B * H, L, D)[:, idx] = new.view(B * H, N, D)
    return new.sum()


def index_put_view_reshaped(cache, new, idx):
    """index_put_ on a view that splits the last dimension."""
    cache.view(B, H, L, 2, D // 2)[:, :, idx] = new.view(B, H, N, 2, D // 2)
    return new.sum()


def two_writes_one_view(cache, new, idx):
    """transformers' paged update: K then V rows written through one
    flattened view, then rows of it read (the second scatter starts from
    the first one's result)."""
    rows = cache.flatten(0, 1)  # [B * H, L, D]
    rows.index_copy_(1, idx, new.flatten(0, 1))
    rows.index_copy_(1, (idx + 5) % L, new.flatten(0, 1) * 3)
    return rows.index_select(1, idx).sum(1)


FORMS = [view_index_copy, select_index_copy, slice_copy, select_copy, index_put_view,
         index_put_view_reshaped, two_writes_one_view]


def _call_args(seed, rows):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, H, N, D, generator=g), torch.tensor(rows)


_BUFFER = re.compile(r"memref<((?:\d+x)+)f32")


def _big_f32_buffers(loops: str):
    """Lines of the bufferized IR that allocate or copy an f32 buffer larger
    than the rows written (a copy of the cache or of the view written
    through, the full copy this file guards against)."""
    written = B * H * N * D

    def big(ln):
        return [d for d in _BUFFER.findall(ln)
                if math.prod(int(n) for n in d.rstrip("x").split("x")) > written]

    found = []
    for ln in loops.splitlines():
        if re.search(r"memref\.alloc|memref\.copy|linalg\.copy", ln) and big(ln):
            found.append(ln.strip())
        # An outlined loop nest given two such buffers: a copy of the cache
        # into itself or into another buffer (flex-in-place-results' copy
        # back when the result is not the argument's buffer).
        elif ln.strip().startswith("call @") and len(big(ln.split(" : ")[-1])) > 1:
            found.append(ln.strip())
    return found


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_written_in_place_without_a_cache_copy(form):
    cache = torch.randn(B, H, L, D)
    ref = cache.clone()
    fn = torch_mlir_flex.compile(form, (cache, *_call_args(0, [1, 4])), backend="tiled")
    assert fn.jit_function.in_place == {0: 0}
    assert _big_f32_buffers(fn.loops_ir()) == []
    ptr = cache.data_ptr()
    for seed, rows in ((1, [1, 4]), (2, [15, 0]), (3, [7, 12])):
        new, idx = _call_args(seed, rows)
        torch.testing.assert_close(fn(cache, new, idx), form(ref, new, idx))
        assert torch.equal(cache, ref)
    assert cache.data_ptr() == ptr


@pytest.mark.parametrize("form", [view_index_copy, select_copy, index_put_view,
                                  two_writes_one_view], ids=lambda f: f.__name__)
def test_dynamo_updates_the_callers_tensor(form):
    before = dynamo.stats["eager"]
    fn = torch.compile(form, backend="torch_mlir_flex")
    cache = torch.randn(B, H, L, D)
    ref = cache.clone()
    ptr = cache.data_ptr()
    for seed, rows in ((4, [2, 9]), (5, [3, 11])):
        new, idx = _call_args(seed, rows)
        torch.testing.assert_close(fn(cache, new, idx), form(ref, new, idx))
        assert torch.equal(cache, ref)
    assert cache.data_ptr() == ptr
    assert dynamo.stats["eager"] == before


def index_copy_of_a_view(cache, new, idx):
    """Out of place on a view of an input the program does not mutate: the
    input must stay as it was."""
    return cache.view(B * H, L, D)[2:6].index_copy(1, idx, new.view(B * H, N, D)[2:6])


def old_value_read_after(cache, new, idx):
    """The input's old value is read after the update through a view: the
    update may not overwrite it before that read."""
    updated = torch.ops.aten.index_put(cache.view(B * H, L, D), [None, idx],
                                       new.view(B * H, N, D))
    return updated.sum(), cache.sum(), cache[:, :, 0].clone()


@pytest.mark.parametrize("form", [index_copy_of_a_view, old_value_read_after],
                         ids=lambda f: f.__name__)
def test_inputs_not_written_when_not_mutated(form):
    cache = torch.randn(B, H, L, D)
    keep = cache.clone()
    fn = torch_mlir_flex.compile(form, (cache, *_call_args(0, [1, 4])), backend="tiled")
    new, idx = _call_args(6, [0, 5])
    torch.testing.assert_close(fn(cache, new, idx), form(keep.clone(), new, idx))
    assert torch.equal(cache, keep)
