"""Export-time replacements inside transformers, active only within
`export_patches()` and restored afterwards (the user's model and
transformers' global state are left as they were). `patches_for(model)`
applies them to any compile of a model that holds a transformers model
(plain `torch_mlir_flex.compile`, the torch.compile backend), scoped to
that compile.

1. Attention function "flex_attention" -> `attention.flex_attention_forward`
   (direct flex_attention call; attention sinks through lse on CPU).
2. Mask function "flex_attention" -> `flex_block_mask`: transformers'
   version adds the padding mask only `if not fast_all(attention_mask)`, a
   data-dependent branch that torch.export cannot trace
   (GuardOnDataDependentSymNode). Ours always adds it: for an all-ones mask
   the padding term keeps every key, so the result is the same.
3. Packed-sequence detection (`find_packed_sequence_indices`, run when
   attention_mask is None) when the caller gave no position_ids: the model
   then derives them from an arange, which is never packed, so the answer is
   "not packed" (None) and the cumsum it would trace is not needed. With
   caller-given position_ids transformers' detection stays.
4. MoE experts (``transformers::grouped_mm_fallback``) get a static-shape
   decomposition (`moe.grouped_mm_decomposition`).
"""

import contextlib


def flex_block_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                    attention_mask=None, device="cpu", **kwargs):
    """transformers' flex mask builder without the data-dependent check."""
    from torch.nn.attention.flex_attention import create_block_mask
    from transformers import masking_utils as mu

    mask_function = mask_function or mu.causal_mask_function
    if attention_mask is not None:
        padding = mu.prepare_padding_mask(attention_mask, kv_length, kv_offset)
        mask_function = mu.and_masks(mask_function, mu.padding_mask_function(padding))
    mask_function = mu.add_offsets_to_mask_function(mask_function, q_offset, kv_offset)
    return create_block_mask(mask_function, B=batch_size, H=None, Q_LEN=q_length, KV_LEN=kv_length,
                             device=device)


def _no_packed_sequences(position_ids):
    return None


@contextlib.contextmanager
def _override(mapping, key, value):
    had = key in mapping._local_mapping
    old = mapping._local_mapping.get(key)
    mapping[key] = value
    try:
        yield
    finally:
        if had:
            mapping._local_mapping[key] = old
        else:
            del mapping._local_mapping[key]


@contextlib.contextmanager
def _set_attr(owner, name, value):
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


@contextlib.contextmanager
def export_patches(caller_gave_position_ids: bool):
    """Install the replacements above for the duration of the block."""
    from transformers import masking_utils
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from .attention import flex_attention_forward
    from .moe import grouped_mm_decomposition

    with contextlib.ExitStack() as stack:
        stack.enter_context(_override(ALL_ATTENTION_FUNCTIONS, "flex_attention", flex_attention_forward))
        stack.enter_context(_override(masking_utils.ALL_MASK_ATTENTION_FUNCTIONS, "flex_attention",
                                      flex_block_mask))
        if not caller_gave_position_ids:
            stack.enter_context(_set_attr(masking_utils, "find_packed_sequence_indices", _no_packed_sequences))
        stack.enter_context(grouped_mm_decomposition())
        yield


@contextlib.contextmanager
def patches_for(model):
    """The replacements a compile of `model` needs: all of them
    (`export_patches`, transformers' own packed-sequence detection kept)
    when `model` is or holds a transformers PreTrainedModel; the MoE
    decomposition alone for other modules (a graph Dynamo captured from a
    transformers model calls ``transformers::grouped_mm_fallback``) when
    transformers is loaded; nothing otherwise. transformers is never
    imported here."""
    import sys

    import torch

    from .moe import grouped_mm_decomposition

    if "transformers" not in sys.modules:
        yield
        return
    from transformers import PreTrainedModel

    holds_hf = isinstance(model, torch.nn.Module) and any(isinstance(m, PreTrainedModel) for m in model.modules())
    with export_patches(caller_gave_position_ids=True) if holds_hf else grouped_mm_decomposition():
        yield
