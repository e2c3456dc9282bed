"""The memref ABI of the C interface (`llvm.emit_c_interface`) on torch tensors.

A ranked memref is passed as a pointer to the struct
``{void *allocated, *aligned; int64 offset, sizes[rank], strides[rank]}``.
The ctypes struct classes are built once per rank and cached (ranks are
small), never per call: ctypes keeps every class it ever creates.
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
    """The ctypes struct of a rank-`rank` memref descriptor (cached)."""
    cls = _DESCRIPTORS.get(rank)
    if cls is None:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        cls = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
        _DESCRIPTORS[rank] = cls
    return cls


def describe(t, cls):
    """A descriptor of the contiguous CPU tensor `t` (kept alive by the caller)."""
    p = t.data_ptr()
    if t.dim():
        return cls(p, p, 0, tuple(t.shape), tuple(t.stride()))
    return cls(p, p, 0)


def status_buffer():
    """A zeroed int64[4] and its rank-1 descriptor (the runtime status)."""
    buf = _STATUS()
    p = ctypes.addressof(buf)
    return buf, descriptor_class(1)(p, p, 0, (4,), (1,))


class PackedCall:
    """Calls the ExecutionEngine's packed wrapper `void f(void **args)` of a
    C-interface function whose arguments are all memref descriptor pointers:
    args[i] points to a slot holding the i-th descriptor's address. ctypes
    releases the GIL during the call."""

    def __init__(self, address: int, num_args: int):
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._slots = ctypes.c_void_p * num_args
        self._size = ctypes.sizeof(ctypes.c_void_p)
        self.num_args = num_args

    def __call__(self, descriptors):
        slots = self._slots(*[ctypes.addressof(d) for d in descriptors])
        base = ctypes.addressof(slots)
        args = self._slots(*range(base, base + self._size * self.num_args, self._size))
        self._fn(args)
