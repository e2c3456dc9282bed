"""The tiled lowering's AVX2 kernels (flex-to-flash / flex-backward-to-flash
with vector-bits=256: 8-lane pieces blocked for 16 ymm registers) against
eager flex_attention, on any x86-64 host: TORCH_MLIR_FLEX_ISA=avx2 makes
the pipelines pass vector-bits=256 and, on an AVX-512 host, the JIT compile
for x86-64-v3 without AVX-512 (cpu_features.vector_isa, jit.py).

    PYTHONPATH=python pytest -q test/python/backend/test_tiled_vector_bits.py

Tolerances as test_tiled.py (f32 1e-4 / 1e-5, bf16 1e-2) for the forward
and as test_training*.py for gradients (f32 1e-4 / 1e-5 against float64
math, bf16 2e-2).
"""

import math
import os
import re
import shutil
import subprocess
import sys

import pytest

import torch_mlir_flex  # noqa: F401  (load order)
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

from torch_mlir_flex import dynamo
from torch_mlir_flex.backend import PIPELINES, cache, cpu_features
from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import tiled_pipeline

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import flex_ir as fi  # noqa: E402

from test_training_bf16 import _grads  # compiled vs float64 math gradients

dynamo.register()

LN2 = math.log(2.0)
SOFTCAP = 2.0


@pytest.fixture
def avx2(monkeypatch):
    """TORCH_MLIR_FLEX_ISA=avx2; the pipeline tiled_pipeline() makes then."""
    monkeypatch.setenv(cpu_features.ISA_ENV, "avx2")
    text = tiled_pipeline()
    for p in ("flex-to-flash", "flex-backward-to-flash"):
        options = text.split(p + "{", 1)[1].split("}", 1)[0]
        assert "vector-bits=256" in options and "bf16-dot" not in options and "amx" not in options
    return text


def _causal(b, h, m, n):
    return m >= n


def _softcap(s, b, h, m, n):
    return SOFTCAP * torch.tanh(s / SOFTCAP)


# name: (IR score_mod, IR mask_mod, torch score_mod, torch mask_mod, kv heads of 4)
CASES = {
    "causal": (None, fi.CAUSAL, None, _causal, 4),
    "softcap_causal": (fi.softcap(SOFTCAP), fi.CAUSAL, _softcap, _causal, 4),
    "gqa_causal": (None, fi.CAUSAL, None, _causal, 2),
}


def _inputs(hq, hkv, m, n, e, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1, hq, m, e, generator=g).to(dtype),
            torch.randn(1, hkv, n, e, generator=g).to(dtype),
            torch.randn(1, hkv, n, e, generator=g).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("E", [64, 80, 128])
@pytest.mark.parametrize("case", list(CASES))
def test_forward_avx2_matches_eager(avx2, case, E, dtype):
    ir_score, ir_mask, t_score, t_mask, hkv = CASES[case]
    H, M, N = 4, 130, 200  # partial row tiles and key blocks
    q, k, v = _inputs(H, hkv, M, N, E, dtype, seed=E)
    elt = "f32" if dtype == torch.float32 else "bf16"
    text = fi.attention_ir(B=1, Hq=H, Hkv=hkv, M=M, N=N, E=E, dtype=elt, score_mod=ir_score,
                           mask_mod=ir_mask, lse=True)
    fn = JitFunction(text, "f", pipeline=avx2)
    if cpu_features.host_vector_isa() == "avx512":
        assert 'target_cpu = "x86-64-v3"' in fn.lowered
    out, lse = fn(q, k, v)
    assert out.dtype == dtype
    bm = create_block_mask(t_mask, 1, H, M, N, device="cpu")
    r_out, aux = flex_attention(q.float(), k.float(), v.float(), score_mod=t_score, block_mask=bm,
                                enable_gqa=hkv != H, return_aux=AuxRequest(lse=True))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(out.float(), r_out, **tol)
    torch.testing.assert_close(lse * LN2, aux.lse, **tol)


def _contraction_widths(lowered):
    """The vector widths of the micro-kernels' FMAs (vector.fma lowers to
    llvm.intr.fmuladd) in a lowered module."""
    return set(re.findall(r"llvm\.intr\.fmuladd\(.*?\) : \(vector<(\d+)xf32>", lowered))


def test_avx2_blocking_reaches_the_code(avx2):
    """The option reaches the kernels: E = 64 rows as one-register pieces
    (vector<8xf32>) with 256; chunks of 32 and 64 columns with 512."""
    text = fi.attention_ir(B=1, Hq=2, M=128, N=128, E=64, mask_mod=fi.CAUSAL)
    assert _contraction_widths(JitFunction(text, "f", pipeline=avx2).lowered) == {"8"}
    wide = JitFunction(text, "f", pipeline=tiled_pipeline(vector_bits=512, bf16_dot=False,
                                                          amx=False)).lowered
    assert _contraction_widths(wide) == {"32", "64"}


def test_capped_jit_has_no_avx512_instructions(avx2, cache_dir):
    """With the ISA capped at avx2, the compiled code uses no zmm register
    (cached entry disassembled); on an AVX-512 host the same program
    compiled for the host does (the check can tell)."""
    objdump = shutil.which("objdump")
    if objdump is None or cache._linker() is None:
        pytest.skip("needs objdump and a C compiler (compile cache entries)")
    text = fi.attention_ir(B=1, Hq=2, M=128, N=128, E=64, mask_mod=fi.CAUSAL)

    def compiled_zmm(pipeline):
        before = set(cache_dir.glob("*.so"))
        JitFunction(text, "f", pipeline=pipeline)
        (entry,) = set(cache_dir.glob("*.so")) - before
        dis = subprocess.run([objdump, "-d", str(entry)], capture_output=True, text=True).stdout
        assert "ymm" in dis
        return "zmm" in dis

    assert not compiled_zmm(avx2)
    if cpu_features.host_vector_isa() == "avx512":
        os.environ.pop(cpu_features.ISA_ENV)  # restored by monkeypatch
        assert compiled_zmm(tiled_pipeline(vector_bits=512, bf16_dot=False, amx=False))


def test_isa_env_and_option_errors(monkeypatch):
    monkeypatch.setenv(cpu_features.ISA_ENV, "avx512")
    assert cpu_features.vector_isa() == cpu_features.host_vector_isa()  # capped at the host
    monkeypatch.setenv(cpu_features.ISA_ENV, "sse2")
    with pytest.raises(ValueError, match="TORCH_MLIR_FLEX_ISA"):
        cpu_features.vector_bits_default()
    monkeypatch.delenv(cpu_features.ISA_ENV)
    # 512 (the passes' default) leaves the pipeline text as it was.
    assert "vector-bits" not in tiled_pipeline(vector_bits=512, bf16_dot=False, amx=False)
    with pytest.raises(ValueError, match="256 or 512"):
        tiled_pipeline(vector_bits=128)
    with pytest.raises(ValueError, match="excludes bf16_dot and amx"):
        tiled_pipeline(vector_bits=256, amx=True)


@pytest.mark.parametrize("case,E,dtype", [
    ("causal", 64, torch.float32),
    ("softcap_causal", 80, torch.float32),
    ("gqa_causal", 128, torch.float32),
    ("causal", 128, torch.bfloat16),
    ("softcap_causal", 64, torch.bfloat16),
    ("gqa_causal", 80, torch.bfloat16),
], ids=lambda x: str(x).replace("torch.", ""))
def test_forward_backward_avx2_matches_eager(avx2, monkeypatch, fresh, case, E, dtype):
    _, _, t_score, t_mask, hkv = CASES[case]
    H, S = 4, 160
    monkeypatch.setitem(PIPELINES, "tiled-test-avx2", avx2)
    tensors = _inputs(H, hkv, S, S, E, dtype, seed=E + hkv)
    grad = torch.randn(1, H, S, E, generator=torch.Generator().manual_seed(1)).to(dtype)
    bm = create_block_mask(t_mask, None, None, S, S, device="cpu")

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=t_score, block_mask=bm, enable_gqa=hkv != H)

    got = _grads(fn, tensors, grad, backend="tiled-test-avx2")
    ref = _grads(fn, tensors, grad)
    delta, warned = fresh
    assert delta("backward") == 1 and delta("eager") == 0, list(warned)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    for i, (a, b) in enumerate(zip(got, ref)):
        assert a.dtype == dtype
        torch.testing.assert_close(a.double(), b, **tol, msg=lambda m: f"grad {i}: {m}")
