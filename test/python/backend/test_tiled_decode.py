"""Numerics of the decode key split (flash-decoding) of the "tiled" pipeline
against eager flex_attention: few query rows and few (b, h) pairs, so
flex-to-flash splits the key blocks into chunks merged at the end.

Run (repository root, venv active): PYTHONPATH=python \\
     pytest -q test/python/backend/test_tiled_decode.py
"""

import os
import sys

import pytest
import torch

import torch_mlir_flex  # noqa: F401  (load order)
from torch_mlir_flex.backend.pipelines import find_openmp_runtime, tiled_pipeline

sys.path.insert(0, os.path.dirname(__file__))
from test_tiled import LN2, _close, _inputs, _reference, _run, fi  # noqa: E402

# Forces the split (8 parallel tasks wanted) whatever the core count.
SPLIT = tiled_pipeline(openmp=False, split_keys_tasks=8)


@pytest.mark.parametrize("M", [1, 2, 4])
@pytest.mark.parametrize("Hq,Hkv", [(4, 1), (2, 2), (4, 2)])
def test_decode_split_gqa_mqa(M, Hq, Hkv):
    B, N, E = 1, 700, 16  # 6 key blocks of 128, N not a multiple
    q, k, v = _inputs(B, Hq, M, N, E, Hkv=Hkv)
    text = fi.attention_ir(B=B, Hq=Hq, Hkv=Hkv, M=M, N=N, E=E, lse=True, max_scores=True)
    out, lse, mx = _run(text, (q, k, v), SPLIT)
    r_out, r_lse, r_mx = _reference(q, k, v, gqa=Hq != Hkv)
    _close(out, r_out)
    _close(lse * LN2, r_lse)
    _close(mx * LN2, r_mx)


@pytest.mark.parametrize("offset", [0, 150, 650])
def test_decode_split_causal_offset(offset):
    """q_idx + offset >= kv_idx: later chunks empty or partly masked."""
    B, H, M, N, E = 1, 2, 2, 900, 16
    q, k, v = _inputs(B, H, M, N, E, seed=1)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, lse=True,
                           mask_mod=fi.shifted_causal(-offset))
    out, lse = _run(text, (q, k, v), SPLIT)
    r_out, r_lse, _ = _reference(q, k, v, None, lambda b, h, m, n: m + offset >= n)
    _close(out, r_out)
    _close(lse * LN2, r_lse)


def test_decode_split_fully_masked_rows():
    B, H, M, N, E = 1, 2, 3, 600, 16
    q, k, v = _inputs(B, H, M, N, E, seed=2)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, lse=True, max_scores=True,
                           mask_mod=fi.shifted_causal(1))
    out, lse, mx = _run(text, (q, k, v), SPLIT)
    r_out, r_lse, r_mx = _reference(q, k, v, None, lambda b, h, m, n: m >= n + 1)
    assert torch.equal(out[:, :, 0], torch.zeros_like(out[:, :, 0]))
    assert torch.isinf(lse[:, :, 0]).all()
    _close(out, r_out)
    _close(lse * LN2, r_lse)
    _close(mx * LN2, r_mx)


@pytest.mark.parametrize("N", [200, 300])
def test_decode_split_short_n(N):
    """Fewer blocks than chunks (empty chunks) and N smaller than a chunk."""
    B, H, M, E = 1, 1, 1, 32
    q, k, v = _inputs(B, H, M, N, E, seed=3)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, lse=True)
    out, lse = _run(text, (q, k, v), tiled_pipeline(openmp=False, tile_n=32,
                                                    split_keys_tasks=16))
    r_out, r_lse, _ = _reference(q, k, v)
    _close(out, r_out)
    _close(lse * LN2, r_lse)


def test_decode_split_bf16_openmp():
    """Chunks on OpenMP threads when a runtime is installed."""
    B, H, M, N, E = 1, 2, 1, 1000, 32
    q, k, v = _inputs(B, H, M, N, E, dtype=torch.bfloat16, seed=4)
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, dtype="bf16")
    pipeline = tiled_pipeline(openmp=find_openmp_runtime() is not None, split_keys_tasks=8)
    (out,) = _run(text, (q, k, v), pipeline)
    r_out, _, _ = _reference(q.float(), k.float(), v.float())
    _close(out, r_out, rtol=2e-2, atol=2e-2)
