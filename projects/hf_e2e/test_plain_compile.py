"""Plain `torch_mlir_flex.compile` (no torch_mlir_flex.hf) of HF models built
as transformers documents them, where the model allows it: a forward that
takes input_ids only (no attention_mask, so no data-dependent mask check in
transformers' flex mask builder). Logits match HF eager attention. MoE
families need torch_mlir_flex.hf (it decomposes transformers'
`grouped_mm_fallback` custom op; plain compile names that op)."""

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
