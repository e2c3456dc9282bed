"""Hugging Face transformers models through torch-mlir-flex.

    import torch_mlir_flex.hf as flex_hf
    model = LlamaForCausalLM._from_config(cfg, attn_implementation="flex_attention")
    fn = flex_hf.compile(model, {"input_ids": ids, "attention_mask": mask})
    logits = fn(input_ids=ids, attention_mask=mask)

`compile` exports the model with the export-time problems of transformers'
flex path handled here (see `patches`), compiles it with
`torch_mlir_flex.compile` and returns a `CompiledHFModel`. `generator`
compiles a causal LM's prefill and decode over a static KV cache for text
generation (`CompiledGenerator.generate`, as `model.generate`). transformers is
optional: nothing in this package imports it before `compile` is called
(`sinks` needs only torch). Details: docs/hf.md.
"""


def __getattr__(name):
    if name in ("compile", "CompiledHFModel", "FlexHFError"):
        from . import model

        return getattr(model, name)
    if name in ("generator", "CompiledGenerator"):
        from . import generate

        return getattr(generate, name)
    if name in ("register_paged_flex", "paged_flex_attention_forward"):
        from . import paged

        return getattr(paged, name)
    if name in ("flex_attention_with_sinks", "renormalize_with_sinks"):
        from . import sinks

        return getattr(sinks, name)
    raise AttributeError(f"module 'torch_mlir_flex.hf' has no attribute {name!r}")
