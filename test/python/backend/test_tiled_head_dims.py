"""Head dims 80..256 on the tiled backends (vector micro-kernels) against
eager flex_attention.

    PYTHONPATH=python pytest -q test/python/backend/test_tiled_head_dims.py

Head dims above 128 are split into column chunks by the P.V micro-kernel;
80 and 96 are one chunk of a non-power-of-two width. M and N are not
multiples of the tiles, so padded rows and columns are exercised.
"""

import math
import os
import sys

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import torch_mlir_flex  # noqa: F401  (load order)
from torch_mlir_flex.backend.jit import JitFunction

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import flex_ir as fi  # noqa: E402

LN2 = math.log(2.0)


def _causal(b, h, m, n):
    return m >= n


def _inputs(B, H, M, N, E, Ev, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, M, E, generator=g), torch.randn(B, H, N, E, generator=g),
            torch.randn(B, H, N, Ev, generator=g))


@pytest.mark.parametrize("backend", ["tiled", "tiled-1t"])
@pytest.mark.parametrize("E,Ev,M,N", [(80, 80, 130, 200), (96, 96, 150, 150),
                                      (192, 192, 128, 190), (256, 256, 140, 170),
                                      (64, 192, 100, 130)])
def test_head_dim_matches_eager(backend, E, Ev, M, N):
    B, H = 1, 2
    q, k, v = _inputs(B, H, M, N, E, Ev, seed=E + Ev)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, Ev=Ev, mask_mod=fi.CAUSAL, lse=True)
    out, lse = JitFunction(text, "f", pipeline=backend)(q, k, v)
    bm = create_block_mask(_causal, B, H, M, N, device="cpu")
    r_out, aux = flex_attention(q, k, v, block_mask=bm, return_aux=AuxRequest(lse=True))
    torch.testing.assert_close(out, r_out, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(lse * LN2, aux.lse, rtol=1e-4, atol=1e-5)


def test_bf16_head_dim_192():
    """bf16 rows of V are extended to f32 chunk by chunk."""
    B, H, M, N, E = 1, 2, 100, 130, 192
    q, k, v = (x.to(torch.bfloat16) for x in _inputs(B, H, M, N, E, E, seed=3))
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, dtype="bf16", mask_mod=fi.CAUSAL)
    out = JitFunction(text, "f", pipeline="tiled-1t")(q, k, v)
    assert out.dtype == torch.bfloat16
    bm = create_block_mask(_causal, B, H, M, N, device="cpu")
    r_out = flex_attention(q.float(), k.float(), v.float(), block_mask=bm)
    torch.testing.assert_close(out.float(), r_out, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("E,M", [(256, 1), (192, 1), (128, 2), (200, 1)])
def test_decode_key_rows_match_eager(E, M):
    """Few query rows with head dims up to 256 take dot products with rows of
    K (no K^T copy): one query row of 256 floats, or two of 128, stay in
    registers. N = 300 is not a multiple of the key block."""
    B, H, N = 1, 2, 300
    q, k, v = _inputs(B, H, M, N, E, E, seed=E + M)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, Ev=E, lse=True)
    fn = JitFunction(text, "f", pipeline="tiled-1t")
    out, lse = fn(q, k, v)
    r_out, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True))
    torch.testing.assert_close(out, r_out, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(lse * LN2, aux.lse, rtol=1e-4, atol=1e-5)
