"""How the compiled code's kept heap blocks are reused and which calls they serve
(lib/Runtime/FlexAlloc.c, `blas.heap_scope`, $FLEX_ALLOC_CACHE_SCOPE), and
the compiler's memory given back after a compile
(backend/compiler_memory.py): docs/runtime.md "The heap's kept blocks" and
"Memory after a compile", issue #42.

- a kept block serves an allocation of another size (grown or cut to it,
  its pages reused) before anything new is mapped, and results of 256 KiB
  or more come from that heap: a training step's forward and backward,
  whose sizes differ, reuse each other's blocks;
- scopes: "process" (default): kept blocks serve any call; "function": a
  call of another compiled function frees the blocks the last one kept;
  "call": nothing is kept past the call;
- after a whole model's compile, the compiler's library pages are no
  longer resident, and compiling and running again still works.

    PYTHONPATH=python pytest -q test/python/backend/test_heap_scope.py
"""

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import ctypes

import pytest
import torch

from torch_mlir_flex.backend import blas, compiler_memory

N_F, N_G = 512, 640  # temporaries of 1 MiB and 1.6 MiB: kept (256 KiB and more), of distinct sizes


class Temps(torch.nn.Module):
    """A temporary of x's size between two elementwise steps and a product."""

    def forward(self, x):
        a = torch.exp(x * 0.1)
        b = torch.sin(x) + a.t()
        return (a @ b).sum(0)


def _compiled(n, seed):
    x = torch.randn(n, n, generator=torch.Generator().manual_seed(seed))
    return torch_mlir_flex.compile(Temps(), (x,)), x


@pytest.fixture
def scope():
    before = blas.heap_scope()
    yield blas.heap_scope
    blas.heap_scope(before)


@pytest.fixture(scope="module")
def two():
    (f, x), (g, y) = _compiled(N_F, 0), _compiled(N_G, 1)
    return f, x, g, y


def _kept_after(fn, x):
    torch.testing.assert_close(fn(x), Temps()(x), rtol=1e-4, atol=1e-3)
    return blas.kept_bytes()


def _pattern(addr, n, byte):
    ctypes.memset(addr, byte, n)


def _all(addr, n, byte):
    return ctypes.string_at(addr, n) == bytes([byte]) * n


def test_kept_blocks_serve_other_sizes(scope):
    """A kept block of another size is grown (mremap) or cut to the size
    asked, its pages reused (what was written there is still there, where a
    new mapping would be zeros), before anything new is mapped; one of the
    exact size first."""
    scope("process")
    alloc, free = blas.heap_functions()
    blas.release_memory()
    mib = 1 << 20
    a = alloc(64, mib)
    _pattern(a, mib, 7)
    free(a)
    assert blas.kept_bytes() > mib
    b = alloc(64, 2 * mib)  # grown from a's block: a's pages first
    assert blas.kept_bytes() == 0
    assert _all(b, mib, 7)
    _pattern(b, 2 * mib, 9)
    free(b)
    c = alloc(64, mib)  # cut from b's block, its tail unmapped
    assert blas.kept_bytes() == 0
    assert _all(c, mib, 9)
    d = alloc(64, mib)  # nothing kept: a new mapping
    assert _all(d, mib, 0)
    free(c)
    free(d)
    e = alloc(64, mib)  # one of the exact size
    assert e in (c, d) and blas.kept_bytes() > mib
    free(e)
    blas.release_memory()
    assert blas.kept_bytes() == 0


def test_results_of_256_kib_come_from_the_heap(two):
    """Results as large as a kept block come from the runtime's heap (a
    training forward's saved activations): the compiled code's temporaries
    and the results reuse each other's blocks."""
    from torch_mlir_flex.backend import out_heap

    f, x, _, _ = two
    out = f(x)  # 512 floats: small, torch's
    assert out.untyped_storage().resizable()
    big = out_heap.empty((N_F, N_F), torch.float32)
    assert not big.untyped_storage().resizable()  # a heap block
    assert out_heap.MIN_BYTES <= N_F * N_F * 4


def test_function_scope_frees_another_functions_blocks(two, scope):
    f, x, g, y = two
    assert scope("function") == "function"
    kf = _kept_after(f, x)
    assert kf >= N_F * N_F * 4  # f's temporaries kept for its next call
    assert _kept_after(f, x) == kf  # ... and reused by it
    kg = _kept_after(g, y)
    assert kg >= N_G * N_G * 4
    assert _kept_after(g, y) == kg
    assert _kept_after(f, x) == kf  # g's blocks went at f's call: f's own only
    blas.release_memory()
    assert blas.kept_bytes() == 0


def test_process_scope_is_the_default_and_keeps_across_functions(two, scope):
    f, x, g, y = two
    assert scope() == "process"  # (no $FLEX_ALLOC_CACHE_SCOPE in the tests' environment)
    blas.release_memory()
    kf = _kept_after(f, x)
    assert kf > 0
    assert _kept_after(g, y) > 0 and _kept_after(f, x) > 0


def test_call_scope_keeps_nothing_past_the_call(two, scope):
    f, x, g, y = two
    assert scope("call") == "call"
    for fn, arg in ((f, x), (f, x), (g, y)):
        assert _kept_after(fn, arg) == 0
    blas.live_peak_bytes(reset=True)
    f(x)
    assert blas.live_peak_bytes() >= N_F * N_F * 4  # the call's own blocks were there


def test_unknown_scope_is_refused():
    with pytest.raises(torch_mlir_flex.FlexBackendError, match="heap scope"):
        blas.heap_scope("thread")


def test_compiler_pages_are_dropped_after_a_compile(two, monkeypatch):
    f, x, _, _ = two
    monkeypatch.setenv("TORCH_MLIR_FLEX_CACHE", "0")  # the compile below runs LLVM here
    compiler_memory.release()  # a compile's end (the module here is small: forced)
    assert compiler_memory.last["trimmed"]
    resident = sum(kib for _, _, kib in compiler_memory.compiler_mappings())
    assert resident < 1024, resident  # KiB: none of libLLVM's / MLIR's file pages left
    # Sound: compiling (which maps them in again) and running still work.
    h, z = _compiled(96, 2)
    assert sum(kib for _, _, kib in compiler_memory.compiler_mappings()) > 4 * 1024
    torch.testing.assert_close(h(z), Temps()(z), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(f(x), Temps()(x), rtol=1e-4, atol=1e-3)
    compiler_memory.release()
    assert compiler_memory.last["dropped_kib"] > 4 * 1024


def test_release_skips_small_modules(monkeypatch):
    compiler_memory.last.clear()
    compiler_memory.release(lowered_bytes=compiler_memory.MIN_LOWERED_BYTES - 1)
    assert compiler_memory.last == {}
    monkeypatch.setenv(compiler_memory.ENV, "0")
    compiler_memory.release()
    assert compiler_memory.last == {}
