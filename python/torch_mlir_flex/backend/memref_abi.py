"""The memref ABI of the C interface (`llvm.emit_c_interface`) on torch tensors.

A ranked memref is passed as a pointer to the struct
``{void *allocated, *aligned; int64 offset, sizes[rank], strides[rank]}``,
on 64-bit targets int64 x (3 + 2 rank). A call fills an int64 buffer
(one per calling thread, built once) with everything it passes
(PackedCall): ctypes types are built once per function, never per call
(ctypes keeps every class it ever creates). With static shapes only the
data pointers change from call to call.
"""

import ctypes
import threading

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


def static_descriptor_words(shape):
    """The descriptor of a contiguous tensor of the static `shape`, its two
    pointer words None (torch's contiguous strides: a size-0 or size-1
    dimension counts as 1)."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return (None, None, 0, *shape, *reversed(strides))


class PackedCall:
    """Calls the ExecutionEngine's packed wrapper `void f(void **args)` of a
    C-interface function whose arguments are memref descriptor pointers
    (ranks `ranks`), the last one, with `status`, an int64[4] status
    buffer. Each calling thread has its own int64 buffer, built once (calls
    from several threads do not share it; ctypes releases the GIL during
    the call), holding in order: args[i] (the address of slot i), slot i
    (the address of descriptor i), the descriptors, the status words.
    `static_words`, when given (one tuple of descriptor words per argument,
    its two pointer words None), is written into each buffer once: calls
    then pass only the data pointers (`call_pointers`)."""

    def __init__(self, address: int, ranks, status: bool = False, static_words=None):
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        sizes = [3 + 2 * r for r in ranks] + ([5] if status else [])
        n = len(sizes)
        at, desc = 2 * n, []
        for s in sizes:
            desc.append(at)
            at += s
        self._words_at = 2 * n
        self._status_at = at if status else None
        self._buffer = ctypes.c_int64 * (at + (4 if status else 0))
        # Byte offsets of the head words: the slots, then the descriptors.
        self._head = [_WORD * (n + i) for i in range(n)] + [_WORD * d for d in desc]
        self._desc = desc[:len(ranks)]
        self._static = None
        if static_words is not None:
            flat = [w for words in static_words for w in words]
            self._static = [0 if w is None else w for w in flat]
        self._local = threading.local()

    def _thread_buffer(self):
        """(buffer, its address) of the calling thread, heads written."""
        got = getattr(self._local, "buf", None)
        if got is not None:
            return got
        buf = self._buffer()
        base = ctypes.addressof(buf)
        head = [base + off for off in self._head]
        buf[:len(head)] = head
        if self._status_at is not None:
            s = base + _WORD * self._status_at
            buf[self._status_at - 5:self._status_at] = [s, s, 0, 4, 1]
        if self._static is not None:
            buf[self._words_at:self._words_at + len(self._static)] = self._static
        self._local.buf = (buf, base)
        return buf, base

    def _run(self, buf, base):
        st = self._status_at
        if st is None:
            self._fn(base)
            return None
        buf[st:st + 4] = _NO_STATUS
        self._fn(base)
        return buf[st:st + 4]

    def __call__(self, words):
        """`words`: the descriptors of the memref arguments, concatenated
        (a list).
        Returns the status words (a list of 4), or None without status."""
        buf, base = self._thread_buffer()
        buf[self._words_at:self._words_at + len(words)] = words
        return self._run(buf, base)

    def call_pointers(self, pointers):
        """Like __call__ with `static_words`: `pointers` are the data
        pointers of the arguments, in order."""
        buf, base = self._thread_buffer()
        for d, p in zip(self._desc, pointers):
            buf[d] = p
            buf[d + 1] = p
        return self._run(buf, base)


_NO_STATUS = [0, 0, 0, 0]
