"""Plain `torch_mlir_flex.compile` (no torch_mlir_flex.hf) of HF models built
as transformers documents them, where the model allows it: a forward that
takes input_ids only (no attention_mask, so no data-dependent mask check in
transformers' flex mask builder). Logits match HF eager attention. MoE
families need torch_mlir_flex.hf (it decomposes transformers'
`grouped_mm_fallback` custom op; plain compile names that op). Also a
forward that takes a BlockMask built outside the model as attention_mask."""

import pytest

import torch_mlir_flex
import torch

pytest.importorskip("transformers")

from .families import BY_NAME, TOLERANCE  # noqa: E402
from .harness import OPT_LEVEL, build_models  # noqa: E402


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).logits


@pytest.mark.parametrize("name", ["llama", "mistral", "gemma2", "gpt_neox"])
def test_plain_compile_matches_hf_eager(name):
    family = BY_NAME[name]
    flex, eager = build_models(family)
    ids = torch.randint(3, 128, (1, 37), generator=torch.Generator().manual_seed(7))
    fn = torch_mlir_flex.compile(Logits(flex), (ids,), backend="tiled", opt_level=OPT_LEVEL)
    with torch.no_grad():
        want = eager(input_ids=ids).logits
    err = (fn(ids) - want).abs().max().item()
    assert err <= TOLERANCE[family.dtype], f"{name}: max |ours - HF eager| = {err:.3g}"


class LogitsWithBlockMask(torch.nn.Module):
    """transformers takes a prebuilt 4-D BlockMask as attention_mask."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, block_mask):
        return self.model(input_ids=input_ids, attention_mask=block_mask).logits


def test_plain_compile_with_block_mask_argument():
    from torch.nn.attention.flex_attention import and_masks, create_block_mask

    def causal(b, h, q, kv):
        return q >= kv

    def same_doc(doc):
        def mask(b, h, q, kv):
            return doc[q] == doc[kv]
        return mask

    def docs_mask(*lengths):
        doc = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
        return create_block_mask(and_masks(causal, same_doc(doc)), None, None, 37, 37, device="cpu")

    flex, eager = build_models(BY_NAME["llama"])
    tol = TOLERANCE[BY_NAME["llama"].dtype]
    ids = torch.randint(3, 128, (1, 37), generator=torch.Generator().manual_seed(7))
    model = LogitsWithBlockMask(flex)
    fn = torch_mlir_flex.compile(model, (ids, docs_mask(37)), backend="tiled", opt_level=OPT_LEVEL)
    with torch.no_grad():
        want = eager(input_ids=ids).logits  # one document: causal
        err = (fn(ids, docs_mask(37)) - want).abs().max().item()
        assert err <= tol, f"max |ours - HF eager| = {err:.3g}"
        packed = docs_mask(10, 20, 7)  # same mask_mod over other documents: no recompilation
        err = (fn(ids, packed) - model(ids, packed)).abs().max().item()
        assert err <= tol, f"max |ours - flex eager| = {err:.3g}"
        assert (model(ids, packed) - want).abs().max() > 1e-3  # the packed mask does change the logits
