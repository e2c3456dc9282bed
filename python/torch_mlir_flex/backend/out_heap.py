"""Large result tensors on the runtime's heap (lib/Runtime/FlexAlloc.c).

A compiled call writes its results into tensors the caller allocates
(destination passing). torch's allocator maps a block above glibc's mmap
threshold afresh each time, so every call faulted in the pages of a large
result again: for a 0.5B model's logits at S=1024 (1024 x 151936 f32,
594 MiB) that is about 0.23 s of page faults on this host's kernel, a tenth
of a 2-layer forward. `empty(shape, dtype)` takes a block of at least
`MIN_BYTES` from the runtime's heap instead: when the tensor dies, its block
goes back there and is kept (up to $FLEX_ALLOC_CACHE_MB), so the next call's
result of that size (or a temporary: the heap reuses blocks across sizes)
reuses its pages. Smaller results, or a process without the runtime
library, get `torch.empty`.

The tensor is a plain CPU tensor over that block (`torch.frombuffer`); it
holds the block's owner object, whose finalizer frees the block when the
last view of the tensor is gone. Such a tensor cannot be resized in place.
"""

import ctypes
import math
import weakref

# Results at least this large come from the runtime's heap (its kept
# blocks' threshold, KEEP_MIN_BYTES of FlexAlloc.c): the compiled code's
# temporaries and the results then reuse each other's blocks. With 32 MiB,
# a 4-layer Llama's training forward took its 118 results (the activations
# saved for the backward, 259 MiB) from glibc's heap while the runtime's
# kept blocks lay unused beside them: 1191 MiB peak against 1157 (issue
# #42, docs/runtime.md "The compiled code's heap").
MIN_BYTES = 256 << 10
ALIGNMENT = 64

_alloc = None  # (aligned_alloc, free) of the runtime, once loaded


def _functions():
    global _alloc
    if _alloc is None:
        from . import blas
        from .errors import FlexBackendError

        try:
            _alloc = blas.heap_functions()
        except FlexBackendError:
            _alloc = False
    return _alloc


def empty(shape, dtype):
    """An uninitialized contiguous CPU tensor of `shape` and `dtype`."""
    import torch

    numel = math.prod(shape)
    nbytes = numel * dtype.itemsize
    fns = _functions() if nbytes >= MIN_BYTES else None
    if not fns:
        return torch.empty(shape, dtype=dtype)
    alloc, free = fns
    ptr = alloc(ALIGNMENT, nbytes)
    if not ptr:
        return torch.empty(shape, dtype=dtype)  # torch raises its own OOM
    block = (ctypes.c_char * nbytes).from_address(ptr)
    # Not at exit: a tensor still alive then keeps its memory until the end.
    weakref.finalize(block, free, ptr).atexit = False
    return torch.frombuffer(block, dtype=dtype, count=numel).view(shape)
