"""Plain `torch_mlir_flex.compile` (no torch_mlir_flex.hf) of HF models built
as transformers documents them: a forward that takes input_ids only, one
with a padded attention_mask (transformers' data-dependent mask check), an
MoE model (`grouped_mm_fallback`): compile applies hf.compile's export
fixes to a model that holds a transformers model, for that call only. Also
`torch.compile(moe_model, backend=...)` with no graph in eager, and a
forward that takes a BlockMask built outside the model as attention_mask.
Logits match HF eager attention."""

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


class LogitsWithMask(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


@pytest.mark.parametrize("name", ["llama", "mixtral"])
def test_plain_compile_gets_the_hf_export_fixes(name):
    """A padded batch with attention_mask (transformers' data-dependent mask
    check) and an MoE model (`grouped_mm_fallback`) through plain compile:
    the fixes of hf.compile apply to the call, and are gone after it."""
    from transformers import masking_utils

    from .harness import kept_positions, make_inputs

    family = BY_NAME[name]
    flex, eager = build_models(family)
    inputs = make_inputs(family, 2)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    mask_builder = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["flex_attention"]
    fn = torch_mlir_flex.compile(LogitsWithMask(flex), (ids, mask), backend="tiled", opt_level=OPT_LEVEL)
    assert masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["flex_attention"] is mask_builder
    with torch.no_grad():
        want = eager(input_ids=ids, attention_mask=mask).logits
    keep = kept_positions(family, inputs)
    err = (fn(ids, mask) - want)[keep].abs().max().item()
    assert err <= TOLERANCE[family.dtype], f"{name}: max |ours - HF eager| = {err:.3g}"


def test_torch_compile_of_an_moe_model_runs_no_graph_in_eager():
    from torch_mlir_flex import dynamo

    dynamo.register()
    flex, eager = build_models(BY_NAME["mixtral"])
    ids = torch.randint(3, 128, (1, 21), generator=torch.Generator().manual_seed(5))
    torch._dynamo.reset()
    before = dynamo.stats.get("eager", 0)
    fn = torch.compile(flex, backend="torch_mlir_flex")
    with torch.no_grad():
        got = fn(input_ids=ids).logits
        want = eager(input_ids=ids).logits
    assert dynamo.stats.get("eager", 0) == before
    assert (got - want).abs().max().item() <= TOLERANCE[BY_NAME["mixtral"].dtype]
