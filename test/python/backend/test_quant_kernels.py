"""The quantized-weight product kernels of the runtime, one set per ISA
(lib/Runtime/Quant/: FlexQuantGeneric.c, FlexQuantAvx2.c,
FlexQuantAvx512.c), called through their C ABI (flex_quant_matmul_i8 /
flex_quant_matmul_i4, the calls flex.quant_matmul lowers to) with ctypes,
on every ISA this host runs (kernel_isas.py: read from /proc/cpuinfo, not
asked of the runtime), with the runtime capped at it (`blas.set_runtime_isa`): the
counters prove which kernel ran, and the results are compared with the exact
product (f64) within the f32 summation bound, and with torch's own:
int8 `(x @ q.float().T) * s`; int4 `aten._weight_int4pack_mm_for_cpu` for
the packing this host's torch produces, and for the other packings a
reference written here from the layout rules (the bytes packed here too).
Every call passes offsets and row strides other than the plain ones.

    PYTHONPATH=python pytest -q test/python/backend/test_quant_kernels.py
"""

import ctypes
import os
import warnings

import torch_mlir_flex  # noqa: F401  (before torch)
import pytest
import torch

from kernel_isas import HOST_ISAS
from torch_mlir_flex.backend import blas

warnings.filterwarnings("ignore")

X_BF16, Y_BF16, S_BF16 = 1, 2, 4
ROWS = [1, 3, 4, 17, 64]
# name: (x dtype, scales dtype); y is in x's dtype.
DTYPES = {"f32": (torch.float32, torch.float32), "bf16": (torch.bfloat16, torch.bfloat16),
          "bf16_f32_scales": (torch.bfloat16, torch.float32)}


def _lib():
    blas.runtime_library()
    lib = ctypes.CDLL(blas.runtime_library_path())
    lib.flex_quant_matmul_i8.argtypes = [ctypes.c_int64] * 15
    lib.flex_quant_matmul_i4.argtypes = [ctypes.c_int64] * 16
    lib.flex_quant_matmul_i8.restype = lib.flex_quant_matmul_i4.restype = None
    return lib


LIB = _lib()


def _embedded(t, row_pad, offset):
    """`t` [R, C] inside a larger buffer: rows `row_pad` elements apart more
    than their length, starting `offset` elements in. Returns (buffer, view)."""
    rows, cols = t.shape
    buf = torch.full((offset + rows * (cols + row_pad) + 1,), 7, dtype=t.dtype)
    view = buf[offset:offset + rows * (cols + row_pad)].view(rows, cols + row_pad)[:, :cols]
    view.copy_(t)
    return buf, view


def _args(view):
    """(address of the buffer's start, offset, row stride) of a view."""
    return view.untyped_storage().data_ptr(), view.storage_offset(), view.stride(0)


def _flags(x, s, y):
    return (X_BF16 * (x.dtype == torch.bfloat16) | Y_BF16 * (y.dtype == torch.bfloat16)
            | S_BF16 * (s.dtype == torch.bfloat16))


def run_i8(x, q, s):
    """Our y = (x @ q.T) * s, every operand at an offset, x / q / y rows padded."""
    M, K = x.shape
    N = q.shape[0]
    _, xv = _embedded(x, 3, 5)
    _, qv = _embedded(q, 1, 2)
    sbuf = torch.cat([torch.zeros(1, dtype=s.dtype), s])
    ybuf, yv = _embedded(torch.full((M, N), float("nan"), dtype=x.dtype), 2, 3)
    LIB.flex_quant_matmul_i8(M, N, K, *_args(xv), *_args(qv), sbuf.data_ptr(), 1, *_args(yv),
                             _flags(x, s, yv))
    return yv.clone()


def run_i4(x, packed, sz, group, layout):
    M, K = x.shape
    N = packed.shape[0]
    _, xv = _embedded(x, 3, 5)
    wbuf = torch.cat([torch.zeros(4, dtype=torch.uint8), packed.reshape(-1)])
    szbuf = torch.cat([torch.zeros(2, dtype=sz.dtype), sz.reshape(-1)])
    ybuf, yv = _embedded(torch.full((M, N), float("nan"), dtype=x.dtype), 2, 3)
    LIB.flex_quant_matmul_i4(M, N, K, *_args(xv), wbuf.data_ptr(), 4, szbuf.data_ptr(), 2,
                             *_args(yv), group, layout, _flags(x, sz, yv))
    return yv.clone()


def pack_int4(q, layout):
    """q [N, K] (0..15, N a multiple of 16) packed as torch's
    _convert_weight_to_int4pack_for_cpu packs it for ATen capability
    `layout` (0 DEFAULT, 1 AVX2, 2 AVX512): blocks of BN columns, k-major,
    BN/2 bytes a k; the last N mod BN columns one short block, k-major,
    byte i holding its columns 2i and 2i + 1."""
    N, K = q.shape
    bn = 64 if layout == 2 else 32
    whole = N // bn * bn
    b = q[:whole].reshape(whole // bn, bn, K).permute(0, 2, 1)  # [block, k, column]
    lo, hi = (b[..., 0::2], b[..., 1::2]) if layout == 0 else (b[..., :bn // 2], b[..., bn // 2:])
    t = q[whole:].T  # [k, column] of the short block
    parts = [(lo | (hi << 4)).reshape(-1), (t[:, 0::2] | (t[:, 1::2] << 4)).reshape(-1)]
    return torch.cat(parts).to(torch.uint8).reshape(N, K // 2)


def _host_layout():
    q = torch.randint(0, 16, (128, 64), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    found = [layout for layout in range(3) if torch.equal(packed, pack_int4(q, layout))]
    assert len(found) == 1, "torch packs int4 in a layout none of 0/1/2"
    return found[0]


HOST_LAYOUT = _host_layout()


def _bound(exact, magnitude, terms, out_dtype):
    """What a correct kernel stays within: twice the f32 summation bound
    (the kernels and the reference sum in different orders), and half a
    bf16 ulp of the result on top for a bf16 output."""
    bound = 2 * (terms + 4) * 2.0**-24 * magnitude + 1e-30
    if out_dtype == torch.bfloat16:
        bound = 2.0**-8 * exact.abs() + 2 * bound
    return bound


def _check(got, exact, bound, what):
    assert not torch.isnan(got).any(), f"{what}: outputs not written"
    err = (got.double() - exact).abs()
    assert (err <= bound).all(), f"{what}: error/bound {(err / bound).max().item():.3g}"


def _counting(isa, fmt, fn):
    """fn() with the runtime capped at `isa`; asserts that it ran one
    product on that ISA's kernels of `fmt` and no other."""
    before = blas.runtime_isa()
    try:
        assert blas.set_runtime_isa(isa) == isa
        assert blas.quant_kernel() == isa
        mine, total = blas.quant_products(isa=isa, fmt=fmt), blas.quant_products()
        out = fn()
        assert blas.quant_products(isa=isa, fmt=fmt) == mine + 1
        assert blas.quant_products() == total + 1
        return out
    finally:
        blas.set_runtime_isa(before)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# (N, K): N not a multiple of 4, 8 or 16; K with a tail of 4 after 16-wide
# blocks; the second above the threads' threshold (2^16 weights).
I8_SHAPES = [(37, 100), (301, 260)]


@pytest.mark.parametrize("shape", I8_SHAPES, ids=[f"{n}x{k}" for n, k in I8_SHAPES])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("M", ROWS)
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_int8(isa, M, dtype, shape):
    xd, sd = DTYPES[dtype]
    N, K = shape
    g = _gen(M * 1000 + N)
    x = torch.randn(M, K, generator=g).to(xd)
    q = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int32).to(torch.int8)
    s = (torch.rand(N, generator=g) * 0.02 + 0.001).to(sd)
    got = _counting(isa, "int8", lambda: run_i8(x, q, s))
    assert got.dtype == xd
    exact = (x.double() @ q.double().T) * s.double()
    bound = _bound(exact, (x.double().abs() @ q.double().abs().T) * s.double(), K, xd)
    _check(got, exact, bound, "vs exact")
    if xd == torch.float32:  # torch's own f32 expression
        _check(got, ((x @ q.float().T) * s).double(), 2 * bound, "vs torch")


def _int4_case(M, N, K, group, xd, sd, seed):
    g = _gen(seed)
    x = torch.randn(M, K, generator=g).to(xd)
    q = torch.randint(0, 16, (N, K), generator=g, dtype=torch.int32)
    scale = torch.rand(K // group, N, generator=g) * 0.02 + 0.001
    zero = torch.randn(K // group, N, generator=g) * 0.05
    sz = torch.stack([scale, zero], dim=-1).to(sd).contiguous()
    s = sz[..., 0].double().repeat_interleave(group, 0).T  # [N, K]
    z = sz[..., 1].double().repeat_interleave(group, 0).T
    w = (q.double() - 8) * s + z
    exact = x.double() @ w.T
    # The kernels sum s * sum(x q) + (z - 8 s) * sum(x) per group: q up to 15.
    magnitude = x.double().abs() @ (23 * s.abs() + z.abs()).T
    return x, q, sz, exact, _bound(exact, magnitude, K, xd)


# (N, K, group): 12 and 4 groups; N of 3 blocks of 32 (layouts 0, 1) or 64;
# 192 x 384 above the threads' threshold.
I4_SHAPES = [(96, 384, 32), (192, 384, 32), (192, 256, 64), (96, 512, 128)]
I4_CASES = [(layout, shape) for layout in range(3) for shape in I4_SHAPES
            if shape[0] % (64 if layout == 2 else 32) == 0]
# N with a short last block: 112 (layout 2: 64 + 48; layouts 0, 1: 96 +
# 16), 48 (layout 2: the short block alone; 32 + 16), 208 x 384 (192 + 16,
# 3 + 1 blocks of 64) on threads.
I4_SHORT = [(112, 256, 32), (48, 128, 64), (208, 384, 32)]


@pytest.mark.parametrize("layout,shape", I4_CASES,
                         ids=[f"layout{l}-{n}x{k}g{g}" for l, (n, k, g) in I4_CASES])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("M", ROWS)
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_int4(isa, M, dtype, layout, shape):
    N, K, group = shape
    xd, sd = DTYPES[dtype]
    x, q, sz, exact, bound = _int4_case(M, N, K, group, xd, sd, M * 100 + N + layout)
    packed = pack_int4(q, layout)
    got = _counting(isa, "int4_cpu", lambda: run_i4(x, packed, sz, group, layout))
    assert got.dtype == xd
    _check(got, exact, bound, "vs exact")
    if layout == HOST_LAYOUT and xd == sd:
        # torch's own kernel on its own packing of the same weights
        theirs = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x, torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1), group, sz)
        _check(theirs, exact, bound, "torch vs exact")
        _check(got, theirs.double(), 2 * bound, "vs torch")


@pytest.mark.parametrize("shape", I4_SHORT, ids=[f"{n}x{k}g{g}" for n, k, g in I4_SHORT])
@pytest.mark.parametrize("layout", range(3))
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("M", [1, 4, 17])
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_int4_short_last_block(isa, M, dtype, layout, shape):
    N, K, group = shape
    xd, sd = DTYPES[dtype]
    x, q, sz, exact, bound = _int4_case(M, N, K, group, xd, sd, M * 100 + N + layout)
    got = _counting(isa, "int4_cpu", lambda: run_i4(x, pack_int4(q, layout), sz, group, layout))
    _check(got, exact, bound, "vs exact")
    if layout == HOST_LAYOUT:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        assert torch.equal(packed, pack_int4(q, layout))  # torch's own short block
        theirs = torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, group, sz)
        _check(got, theirs.double(), 2 * bound, "vs torch")


# A Qwen2-0.5B down projection (K = 4864: 152 groups of 32), on threads.
@pytest.mark.parametrize("M", [1, 17])
@pytest.mark.parametrize("isa", HOST_ISAS)
def test_model_shape(isa, M):
    x, q, sz, exact, bound = _int4_case(M, 896, 4864, 32, torch.bfloat16, torch.bfloat16, M)
    got = _counting(isa, "int4_cpu", lambda: run_i4(x, pack_int4(q, HOST_LAYOUT), sz, 32, HOST_LAYOUT))
    _check(got, exact, bound, "int4 vs exact")
    q8 = (q * 16 - 128).to(torch.int8)
    s = sz[0, :, 0].contiguous()
    got = _counting(isa, "int8", lambda: run_i8(x, q8, s))
    exact = (x.double() @ q8.double().T) * s.double()
    _check(got, exact, _bound(exact, (x.double().abs() @ q8.double().abs().T) * s.double(), 4864,
                              torch.bfloat16), "int8 vs exact")


def test_variants_agree():
    # The same products on every variant, apart by no more than the bound.
    x, q, sz, exact, bound = _int4_case(5, 192, 384, 32, torch.float32, torch.float32, 3)
    packed = pack_int4(q, 2)
    results = [_counting(isa, "int4_cpu", lambda: run_i4(x, packed, sz, 32, 2)) for isa in HOST_ISAS]
    for got in results[1:]:
        _check(got, results[0].double(), bound, "vs generic")


def test_k_zero_writes_zeros():
    y = torch.full((2, 3), 5.0)
    x, q, s = torch.empty(2, 0), torch.empty(3, 0, dtype=torch.int8), torch.ones(3)
    LIB.flex_quant_matmul_i8(2, 3, 0, x.data_ptr(), 0, 0, q.data_ptr(), 0, 0, s.data_ptr(), 0,
                             y.data_ptr(), 0, 3, 0)
    assert torch.equal(y, torch.zeros(2, 3))


BAD_I4 = {
    "layout": (dict(layout=3), "layout not 0, 1 or 2"),
    "group": (dict(group=48), "group size not a positive divisor of K"),
    "n16": (dict(n=40, layout=2), "N not a multiple of 16"),
    "flags": (dict(flags=8), "unknown flag bits"),
    "size": (dict(m=-1), "negative size"),
}


@pytest.mark.parametrize("case", list(BAD_I4))
def test_bad_arguments_are_refused(case):
    # A call the verifier would not let through is refused with a message,
    # y left as it was (no crash, no partial write).
    change, message = BAD_I4[case]
    a = dict(m=2, n=64, k=64, group=32, layout=1, flags=0) | change
    x = torch.randn(2, 64)
    w = torch.zeros(64 * 32, dtype=torch.uint8)
    sz = torch.ones(2 * 64 * 2)
    y = torch.full((2, 64), 5.0)
    before, _ = blas.quant_rejected()
    LIB.flex_quant_matmul_i4(a["m"], a["n"], a["k"], x.data_ptr(), 0, 64, w.data_ptr(), 0,
                             sz.data_ptr(), 0, y.data_ptr(), 0, 64, a["group"], a["layout"],
                             a["flags"])
    count, error = blas.quant_rejected()
    assert count == before + 1
    assert error.startswith(message)
    assert (y == 5.0).all()


def test_counter_errors():
    from torch_mlir_flex.backend.errors import FlexBackendError

    with pytest.raises(FlexBackendError, match="unknown quantized format 'int3'"):
        blas.quant_products(fmt="int3")
    with pytest.raises(FlexBackendError, match="unknown runtime ISA 'sse9'"):
        blas.quant_products(isa="sse9")


def test_environment_caps_the_quant_kernels():
    # TORCH_MLIR_FLEX_RUNTIME_ISA, the GEMV kernels' switch, caps these too.
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"), TORCH_MLIR_FLEX_RUNTIME_ISA="generic")
    env.pop("TORCH_MLIR_FLEX_ISA", None)
    proc = subprocess.run([sys.executable, "-c", "from torch_mlir_flex.backend import blas; "
                           "print('KERNEL', blas.quant_kernel())"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "KERNEL generic" in proc.stdout
