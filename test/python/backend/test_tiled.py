"""Numerics of the "tiled" pipeline (flex-to-flash) against eager flex_attention.

Run (repository root, venv active): PYTHONPATH=python \
     pytest -q test/python/backend/test_tiled.py

Shapes span several tiles in M and N (default tiles 64x64, and a few runs
with small explicit tiles) so that un-offset indices, partial tiles and the
block classification are all exercised. Inputs are N(0, 1).
"""

import math
import os
import sys

import pytest
import torch
from torch.nn.attention.flex_attention import (
    AuxRequest,
    create_block_mask,
    flex_attention,
)

import torch_mlir_flex  # noqa: F401  (load order)
from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import tiled_pipeline

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import flex_ir as fi  # noqa: E402

LN2 = math.log(2.0)
RTOL, ATOL = 1e-4, 1e-5


def _reference(q, k, v, score_mod=None, mask_mod=None, scale=None, gqa=False):
    """Eager flex_attention (f32 math) -> out, lse (natural), max (natural)."""
    B, H, M, _ = q.shape
    N = k.shape[2]
    bm = None
    if mask_mod is not None:
        bm = create_block_mask(mask_mod, B, H, M, N, device="cpu")
    out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=bm,
                              scale=scale, enable_gqa=gqa,
                              return_aux=AuxRequest(lse=True))
    # CPU flex_attention cannot return max_scores: dense row max here.
    G = q.shape[1] // k.shape[1]
    kk = k.repeat_interleave(G, dim=1).expand(B, -1, -1, -1).float()
    s = (q.float() @ kk.transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    bi = torch.arange(B).view(B, 1, 1, 1)
    hi = torch.arange(H).view(1, H, 1, 1)
    mi = torch.arange(M).view(1, 1, M, 1)
    ni = torch.arange(N).view(1, 1, 1, N)
    if score_mod is not None:
        s = score_mod(s, bi, hi, mi, ni)
    if mask_mod is not None:
        s = torch.where(mask_mod(bi, hi, mi, ni), s, -float("inf"))
    return out, aux.lse, s.amax(-1)


def _run(text, args, pipeline="tiled"):
    fn = JitFunction(text, "f", pipeline=pipeline)
    res = fn(*args)
    return res if isinstance(res, tuple) else (res,)


def _inputs(B, Hq, M, N, E, Ev=None, Hkv=None, Bkv=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    Ev = E if Ev is None else Ev
    Hkv = Hq if Hkv is None else Hkv
    Bkv = B if Bkv is None else Bkv
    q = torch.randn(B, Hq, M, E, generator=g).to(dtype)
    k = torch.randn(Bkv, Hkv, N, E, generator=g).to(dtype)
    v = torch.randn(Bkv, Hkv, N, Ev, generator=g).to(dtype)
    return q, k, v


def _causal(b, h, m, n):
    return m >= n


def _close(a, b, rtol=RTOL, atol=ATOL):
    a = a.float()
    b = b.float()
    # -inf rows must match exactly; finite values within tolerance.
    assert torch.equal(torch.isinf(a), torch.isinf(b)), "inf pattern differs"
    fin = torch.isfinite(b)
    torch.testing.assert_close(a[fin], b[fin], rtol=rtol, atol=atol)
    assert not torch.isnan(a).any()


CASES = {
    # name: (kwargs for IR, torch score_mod, torch mask_mod, captures builder)
    "none": dict(),
    "causal": dict(mask_mod=fi.CAUSAL, t_mask=_causal),
    "sliding": dict(mask_mod=fi.sliding_window(37),
                    t_mask=lambda b, h, m, n: (m - n <= 37) & (m >= n)),
    "qk_bias": dict(score_mod=fi.relative_bias(0.05),
                    t_score=lambda s, b, h, m, n: s + 0.05 * (m - n)),
    "softcap_causal": dict(score_mod=fi.softcap(2.0), mask_mod=fi.CAUSAL,
                           t_score=lambda s, b, h, m, n: 2.0 * torch.tanh(s / 2.0),
                           t_mask=_causal),
    "fully_masked_rows": dict(mask_mod=fi.shifted_causal(70),
                              t_mask=lambda b, h, m, n: m >= n + 70),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("tiles", [(0, 0), (16, 32)])
def test_mods(name, tiles):
    case = CASES[name]
    B, H, M, N, E = 2, 3, 150, 200, 32
    q, k, v = _inputs(B, H, M, N, E)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, score_mod=case.get("score_mod"),
                           mask_mod=case.get("mask_mod"), lse=True, max_scores=True)
    out, lse, mx = _run(text, (q, k, v), tiled_pipeline(tile_m=tiles[0], tile_n=tiles[1]))
    r_out, r_lse, r_mx = _reference(q, k, v, case.get("t_score"), case.get("t_mask"))
    _close(out, r_out)
    _close(lse * LN2, r_lse)
    _close(mx * LN2, r_mx)


def test_captured_head_bias_gqa():
    B, Hq, Hkv, M, N, E = 1, 8, 2, 130, 190, 16
    q, k, v = _inputs(B, Hq, M, N, E, Hkv=Hkv)
    bias = torch.randn(Hq)
    text = fi.attention_ir(B=B, Hq=Hq, Hkv=Hkv, M=M, N=N, E=E, lse=True,
                           score_mod=fi.head_bias("bias", Hq), mask_mod=fi.CAUSAL,
                           captures=[("bias", f"tensor<{Hq}xf32>")])
    out, lse = _run(text, (q, k, v, bias))
    r_out, r_lse, _ = _reference(q, k, v, lambda s, b, h, m, n: s + bias[h], _causal,
                                 gqa=True)
    _close(out, r_out)
    _close(lse * LN2, r_lse)


def test_alibi_kv_batch_broadcast_ev():
    B, H, M, N, E, Ev = 2, 4, 96, 140, 24, 40
    q, k, v = _inputs(B, H, M, N, E, Ev=Ev, Bkv=1)
    slopes = torch.rand(H)
    text = fi.attention_ir(B=B, Hq=H, Bkv=1, M=M, N=N, E=E, Ev=Ev,
                           score_mod=fi.alibi("slopes", H), mask_mod=fi.CAUSAL,
                           captures=[("slopes", f"tensor<{H}xf32>")])
    (out,) = _run(text, (q, k, v, slopes))
    r_out, _, _ = _reference(q, k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1),
                             lambda s, b, h, m, n: s + slopes[h] * (n - m), _causal)
    _close(out, r_out)


def test_decode_m1_n300():
    B, H, M, N, E = 2, 4, 1, 300, 64
    q, k, v = _inputs(B, H, M, N, E)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, lse=True)
    out, lse = _run(text, (q, k, v))
    r_out, r_lse, _ = _reference(q, k, v)
    _close(out, r_out)
    _close(lse * LN2, r_lse)


def test_e256():
    B, H, M, N, E = 1, 2, 70, 90, 256
    q, k, v = _inputs(B, H, M, N, E)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, mask_mod=fi.CAUSAL,
                           score_mod=fi.softcap(5.0), lse=True)
    out, lse = _run(text, (q, k, v))
    r_out, r_lse, _ = _reference(q, k, v, lambda s, b, h, m, n: 5.0 * torch.tanh(s / 5.0),
                                 _causal)
    _close(out, r_out)
    _close(lse * LN2, r_lse)


def test_document_mask_dense_classify():
    B, H, S, E = 1, 2, 200, 16
    q, k, v = _inputs(B, H, S, S, E)
    doc = torch.tensor([0] * 50 + [1] * 77 + [2] * 3 + [3] * 70, dtype=torch.int64)
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True,
                           mask_mod=fi.document_mask("doc", S),
                           captures=[("doc", f"tensor<{S}xi64>")])

    def t_mask(b, h, m, n):
        return (doc[m] == doc[n]) & (m >= n)

    r_out, r_lse, _ = _reference(q, k, v, None, t_mask)
    for tiles in [(0, 0), (16, 16)]:
        out, lse = _run(text, (q, k, v, doc), tiled_pipeline(*tiles))
        _close(out, r_out)
        _close(lse * LN2, r_lse)


@pytest.mark.parametrize("mask", ["causal", "sliding", "fully_masked_rows"])
def test_block_sparsity_matches_dense(mask):
    """Skipping blocks must not change the result vs. the unskipped lowering."""
    case = CASES[mask]
    B, H, M, N, E = 1, 2, 160, 160, 16
    q, k, v = _inputs(B, H, M, N, E, seed=3)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, mask_mod=case["mask_mod"], lse=True)
    a = _run(text, (q, k, v), tiled_pipeline(16, 16, block_sparsity=True))
    b = _run(text, (q, k, v), tiled_pipeline(16, 16, block_sparsity=False))
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_dynamic_m_n():
    B, H, E = 1, 2, 16
    text = fi.attention_ir(B=B, Hq=H, M=0, N=0, E=E, mask_mod=fi.CAUSAL, lse=True,
                           dynamic_mn=True)
    fn = JitFunction(text, "f", pipeline="tiled")
    for M, N in [(1, 1), (77, 77), (130, 200), (64, 128)]:
        q, k, v = _inputs(B, H, M, N, E)
        out, lse = fn(q, k, v)
        r_out, r_lse, _ = _reference(q, k, v, None, _causal)
        _close(out, r_out)
        _close(lse * LN2, r_lse)


@pytest.mark.parametrize("dtype,elt,tol", [(torch.float16, "f16", 2e-3),
                                           (torch.bfloat16, "bf16", 1e-2)])
def test_half_precision(dtype, elt, tol):
    B, H, M, N, E = 1, 2, 100, 130, 32
    q, k, v = _inputs(B, H, M, N, E, dtype=dtype)
    # The JIT cannot return f16 tensors: f16 output is extended in the IR.
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, dtype=elt, mask_mod=fi.CAUSAL,
                           out_f32=(elt == "f16"))
    (out,) = _run(text, (q, k, v))
    if elt == "f16":
        # Rounded once to f16 by flex.attention: representable exactly.
        assert torch.equal(out, out.to(dtype).float())
    else:
        assert out.dtype == dtype
    r_out, _, _ = _reference(q.float(), k.float(), v.float(), None, _causal)
    _close(out, r_out, rtol=tol, atol=tol)


def test_matches_reference_pipeline():
    B, H, M, N, E = 1, 2, 70, 90, 16
    q, k, v = _inputs(B, H, M, N, E)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, mask_mod=fi.sliding_window(20),
                           score_mod=fi.relative_bias(0.1), lse=True, max_scores=True)
    a = _run(text, (q, k, v), "tiled")
    b = _run(text, (q, k, v), "reference")
    for x, y in zip(a, b):
        _close(x, y)


@pytest.mark.parametrize("name,shape,tiles", [
    ("causal", (2, 3, 150, 200, 32, 32), (0, 0)),
    ("softcap_causal", (1, 2, 130, 70, 64, 48), (0, 0)),
    ("sliding", (1, 2, 100, 90, 16, 24), (12, 20)),   # odd vector widths
    ("fully_masked_rows", (1, 2, 96, 96, 16, 16), (32, 128)),
])
def test_vector_kernels_match_generic(name, shape, tiles):
    """flex-to-flash's vector micro-kernels (default) vs its linalg tile ops."""
    B, H, M, N, E, Ev = shape
    case = CASES[name]
    q, k, v = _inputs(B, H, M, N, E, Ev=Ev, seed=5)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, Ev=Ev, score_mod=case.get("score_mod"),
                           mask_mod=case.get("mask_mod"), lse=True, max_scores=True)
    a = _run(text, (q, k, v), tiled_pipeline(*tiles, vectorize=True))
    b = _run(text, (q, k, v), tiled_pipeline(*tiles, vectorize=False))
    for x, y in zip(a, b):
        _close(x, y)
    r_out, r_lse, r_mx = _reference(q, k, v, case.get("t_score"), case.get("t_mask"))
    _close(a[0], r_out)
    _close(a[1] * LN2, r_lse)


def test_softcap_tanh_approximation_range():
    """tanh inside score_mod is a polynomial approximation: check it over
    small, large and saturating scores (cap 0.5 .. 50)."""
    B, H, M, N, E = 1, 2, 64, 64, 32
    q, k, v = _inputs(B, H, M, N, E, seed=7)
    q = q * 4.0  # scores up to ~100
    for cap in (0.5, 5.0, 50.0):
        text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, score_mod=fi.softcap(cap), lse=True)
        out, lse = _run(text, (q, k, v))
        r_out, r_lse, _ = _reference(q, k, v, lambda s, b, h, m, n: cap * torch.tanh(s / cap))
        _close(out, r_out)
        _close(lse * LN2, r_lse)


def test_openmp_runtime_threads():
    """With an OpenMP runtime (pip intel-openmp or the system's libomp), the
    OpenMP variant gives the same result as the single-threaded one."""
    from torch_mlir_flex.backend.pipelines import find_openmp_runtime
    lib = find_openmp_runtime()
    if lib is None:
        pytest.skip("no OpenMP runtime installed")
    B, H, M, N, E = 1, 4, 200, 200, 32
    q, k, v = _inputs(B, H, M, N, E, seed=9)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, mask_mod=fi.CAUSAL, lse=True)
    fn = JitFunction(text, "f", shared_libs=[lib],
                     pipeline=tiled_pipeline(openmp=True, num_threads=2, serial_below_us=0))
    assert "omp.parallel" in str(fn.lowered)
    a = fn(q, k, v)
    b = _run(text, (q, k, v))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
