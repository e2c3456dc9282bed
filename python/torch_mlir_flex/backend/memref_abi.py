"""The memref ABI of the C interface (`llvm.emit_c_interface`) on torch tensors.

A ranked memref is passed as a pointer to the struct
``{void *allocated, *aligned; int64 offset, sizes[rank], strides[rank]}``.
The ctypes types are built once per rank and cached (ranks are small),
never per call: ctypes keeps every class it ever creates.
"""

import ctypes

_DESCRIPTORS = {}
_STATUS = ctypes.c_int64 * 4

# MLIR element type -> torch dtype name (i1 memrefs are widened to bytes by
# flex-widen-i1-memrefs, the layout of torch.bool).
MLIR_TO_TORCH = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
    "i1": "bool", "i8": "int8", "i32": "int32", "i64": "int64",
}


def torch_dtype(mlir_element: str):
    import torch

    name = MLIR_TO_TORCH.get(mlir_element)
    return getattr(torch, name) if name else None


def descriptor_class(rank: int):
    """The ctypes type of a rank-`rank` memref descriptor (cached): int64 x
    (3 + 2 rank), the struct's layout on 64-bit targets (its pointers are
    64-bit), which ctypes fills faster than a Structure with array fields."""
    cls = _DESCRIPTORS.get(rank)
    if cls is None:
        cls = _DESCRIPTORS[rank] = ctypes.c_int64 * (3 + 2 * rank)
    return cls


def describe(t, cls):
    """A descriptor of the contiguous CPU tensor `t` (kept alive by the caller)."""
    p = t.data_ptr()
    return cls(p, p, 0, *t.shape, *t.stride())


def status_buffer():
    """A zeroed int64[4] and its rank-1 descriptor (the runtime status)."""
    buf = _STATUS()
    p = ctypes.addressof(buf)
    return buf, descriptor_class(1)(p, p, 0, 4, 1)


class PackedCall:
    """Calls the ExecutionEngine's packed wrapper `void f(void **args)` of a
    C-interface function whose arguments are all memref descriptor pointers:
    args[i] points to a slot holding the i-th descriptor's address. ctypes
    releases the GIL during the call."""

    def __init__(self, address: int, num_args: int):
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        # One buffer per call: [descriptor addresses..., slot addresses...]
        # (per call, so that calls from several threads do not share it).
        self._buffer = ctypes.c_void_p * (2 * num_args)
        size = ctypes.sizeof(ctypes.c_void_p)
        self._slot_offsets = [size * i for i in range(num_args)]
        self._args_offset = size * num_args
        self.num_args = num_args

    def __call__(self, descriptors):
        n = self.num_args
        buf = self._buffer()
        base = ctypes.addressof(buf)
        buf[:n] = [ctypes.addressof(d) for d in descriptors]
        buf[n:] = [base + off for off in self._slot_offsets]
        self._fn(base + self._args_offset)
