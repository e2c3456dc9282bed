"""GQA decode on the tiled backends against eager flex_attention: one row
tile holds the G query heads of a kv head (G * M rows over one K/V head,
each key block read once for all of them), so score_mod / mask_mod see a
head index that varies by row.

Run (repository root, venv active): PYTHONPATH=python \\
     pytest -q test/python/backend/test_tiled_gqa_decode.py
"""

import math

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import torch_mlir_flex

LN2 = math.log(2.0)
HKV, N, E = 2, 300, 32  # N = 300: not a multiple of the 128-key block


class _Decode(torch.nn.Module):
    """ALiBi with per-head slopes from a buffer; `block_mask` (or None)."""

    def __init__(self, hq, block_mask=None):
        super().__init__()
        self.register_buffer("slopes", torch.linspace(0.05, 0.4, hq))
        self.block_mask = block_mask

    def forward(self, q, k, v):
        def alibi(score, b, h, m, n):
            return score + self.slopes[h] * (n - m)

        out, aux = flex_attention(q, k, v, score_mod=alibi, block_mask=self.block_mask,
                                  enable_gqa=True, return_aux=AuxRequest(lse=True))
        return out, aux.lse


def _qkv(M, G, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, HKV * G, M, E, generator=g)
    k = torch.randn(1, HKV, N, E, generator=g)
    v = torch.randn(1, HKV, N, E, generator=g)
    return tuple(x.to(dtype) for x in (q, k, v))


def _check(model, M, G, dtype, backend):
    q, k, v = _qkv(M, G, dtype, seed=10 * M + G)
    out, lse = torch_mlir_flex.compile(model, (q, k, v), backend=backend)(q, k, v)
    r_out, r_lse = model(q.float(), k.float(), v.float())
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(out.float(), r_out, **tol)
    torch.testing.assert_close(lse.float(), r_lse, **tol)


@pytest.mark.parametrize("backend", ["tiled", "tiled-1t"])
@pytest.mark.parametrize("M,G", [(1, 2), (1, 4), (1, 8), (2, 4), (2, 8), (4, 2), (4, 4)])
def test_gqa_decode_alibi(backend, M, G):
    _check(_Decode(HKV * G), M, G, torch.float32, backend)


@pytest.mark.parametrize("M,G", [(1, 4), (2, 8), (4, 2)])
def test_gqa_decode_alibi_bf16(M, G):
    _check(_Decode(HKV * G), M, G, torch.bfloat16, "tiled")


@pytest.mark.parametrize("backend", ["tiled", "tiled-1t"])
@pytest.mark.parametrize("M,G", [(1, 4), (2, 2), (4, 4)])
def test_gqa_decode_head_mask(backend, M, G):
    """A mask_mod using h with block tensors shared by the heads (H=None):
    every block is partial for every head, so the mask decides per row."""

    def mask(b, h, m, n):
        return (n + 2 * h + m) % 3 != 0

    bm = create_block_mask(mask, None, None, M, N, device="cpu")
    _check(_Decode(HKV * G, bm), M, G, torch.float32, backend)
