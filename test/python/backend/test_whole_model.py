"""Whole models through the dense-op path (docs/dense-ops.md): a mid-size
Qwen2-shaped transformers model and the example block, against eager
PyTorch; weights are runtime arguments, so another checkpoint of the same
architecture lowers to the same code; matmuls run on the BLAS."""

import torch_mlir_flex  # noqa: F401  (before torch-mlir)

import os
import sys

import pytest
import torch

from torch_mlir_flex import hf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _qwen2(seed, dtype=torch.float32, layers=2):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    conf = Qwen2Config(hidden_size=256, intermediate_size=704, num_attention_heads=4, num_key_value_heads=2,
                       vocab_size=2048, num_hidden_layers=layers, tie_word_embeddings=True,
                       max_position_embeddings=512, initializer_range=0.05)
    conf._attn_implementation = "flex_attention"
    return Qwen2ForCausalLM(conf).eval().to(dtype)


def _rel_err(got, ref):
    return ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


@pytest.fixture(scope="module")
def qwen_pair():
    ids = torch.randint(0, 2048, (1, 48), generator=torch.Generator().manual_seed(0))
    a, b = _qwen2(0), _qwen2(1)
    with torch.no_grad():
        return ids, a, b, hf.compile(a, {"input_ids": ids}), hf.compile(b, {"input_ids": ids})


def test_qwen2_shaped_matches_eager(qwen_pair):
    ids, model, _, compiled, _ = qwen_pair
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    assert _rel_err(compiled(input_ids=ids), ref) < 1e-5
    low = compiled.compiled.lowered_ir
    assert "flex_gemm_f32" in low
    # the lm_head's weight (the tied embedding) is not copied or transposed
    # before its product: no 2048x256 (or 256x2048) buffer is allocated
    allocs = [l for l in compiled.compiled.loops_ir().splitlines() if "memref.alloc" in l]
    assert allocs and not [l for l in allocs if "2048x256xf32" in l or "256x2048xf32" in l]


def test_weights_are_arguments_and_checkpoints_share_code(qwen_pair):
    ids, a, b, ca, cb = qwen_pair
    # one runtime argument per distinct parameter/buffer, none a constant
    assert ca.compiled.num_inputs == 1
    assert len(ca.compiled.state) >= len(list(a.parameters()))
    assert "dense_resource" not in ca.compiled.flex_ir
    # another checkpoint: the same code, its own numbers
    assert ca.compiled.lowered_ir == cb.compiled.lowered_ir
    with torch.no_grad():
        assert _rel_err(cb(input_ids=ids), b(input_ids=ids).logits) < 1e-5


def test_weights_updated_in_place_are_read(qwen_pair):
    ids, a, _, ca, _ = qwen_pair
    with torch.no_grad():
        before = ca(input_ids=ids)
        w = a.model.layers[0].mlp.down_proj.weight
        saved = w.clone()
        w.mul_(3)
        try:
            assert _rel_err(ca(input_ids=ids), a(input_ids=ids).logits) < 1e-5
            assert not torch.equal(ca(input_ids=ids), before)
        finally:
            w.copy_(saved)


def test_qwen2_shaped_bf16():
    model = _qwen2(0, torch.bfloat16)
    ids = torch.randint(0, 2048, (1, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        compiled = hf.compile(model, {"input_ids": ids})
        ref = model(input_ids=ids).logits
        got = compiled(input_ids=ids)
    assert "flex_gemm_bf16" in compiled.compiled.lowered_ir
    assert _rel_err(got, ref) < 3e-2


def test_example_block_mid_size():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import transformer_block as tb

    saved = (tb.DIM, tb.HEADS, tb.SEQ, tb.HIDDEN)
    tb.DIM, tb.HEADS, tb.SEQ, tb.HIDDEN = 256, 4, 128, 1024
    try:
        torch.manual_seed(0)
        model = tb.Block().eval()
        x = torch.randn(1, 128, 256)
        compiled = torch_mlir_flex.compile(model, (x,))
        with torch.no_grad():
            assert _rel_err(compiled(x), model(x)) < 1e-5
        assert compiled.num_inputs == 1
        assert compiled.lowered_ir.count("flex_gemm_f32") >= 2
    finally:
        tb.DIM, tb.HEADS, tb.SEQ, tb.HIDDEN = saved
