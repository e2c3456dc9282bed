"""The compiled code's heap (lib/Runtime/FlexAlloc.c): memref allocations
call the runtime, which keeps large freed blocks for the next call; results
stay eager's, what is kept does not grow from call to call, the bound
($FLEX_ALLOC_CACHE_MB) holds, and release_memory() frees it.

    PYTHONPATH=python pytest -q test/python/backend/test_runtime_heap.py
"""

import os
import subprocess
import sys
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from torch_mlir_flex.backend import blas

warnings.filterwarnings("ignore")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class Chain(torch.nn.Module):
    """Temporaries of 4 MiB each (1024 x 1024 f32) that the result needs."""

    def forward(self, x, y):
        a = torch.exp(x) * 0.5
        b = torch.sin(y) + a.t()
        return (a @ b).sum(0) + b.mean(1)


def _args():
    g = torch.Generator().manual_seed(0)
    return torch.randn(1024, 1024, generator=g) * 0.1, torch.randn(1024, 1024, generator=g)


def test_large_blocks_are_kept_and_reused():
    x, y = _args()
    fn = torch_mlir_flex.compile(Chain(), (x, y))
    assert "_mlir_memref_to_llvm_alloc" in fn.lowered_ir and "llvm.call @malloc" not in fn.lowered_ir
    expected = Chain()(x, y)
    torch.testing.assert_close(fn(x, y), expected, rtol=1e-4, atol=1e-3)
    kept = blas.kept_bytes()
    assert kept >= 4 << 20  # at least one 1024 x 1024 f32 temporary kept
    for _ in range(5):
        torch.testing.assert_close(fn(x, y), expected, rtol=1e-4, atol=1e-3)
        assert blas.kept_bytes() == kept  # reused, not grown
    blas.release_memory()
    assert blas.kept_bytes() == 0
    torch.testing.assert_close(fn(x, y), expected, rtol=1e-4, atol=1e-3)


CHILD = r"""
import torch_mlir_flex, torch, sys
sys.path.insert(0, {here!r})
from test_runtime_heap import Chain, _args
from torch_mlir_flex.backend import blas
x, y = _args()
fn = torch_mlir_flex.compile(Chain(), (x, y))
torch.testing.assert_close(fn(x, y), Chain()(x, y), rtol=1e-4, atol=1e-3)
print("KEPT", blas.kept_bytes())
"""


def _kept_in_child(mb):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), ROOT]),
               FLEX_ALLOC_CACHE_MB=str(mb))
    proc = subprocess.run([sys.executable, "-c", CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int([l for l in proc.stdout.splitlines() if l.startswith("KEPT")][-1].split()[1])


def test_bound_holds():
    assert _kept_in_child(0) == 0
    kept = _kept_in_child(5)  # room for one 4 MiB block
    assert 0 < kept <= 5 << 20


class Layers(torch.nn.Module):
    """12 layers, each with 4 MiB temporaries (an MLP-like 1024 x 1024
    activation) that are dead once the next layer's input is computed."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.w = torch.nn.Parameter(torch.randn(12, 1024, 1024, generator=g) * 0.03)

    def forward(self, x):
        for i in range(12):
            h = torch.nn.functional.silu(x @ self.w[i])
            x = x + torch.sigmoid(h) * 0.5
        return x


def test_temporaries_are_freed_after_their_last_use():
    """flex-free-after-last-use: a call holds one layer's temporaries at
    once (its input, the product, its output), not all 12 layers' until the
    return; flex-unshare-inits: no zero-filled init of the products'
    shape allocated at the top and kept until the last layer."""
    x = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(2))
    model = Layers().eval()
    with torch.no_grad():
        fn = torch_mlir_flex.compile(model, (x,))
        expected = model(x)
    blas.live_peak_bytes(reset=True)
    torch.testing.assert_close(fn(x), expected, rtol=1e-4, atol=1e-4)
    peak = blas.live_peak_bytes()
    layer = 4 << 20  # one 1024 x 1024 f32 temporary
    assert 3 * layer <= peak < 3.5 * layer, peak / layer  # all held: 24 and more


class Outer(torch.nn.Module):
    """A 36 MiB result (3072 x 3072 f32): above out_heap.MIN_BYTES."""

    def forward(self, x, y):
        return x[:, None] * y[None, :] + 1.0


def test_large_results_come_from_the_heap_and_return_to_it():
    from torch_mlir_flex.backend import out_heap

    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(3072, generator=g), torch.randn(3072, generator=g)
    assert 3072 * 3072 * 4 >= out_heap.MIN_BYTES
    fn = torch_mlir_flex.compile(Outer(), (x, y))
    blas.release_memory()
    first = fn(x, y)
    torch.testing.assert_close(first, Outer()(x, y))
    row = first[7]  # a view keeps the block alive
    ptr = first.data_ptr()
    del first
    assert blas.kept_bytes() == 0
    torch.testing.assert_close(row, x[7] * y + 1.0)
    # The other result, computed while that block is alive, is in other memory.
    second = fn(x, y)
    assert second.data_ptr() != ptr
    torch.testing.assert_close(row, x[7] * y + 1.0)
    del row
    assert blas.kept_bytes() >= 3072 * 3072 * 4  # the block went back, kept
    third = fn(x * 2, y)
    assert third.data_ptr() == ptr  # ...and the next result of its size reuses it
    torch.testing.assert_close(third, Outer()(x * 2, y))
    torch.testing.assert_close(second, Outer()(x, y))
    # An ordinary tensor for everything torch does with it.
    assert third.is_contiguous() and third.dtype == torch.float32 and third.shape == (3072, 3072)
    torch.testing.assert_close((third.clone() - third).abs().max(), torch.tensor(0.0))
    del second, third
    blas.release_memory()
    assert blas.kept_bytes() == 0


def test_small_results_are_torchs():
    from torch_mlir_flex.backend import out_heap

    t = out_heap.empty((16, 16), torch.bfloat16)
    assert t.shape == (16, 16) and t.dtype == torch.bfloat16
    assert t.untyped_storage().resizable()  # torch.empty's, not a heap block's
