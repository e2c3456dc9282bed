"""torch_mlir_flex.hf without compiling whole models: transformers stays
optional, the export patches keep HF semantics (checked eagerly against HF
eager attention for every fp32 family, including GPT-OSS sinks and T5 with
padding, which transformers' own CPU flex path refuses or breaks on), they
are undone afterwards, and bad calls raise FlexHFError."""

import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

import torch_mlir_flex.hf as flex_hf  # noqa: E402
from torch_mlir_flex.hf.patches import export_patches, flex_block_mask  # noqa: E402

from .families import FAMILIES, TOLERANCE  # noqa: E402
from .harness import build_models, kept_positions, make_inputs  # noqa: E402


def test_importing_torch_mlir_flex_does_not_import_transformers():
    code = ("import sys, torch_mlir_flex, torch_mlir_flex.hf; "
            "assert 'transformers' not in sys.modules, 'transformers imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("family", [f for f in FAMILIES if f.dtype == torch.float32], ids=lambda f: f.name)
def test_patched_flex_path_matches_hf_eager(family, batch):
    """Our attention and mask functions, run eagerly (uncompiled flex)."""
    flex, eager = build_models(family)
    inputs = make_inputs(family, batch)
    with torch.no_grad(), export_patches(caller_gave_position_ids=False):
        ours = flex(**inputs).logits
    with torch.no_grad():
        ref = eager(**inputs).logits
    keep = kept_positions(family, inputs)
    assert (ours - ref)[keep].abs().max().item() <= TOLERANCE[torch.float32]


def test_patches_are_undone():
    from transformers import masking_utils
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    before = (ALL_ATTENTION_FUNCTIONS["flex_attention"], masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["flex_attention"],
              masking_utils.find_packed_sequence_indices)
    with pytest.raises(RuntimeError):
        with export_patches(caller_gave_position_ids=False):
            assert masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["flex_attention"] is flex_block_mask
            raise RuntimeError("inside")
    after = (ALL_ATTENTION_FUNCTIONS["flex_attention"], masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["flex_attention"],
             masking_utils.find_packed_sequence_indices)
    assert before == after


def test_block_mask_keeps_causal_and_padding():
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)
    bm = flex_block_mask(2, 5, 5, attention_mask=mask)
    b, m, n = torch.meshgrid(torch.arange(2), torch.arange(5), torch.arange(5), indexing="ij")
    got = bm.mask_mod(b, torch.zeros_like(b), m, n)
    assert torch.equal(got, (n <= m) & mask[b, n])


def test_bad_calls_raise():
    family = FAMILIES[0]
    flex, _ = build_models(family)
    with pytest.raises(flex_hf.FlexHFError, match="dict"):
        flex_hf.compile(flex, [torch.zeros(1, 3, dtype=torch.long)])
    with pytest.raises(flex_hf.FlexHFError, match="input_ids"):
        flex_hf.compile(flex, {"input_ids": [1, 2, 3]})
    with pytest.raises(flex_hf.FlexHFError, match="PreTrainedModel"):
        flex_hf.compile("llama", {"input_ids": torch.zeros(1, 3, dtype=torch.long)})


class _TinyLM(torch.nn.Module):
    """Embedding + one flex attention with a padding mask + head; keyword
    inputs like an HF model."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(32, 16)
        self.head = torch.nn.Linear(16, 32)

    def forward(self, input_ids, attention_mask, return_dict=True):
        from torch.nn.attention.flex_attention import flex_attention

        x = self.emb(input_ids).unsqueeze(1)
        keep = attention_mask.bool()
        out = flex_attention(x, x, x, score_mod=lambda s, b, h, m, n: torch.where(keep[b, n], s, -float("inf")))
        return self.head(out.squeeze(1))


def test_compiled_model_call_convention():
    # The eager flex calls of the tests above fill dynamo's cache for
    # flex_attention's internal frame past its recompile limit; torch 2.13
    # then fails while explaining the guard miss inside torch.export.
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _TinyLM()
    ids = torch.randint(0, 32, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :2] = 0
    fn = flex_hf.compile(model, {"input_ids": ids, "attention_mask": mask}, opt_level=0)
    with torch.no_grad():
        ref = model(ids, mask)
    torch.testing.assert_close(fn(input_ids=ids, attention_mask=mask), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fn(ids, attention_mask=mask), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fn.with_backend("reference", opt_level=0)(ids, mask), ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(flex_hf.FlexHFError, match="compiled for inputs"):
        fn(input_ids=ids)
    with pytest.raises(flex_hf.FlexHFError, match="given twice"):
        fn(ids, input_ids=ids, attention_mask=mask)


def test_grouped_mm_dense_matches_transformers_kernel():
    import transformers.integrations.moe  # noqa: F401  (registers the op)

    from torch_mlir_flex.hf.moe import grouped_mm_dense

    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(10, 8, generator=g), torch.randn(4, 8, 6, generator=g)
    for offs in ([2, 5, 5, 9], [0, 0, 10, 10], [3, 4, 6, 7]):
        offs = torch.tensor(offs)
        expected = torch.ops.transformers.grouped_mm_fallback(x, w, offs=offs)
        torch.testing.assert_close(grouped_mm_dense(x, w, offs), expected)

