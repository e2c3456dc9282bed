"""bf16 inputs on the tiled backend with flex-to-flash's `bf16-dot`
(AVX512-BF16 dot products) forced on and forced off, against eager bf16
flex_attention.

    PYTHONPATH=python pytest -q test/python/backend/test_tiled_bf16_dot.py

M and N are not multiples of the 64x64 tiles (padded rows and key
columns). The forced-on cases are skipped on CPUs without avx512_bf16 (the
instructions would be illegal there); the default pipelines then use the
generic path, which the forced-off cases check.
"""

import math
import os
import sys

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import torch_mlir_flex  # noqa: F401  (load order)
from torch_mlir_flex.backend import cpu_features
from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import find_openmp_runtime, tiled_pipeline

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import flex_ir as fi  # noqa: E402

LN2 = math.log(2.0)
TOL = 1e-2  # as the other bf16 tests of the tiled backend
DOT_INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps"
AMX_INTRINSIC = "llvm.x86.tdpbf16ps.internal"

needs_bf16_cpu = pytest.mark.skipif(not cpu_features.host_has_avx512_bf16(),
                                    reason="host CPU has no avx512_bf16")
needs_amx = pytest.mark.skipif(not cpu_features.host_has_amx_bf16(),
                               reason="host CPU has no amx_bf16 (or no AMX permission)")
# True: bf16-dot, False: the f32 kernels, "amx": Q.K^T and P.V on AMX tiles.
BF16_DOT = [pytest.param(True, marks=needs_bf16_cpu, id="dot"),
            pytest.param(False, id="generic"),
            pytest.param("amx", marks=needs_amx, id="amx")]


def _causal(b, h, m, n):
    return m >= n


def _softcap(s, b, h, m, n):
    return 2.0 * torch.tanh(s / 2.0)


def _inputs(B, Hq, Hkv, M, N, E, Ev, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, Hq, M, E, generator=g).bfloat16(),
            torch.randn(B, Hkv, N, E, generator=g).bfloat16(),
            torch.randn(B, Hkv, N, Ev, generator=g).bfloat16())


def _compile(text, bf16_dot, openmp=False):
    amx = bf16_dot == "amx"
    pipeline = tiled_pipeline(bf16_dot=bf16_dot is True, openmp=openmp, amx=amx)
    fn = JitFunction(text, "f", pipeline=pipeline)
    # The path taken: vdpbf16ps calls in the lowered module or none; AMX
    # tile products with amx.
    lowered = str(fn.lowered)
    assert (AMX_INTRINSIC in lowered) == amx
    if not amx:
        assert (DOT_INTRINSIC in lowered) == bf16_dot
    return fn


def _check(text, args, bf16_dot, score_mod=None, gqa=False):
    out, lse = _compile(text, bf16_dot)(*args)
    q, k, v = args
    bm = create_block_mask(_causal, 1, q.shape[1], q.shape[2], k.shape[2], device="cpu")
    r_out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, enable_gqa=gqa,
                                return_aux=AuxRequest(lse=True))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), r_out.float(), rtol=TOL, atol=TOL)
    torch.testing.assert_close(lse * LN2, aux.lse.float(), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("bf16_dot", BF16_DOT)
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("softcap", [False, True], ids=["causal", "softcap"])
def test_matches_eager_bf16(bf16_dot, D, softcap):
    M, N = 100, 130
    args = _inputs(1, 2, 2, M, N, D, D, seed=D)
    text = fi.attention_ir(B=1, Hq=2, M=M, N=N, E=D, dtype="bf16", mask_mod=fi.CAUSAL,
                           score_mod=fi.softcap(2.0) if softcap else None, lse=True)
    _check(text, args, bf16_dot, score_mod=_softcap if softcap else None)


@pytest.mark.parametrize("bf16_dot", BF16_DOT)
def test_gqa_value_dim(bf16_dot):
    """Two query heads per kv head, Ev != E (K^T and V packed per kv head)."""
    M, N, E, Ev = 70, 150, 64, 32
    args = _inputs(1, 4, 2, M, N, E, Ev, seed=1)
    text = fi.attention_ir(B=1, Hq=4, Hkv=2, M=M, N=N, E=E, Ev=Ev, dtype="bf16",
                           mask_mod=fi.CAUSAL, lse=True)
    _check(text, args, bf16_dot, gqa=True)


@pytest.mark.parametrize("bf16_dot", BF16_DOT)
def test_dynamic_seq_kv_batch_broadcast(bf16_dot):
    """Dynamic M, N (packed K^T / V of run-time size) and one kv batch for
    two query batches; the (B, H, M-tile) loop and the packing loops on
    OpenMP threads when a runtime is installed."""
    B, H, E = 2, 2, 64
    text = fi.attention_ir(B=B, Hq=H, Bkv=1, M=0, N=0, E=E, dtype="bf16", mask_mod=fi.CAUSAL,
                           lse=True, dynamic_mn=True)
    fn = _compile(text, bf16_dot, openmp=find_openmp_runtime() is not None)
    for M, N in [(1, 1), (77, 130)]:
        g = torch.Generator().manual_seed(M)
        q = torch.randn(B, H, M, E, generator=g).bfloat16()
        k, v = (torch.randn(1, H, N, E, generator=g).bfloat16() for _ in range(2))
        out, lse = fn(q, k, v)
        bm = create_block_mask(_causal, None, None, M, N, device="cpu")
        r_out, aux = flex_attention(q, k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1),
                                    block_mask=bm, return_aux=AuxRequest(lse=True))
        torch.testing.assert_close(out.float(), r_out.float(), rtol=TOL, atol=TOL)
        torch.testing.assert_close(lse * LN2, aux.lse.float(), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("bf16_dot", BF16_DOT)
def test_few_query_rows_long_key_tiles(bf16_dot):
    """M = 16: 16 x 128 tiles (8 vdpbf16ps per row of S), N padded to 384."""
    M, N, D = 16, 300, 64
    args = _inputs(1, 2, 2, M, N, D, D, seed=5)
    text = fi.attention_ir(B=1, Hq=2, M=M, N=N, E=D, dtype="bf16", mask_mod=fi.CAUSAL, lse=True)
    _check(text, args, bf16_dot)


@needs_bf16_cpu
@pytest.mark.parametrize("D", [76, 192, 256])
def test_row_pieces_and_chunks(D):
    """Rows of 76 lanes (16-, 8- and 4-lane vdpbf16ps), and head dims split
    into two column chunks (96 + 96, 128 + 128)."""
    M, N = 70, 100
    args = _inputs(1, 2, 2, M, N, D, D, seed=D)
    text = fi.attention_ir(B=1, Hq=2, M=M, N=N, E=D, dtype="bf16", mask_mod=fi.CAUSAL, lse=True)
    _check(text, args, True)


@needs_bf16_cpu
def test_unpairable_value_dim_keeps_fma_for_pv():
    """Ev = 30 is no multiple of 4 lanes: P.V keeps the f32 kernel, Q.K^T
    (E = 34, even) still uses vdpbf16ps."""
    M, N, E, Ev = 90, 100, 34, 30
    args = _inputs(1, 2, 2, M, N, E, Ev, seed=2)
    text = fi.attention_ir(B=1, Hq=2, M=M, N=N, E=E, Ev=Ev, dtype="bf16",
                           mask_mod=fi.CAUSAL, lse=True)
    _check(text, args, True)


def test_default_follows_host_and_env(monkeypatch):
    monkeypatch.delenv(cpu_features.BF16_DOT_ENV, raising=False)
    monkeypatch.delenv(cpu_features.ISA_ENV, raising=False)  # the host's own ISA
    # AMX (which keeps the dot kernel for tiles it cannot take) off.
    monkeypatch.setenv(cpu_features.AMX_ENV, "0")
    assert ("bf16-dot=1" in tiled_pipeline()) == cpu_features.host_has_avx512_bf16()
    monkeypatch.setenv(cpu_features.BF16_DOT_ENV, "0")
    assert "bf16-dot" not in tiled_pipeline()
    assert "enable-x86vector" not in tiled_pipeline()
    # Without the vector kernels there is nothing to replace (asked of a host
    # that has the instructions, AVX-512 with AVX512-BF16: elsewhere
    # bf16_dot=True is refused).
    monkeypatch.setattr(cpu_features, "host_cpu_flags",
                        lambda: frozenset({"avx2", "fma", "avx512f", "avx512bw", "avx512_bf16"}))
    assert "bf16-dot" not in tiled_pipeline(vectorize=False, bf16_dot=True)


def test_forcing_on_without_the_feature_is_an_error(monkeypatch):
    monkeypatch.delenv(cpu_features.ISA_ENV, raising=False)
    monkeypatch.setattr(cpu_features, "host_cpu_flags", lambda: frozenset({"avx512f"}))
    with pytest.raises(ValueError, match="avx512_bf16"):
        tiled_pipeline(bf16_dot=True)
    assert "bf16-dot" not in tiled_pipeline()
