"""The memref ABI of the C interface (`llvm.emit_c_interface`) on torch tensors.

A ranked memref is passed as a pointer to the struct
``{void *allocated, *aligned; int64 offset, sizes[rank], strides[rank]}``,
on 64-bit targets int64 x (3 + 2 rank). A call fills an int64 buffer
(one per calling thread, built once) with everything it passes
(PackedCall): ctypes types are built once per function, never per call
(ctypes keeps every class it ever creates). For an argument of static
shape only its data pointer changes from call to call; a scalar is
written into a word of the buffer itself.
"""

import ctypes
import struct
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
    (the address of descriptor i), the descriptors, the status words, one
    word per scalar argument.

    `static_words` (one entry per argument, None for all): the
    descriptor words of an argument whose shape never changes, its two
    pointer words None (written into each buffer once: a call writes its
    data pointer only), or None for an argument whose sizes vary (a call
    writes its whole descriptor). `scalars` ({argument: "int" | "f64" |
    "f32"}): 0-d arguments passed by value (a call writes the value into
    the argument's own word of the buffer, at which its descriptor
    points: no tensor is made for it).

    A call (`__call__`) takes one item per argument, in order: a
    contiguous CPU tensor, or the Python number of a scalar argument. The
    code that writes them is generated for the function once (straight
    lines, no loop over the arguments)."""

    def __init__(self, address: int, ranks, status: bool = False, static_words=None, scalars=None,
                 guard=None):
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        # `guard(address, buffer)`: the runtime's flex_guarded_call, which
        # returns the size of an allocation that failed (0: none), or None.
        self._guard = guard
        self._address = address
        scalars = dict(scalars or {})
        if static_words is None:
            static_words = [None] * len(ranks)
        for i in scalars:
            if ranks[i] != 0:
                raise ValueError(f"scalar argument {i} has rank {ranks[i]}")
            static_words[i] = (None, None, 0)
        sizes = [3 + 2 * r for r in ranks] + ([5] if status else [])
        n = len(sizes)
        at, desc = 2 * n, []
        for s in sizes:
            desc.append(at)
            at += s
        self._status_at = at if status else None
        if status:
            at += 4
        slots = {}
        for i in sorted(scalars):
            slots[i] = at
            at += 1
        self._buffer = ctypes.c_int64 * at
        # Byte offsets of the head words: the slots, then the descriptors.
        self._head = [_WORD * (n + i) for i in range(n)] + [_WORD * d for d in desc]
        # Words written once per buffer: static descriptors (pointers 0),
        # the scalar descriptors' pointers (their own word, as byte offsets
        # from the buffer's start: `_thread_buffer` adds its address).
        self._static = [(desc[i] + j, 0 if w is None else w)
                        for i, words in enumerate(static_words) if words is not None
                        for j, w in enumerate(words)]
        self._slot_pointers = [(desc[i] + j, _WORD * slot) for i, slot in slots.items() for j in (0, 1)]
        self._fill = _fill_function(ranks, desc, static_words, scalars, slots)
        self._local = threading.local()

    def _thread_buffer(self):
        """(buffer, its address) of the calling thread, fixed words written."""
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
        for at, w in self._static:
            buf[at] = w
        for at, off in self._slot_pointers:
            buf[at] = base + off
        self._local.buf = (buf, base)
        return buf, base

    def __call__(self, items):
        """Runs the function on `items` (see the class doc). Returns the
        status words (a list of 4), or None without status. An allocation
        the compiled code could not get (through `guard`) raises
        AllocationFailed."""
        buf, base = self._thread_buffer()
        self._fill(buf, items)
        st = self._status_at
        if st is not None:
            buf[st:st + 4] = _NO_STATUS
        if self._guard is None:
            self._fn(base)
        else:
            failed = self._guard(self._address, base)
            if failed:
                raise AllocationFailed(failed)
        return None if st is None else buf[st:st + 4]


class AllocationFailed(MemoryError):
    """The compiled code's heap could not allocate `.bytes` (FlexGuard.c):
    the call was abandoned before it finished."""

    def __init__(self, nbytes: int):
        super().__init__(f"cannot allocate {nbytes} bytes ({nbytes / 1e9:.1f} GB)")
        self.bytes = nbytes


def _f64_bits(v) -> int:
    return struct.unpack("<q", struct.pack("<d", v))[0]


def _f32_bits(v) -> int:
    return struct.unpack("<i", struct.pack("<f", v))[0]


_ENCODE = {"int": "int({})", "f64": "_f64_bits({})", "f32": "_f32_bits({})"}


def _fill_function(ranks, desc, static_words, scalars, slots):
    """`fill(buf, items)`: writes a call's items into a thread's buffer,
    one straight line of code per argument."""
    lines = ["def fill(b, a):"]
    for i, r in enumerate(ranks):
        d = desc[i]
        if i in scalars:
            lines.append(f"    b[{slots[i]}] = {_ENCODE[scalars[i]].format(f'a[{i}]')}")
        elif static_words[i] is not None:
            lines.append(f"    p = a[{i}].data_ptr(); b[{d}] = p; b[{d + 1}] = p")
        elif r == 0:
            lines.append(f"    p = a[{i}].data_ptr(); b[{d}:{d + 2}] = (p, p)")
        else:
            lines.append(f"    t = a[{i}]; p = t.data_ptr(); b[{d}:{d + 3 + 2 * r}] = (p, p, 0, *t.shape, *t.stride())")
    if len(lines) == 1:
        lines.append("    pass")
    ns = {"_f64_bits": _f64_bits, "_f32_bits": _f32_bits}
    exec(compile("\n".join(lines) + "\n", "<flex call>", "exec"), ns)
    return ns["fill"]


_NO_STATUS = [0, 0, 0, 0]
