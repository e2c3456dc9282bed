"""Build a family's model twice on the same weights (flex_attention and HF
eager attention), make its inputs, compile with torch_mlir_flex.hf and
compare the logits of non-padding positions."""

import functools

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from .families import BY_NAME, TOLERANCE, VOCAB

# Sequence lengths, deliberately not multiples of 128 (nor of 16).
SEQ_LEN = {1: 37, 2: 29}
DECODER_LEN = 11
PAD = 5  # padding tokens in the second row of a batch of 2
# The suite JITs at LLVM -O0: whole models with their weights as constants
# take far longer at -O2, and tiny models run in milliseconds either way.
OPT_LEVEL = 0


def build_models(family):
    """(flex model, eager model) with identical weights, in eval mode."""
    import transformers

    auto = getattr(transformers, family.auto_class)
    # One config each: from_config records the attention implementation in
    # the config object it is given.
    torch.manual_seed(0)
    flex = auto.from_config(family.config(), attn_implementation="flex_attention", dtype=family.dtype).eval()
    eager = auto.from_config(family.config(), attn_implementation="eager", dtype=family.dtype).eval()
    assert flex.config._attn_implementation == "flex_attention", flex.config._attn_implementation
    eager.load_state_dict(flex.state_dict())
    return flex, eager


def make_inputs(family, batch):
    """Batch 1: input_ids only (no attention_mask). Batch 2: attention_mask
    with the second row padded on the family's padding side."""
    g = torch.Generator().manual_seed(batch)
    seq = SEQ_LEN[batch]
    inputs = {"input_ids": torch.randint(3, VOCAB, (batch, seq), generator=g)}
    if batch > 1:
        mask = torch.ones(batch, seq, dtype=torch.long)
        if family.padding_side == "left":
            mask[1, :PAD] = 0
        else:
            mask[1, seq - PAD:] = 0
        inputs["input_ids"][mask == 0] = 0
        inputs["attention_mask"] = mask
    if family.kind == "seq2seq":
        inputs["decoder_input_ids"] = torch.randint(3, VOCAB, (batch, DECODER_LEN), generator=g)
    return inputs


def kept_positions(family, inputs):
    """Bool [B, S_out]: the output positions that the comparison covers
    (padded query rows of HF eager attend uniformly to masked keys, flex gives
    them zero; neither is meaningful)."""
    ids = inputs.get("decoder_input_ids", inputs["input_ids"])
    if family.kind == "seq2seq" or "attention_mask" not in inputs:
        return torch.ones(ids.shape, dtype=torch.bool)
    return inputs["attention_mask"].bool()


@functools.lru_cache(maxsize=None)
def compiled(name, batch, backend):
    """(compiled model, inputs, HF eager logits); the first backend asked for
    a (family, batch) exports, the others reuse its flex IR."""
    import torch_mlir_flex.hf as flex_hf

    family = BY_NAME[name]
    flex, eager = _models(name)
    inputs = make_inputs(family, batch)
    first = _COMPILED.get((name, batch))
    if isinstance(first, Exception):
        raise first  # the export failed already; do not spend time on it again
    try:
        if first is None:
            fn = flex_hf.compile(flex, inputs, backend=backend, opt_level=OPT_LEVEL)
            _COMPILED[(name, batch)] = fn
        else:
            fn = first.with_backend(backend, opt_level=OPT_LEVEL)
    except Exception as e:
        if getattr(e, "stage", None) != "lower":  # a failure before the backend's own pipeline
            _COMPILED.setdefault((name, batch), e)
        raise
    with torch.no_grad():
        ref = eager(**inputs).logits
    return fn, inputs, ref


# (family, batch) -> the first CompiledHFModel, or the exception its compile raised.
_COMPILED = {}


@functools.lru_cache(maxsize=None)
def _models(name):
    return build_models(BY_NAME[name])


def max_error(name, batch, backend):
    """max |ours - eager| over kept positions, and the tolerance."""
    family = BY_NAME[name]
    fn, inputs, ref = compiled(name, batch, backend)
    out = fn(**inputs)
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
    keep = kept_positions(family, inputs)
    err = (out.float() - ref.float())[keep].abs().max().item()
    return err, TOLERANCE[family.dtype]
