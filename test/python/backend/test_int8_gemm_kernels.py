"""The uint8 x int8 -> int32 product of the runtime (flex_gemm_u8s8,
lib/Runtime/Quant/FlexQuantInt8Gemm*.c: the call flex-int-matmul-to-calls
makes of torchao's dynamic-activation int8 linears), called through its C
ABI with ctypes, with each kernel variant this host runs forced in turn
(the host's ISA read from /proc/cpuinfo, not asked of the runtime; the
counters prove which variant ran), against torch._int_mm exactly. B is
mostly t(w) of a weight w [N,K] (read in place), also row-major [K,N]
(copied by the runtime); A uint8 or int8 (flags bit 2); C overwritten or
added to (bit 1); offsets and row strides other than the plain ones.

    PYTHONPATH=python pytest -q test/python/backend/test_int8_gemm_kernels.py
"""

import ctypes
import os
import warnings

import torch_mlir_flex  # noqa: F401  (before torch)
import pytest
import torch

from torch_mlir_flex.backend import blas, cpu_features

warnings.filterwarnings("ignore")

FLAGS = cpu_features.host_cpu_flags()
X86 = os.uname().machine in ("x86_64", "AMD64")
ACCUMULATE, A_SIGNED = 1, 2


def _host_variants():
    variants = ["generic"]
    if X86 and "avx2" in FLAGS:
        variants.append("avx2")
    if X86 and {"avx2", "avx_vnni"} <= FLAGS:
        variants.append("avx_vnni")
    if X86 and {"avx512f", "avx512bw", "avx512_vnni"} <= FLAGS:
        variants.append("avx512_vnni")
    return variants


HOST_VARIANTS = _host_variants()
ROWS = [1, 4, 33, 128]


def _lib():
    blas.runtime_library()
    lib = ctypes.CDLL(blas.runtime_library_path())
    lib.flex_gemm_u8s8.argtypes = [ctypes.c_int64] * 16
    lib.flex_gemm_u8s8.restype = None
    return lib


LIB = _lib()


@pytest.fixture(params=HOST_VARIANTS)
def variant(request):
    assert blas.int8_gemm_available(request.param)
    assert blas.set_int8_gemm_kernel(request.param) == request.param
    yield request.param
    blas.set_int8_gemm_kernel(None)


def _operand(t):
    """(buffer address, offset, stride 0, stride 1) of a view, in elements."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), t.stride(0), t.stride(1))


def _gemm(a, b, c, flags):
    """Runs flex_gemm_u8s8 on views a [M,K], b [K,N], c [M,N]."""
    M, K = a.shape
    N = b.shape[1]
    LIB.flex_gemm_u8s8(M, N, K, *_operand(a), *_operand(b), *_operand(c), flags)


def _padded(t, pad, offset):
    """`t` [R,C] in a larger buffer: rows `pad` elements longer, `offset` in."""
    rows, cols = t.shape
    buf = torch.zeros(offset + rows * (cols + pad), dtype=t.dtype)
    view = buf[offset:].view(rows, cols + pad)[:, :cols]
    view.copy_(t)
    return view


def _inputs(M, K, N, seed, signed=False):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-128 if signed else 0, 128 if signed else 256, (M, K), generator=g,
                      dtype=torch.int8 if signed else torch.uint8)
    w = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8)
    return a, w


@pytest.mark.parametrize("M", ROWS)
@pytest.mark.parametrize("K,N", [(64, 32), (896, 48), (100, 37), (17, 5)])
def test_transposed_weight(variant, M, K, N):
    """B = t(w) read in place, extremes included, against torch._int_mm."""
    a, w = _inputs(M, K, N, seed=M * 1000 + K + N)
    a[0, : K // 2] = 255
    w[0, :] = -128
    a_view, w_view = _padded(a, 3, 5), _padded(w, 7, 11)
    c = torch.full((M, N), -1, dtype=torch.int32)
    before = blas.int8_gemm_products(variant)
    _gemm(a_view, w_view.t(), c, 0)
    assert blas.int8_gemm_products(variant) == before + 1
    assert torch.equal(c, torch._int_mm(a, w.t()))


@pytest.mark.parametrize("M", ROWS)
def test_signed_a_accumulate_row_major_b(variant, M):
    """int8 A (the +128 in the runtime), C added to, B row-major [K,N]
    (copied), C through a transposed view."""
    K, N = 130, 20
    a, w = _inputs(M, K, N, seed=M, signed=True)
    b = w.t().contiguous()
    c0 = torch.randint(-1000, 1000, (N, M), dtype=torch.int32)
    c = c0.clone()
    _gemm(a.view(torch.uint8), b, c.t(), ACCUMULATE | A_SIGNED)
    assert torch.equal(c.t(), c0.t() + torch._int_mm(a, b))


def test_wraps_as_int_mm(variant):
    """Sums past int32 wrap modulo 2^32, as torch._int_mm's do."""
    M, K, N = 2, 70000, 4
    a = torch.full((M, K), 255, dtype=torch.uint8)
    w = torch.full((N, K), -128, dtype=torch.int8)
    c = torch.zeros(M, N, dtype=torch.int32)
    _gemm(a, w.t(), c, 0)
    assert torch.equal(c, torch._int_mm(a, w.t()))


def test_bad_arguments_refused():
    """A negative size or unknown flag bits: refused, C untouched."""
    a, w = _inputs(2, 8, 4, seed=0)
    c = torch.full((2, 4), 5, dtype=torch.int32)
    count, _ = blas.int8_gemm_rejected()
    LIB.flex_gemm_u8s8(2, -4, 8, *_operand(a), *_operand(w.t()), *_operand(c), 0)
    LIB.flex_gemm_u8s8(2, 4, 8, *_operand(a), *_operand(w.t()), *_operand(c), 64)
    after, message = blas.int8_gemm_rejected()
    assert after == count + 2 and message == "unknown flag bits"
    assert torch.equal(c, torch.full((2, 4), 5, dtype=torch.int32))


def test_unknown_variant_raises():
    with pytest.raises(blas.FlexBackendError, match="unknown or this CPU lacks"):
        blas.set_int8_gemm_kernel("sve2")


def test_default_follows_runtime_isa():
    """Unforced, the variant is the best at or below the runtime ISA."""
    assert blas.int8_gemm_kernel() == HOST_VARIANTS[-1]
    try:
        blas.set_runtime_isa("generic")
        assert blas.int8_gemm_kernel() == "generic"
        if "avx2" in blas.runtime_isas():
            blas.set_runtime_isa("avx2")
            assert blas.int8_gemm_kernel() == ("avx_vnni" if "avx_vnni" in HOST_VARIANTS else "avx2")
    finally:
        blas.set_runtime_isa(None)
