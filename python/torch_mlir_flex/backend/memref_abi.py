"""The memref ABI of the C interface (`llvm.emit_c_interface`) on torch tensors.

A ranked memref is passed as a pointer to the struct
``{void *allocated, *aligned; int64 offset, sizes[rank], strides[rank]}``,
on 64-bit targets int64 x (3 + 2 rank). A call fills one int64 buffer
with everything it passes (PackedCall): ctypes types are built once per
function, never per call (ctypes keeps every class it ever creates).
"""

import ctypes

# MLIR element type -> torch dtype name (i1 memrefs are widened to bytes by
# flex-widen-i1-memrefs, the layout of torch.bool).
MLIR_TO_TORCH = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
    "i1": "bool", "i8": "int8", "i32": "int32", "i64": "int64",
}

_WORD = 8  # bytes of an int64 and of a pointer


def torch_dtype(mlir_element: str):
    import torch

    name = MLIR_TO_TORCH.get(mlir_element)
    return getattr(torch, name) if name else None


def descriptor_words(t):
    """The descriptor of the contiguous CPU tensor `t` as int64 words."""
    p = t.data_ptr()
    return (p, p, 0, *t.shape, *t.stride())


class PackedCall:
    """Calls the ExecutionEngine's packed wrapper `void f(void **args)` of a
    C-interface function whose arguments are memref descriptor pointers
    (ranks `ranks`), the last one, with `status`, an int64[4] status
    buffer. One int64 buffer per call (calls from several threads do not
    share it) holds, in order: args[i] (the address of slot i), slot i (the
    address of descriptor i), the descriptors, the status words. ctypes
    releases the GIL during the call."""

    def __init__(self, address: int, ranks, status: bool = False):
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        sizes = [3 + 2 * r for r in ranks] + ([5] if status else [])
        n = len(sizes)
        at, desc = 2 * n, []
        for s in sizes:
            desc.append(at)
            at += s
        self._status_at = at if status else None
        self._buffer = ctypes.c_int64 * (at + (4 if status else 0))
        # Byte offsets of the head words: the slots, then the descriptors.
        self._head = [_WORD * (n + i) for i in range(n)] + [_WORD * d for d in desc]

    def __call__(self, words):
        """`words`: the descriptors of the memref arguments, concatenated
        (a list).
        Returns the status words (a list of 4), or None without status."""
        buf = self._buffer()
        base = ctypes.addressof(buf)
        head = [base + off for off in self._head]
        st = self._status_at
        if st is not None:
            s = base + _WORD * st
            words = words + [s, s, 0, 4, 1]
        values = head + words
        buf[:len(values)] = values
        self._fn(base)
        return None if st is None else buf[st:st + 4]
