"""One Dynamo graph for a transformers flex_attention model compiled with
`torch.compile(model, backend="torch_mlir_flex")`: what makes Dynamo break
the forward into pieces there, and the three changes (active only while
Dynamo traces a frame for our backend; 1 and 3 in grad mode only:
`_applies`) that remove the breaks.

1. `create_block_mask(..., _compile=True)`. transformers builds its
   BlockMask inside `forward` with `_compile=True`
   (`masking_utils.flex_attention_mask`,
   `integrations.flex_attention.create_block_causal_mask_flex`). torch 2.13
   then calls `warnings.warn(..., DeprecationWarning)`, which Dynamo cannot
   trace (a graph break per call: 8 per training step of a 2-layer Llama),
   and `torch.compile(create_block_mask)`, a nested compile. Dynamo's
   `reorderable_logging_functions` cannot take that call (the warning
   category is not a constant it can reorder), and ignoring `warnings.warn`
   (`ignore_logging_functions`) would be global. `install()` wraps
   `create_block_mask` (torch's module attribute, and the names transformers
   imported): while Dynamo traces for our backend a call with `_compile=True`
   runs with `_compile=False`, so the mask's tensor ops (vmap'd mask_mod,
   block sums, sort) are traced into the model's graph; elsewhere (eager,
   inductor, other backends) torch's function runs with the caller's
   arguments, warning included.

2. Stale side-effect table after a higher-order op. Dynamo's
   `SideEffectsProxyDict` (an object's `__dict__` while tracing) keeps the
   `SideEffects` table of the moment it was made; tracing a higher-order op
   (each `flex_attention` call) replaces `output.side_effects` with a copy,
   so attributes set later on an object first seen before it go to the old
   table and cannot be read back: transformers' `DynamicLayer.device`, set
   in `lazy_initialization` of layer 1 after layer 0's attention, gives
   "AttributeError: 'DynamicLayer' object has no attribute 'device'" and
   Dynamo gives up on the whole forward. `install()` makes the proxy read the
   output graph's current table, for frames traced for our backend only.

3. The padding check. With an `attention_mask` (a tokenizer's, HF
   Trainer's), transformers' flex mask builder adds the padding term only
   `if not fast_all(attention_mask)`: a branch on tensor data, a graph break.
   While Dynamo traces for our backend, the "flex_attention" mask function
   is `hf.patches.flex_block_mask`, which always adds it (an all-ones mask
   keeps every key: the same BlockMask). transformers' `masking_utils` may be
   imported after this module: then the change is made when it is (an
   import hook that removes itself).
"""

import functools
import inspect
import sys

from .import_hook import after_import

_MASKING = "transformers.masking_utils"

_installed = None  # torch's create_block_mask once wrapped


def _ours_for(output) -> bool:
    from .device_check import _is_ours

    return _is_ours(getattr(output, "compiler_fn", None))


def _applies() -> bool:
    """Changes 1 and 3 apply to training graphs (grad mode on). Under
    no_grad (generate, inference) transformers' path is kept, breaks
    included: with dynamic sizes torch.export of the traced sliding-window
    masks of Mistral and Gemma2 fails ("your tensor may have escaped from
    inside a function being vmapped") and those graphs ran in eager."""
    import torch

    return torch.is_grad_enabled()


def _wrap_create_block_mask(original):
    import torch

    from .device_check import _tracing_for_us

    ours = torch._dynamo.assume_constant_result(_tracing_for_us)
    position = list(inspect.signature(original).parameters).index("_compile")

    @functools.wraps(original)
    def create_block_mask(*args, **kwargs):
        if torch.compiler.is_compiling() and ours() and _applies():
            if len(args) > position:
                args = args[:position] + (False,) + args[position + 1:]
            elif kwargs.get("_compile", False):
                kwargs["_compile"] = False
        return original(*args, **kwargs)

    return create_block_mask


def _rebind_in_transformers(original, wrapped) -> None:
    """transformers imported torch's function by name before we wrapped it."""
    for name in (_MASKING, "transformers.integrations.flex_attention"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "create_block_mask", None) is original:
            module.create_block_mask = wrapped


def _wrap_flex_mask_function(masking) -> None:
    """transformers' "flex_attention" mask function, without its data-dependent
    padding check while Dynamo traces for us (idempotent)."""
    import torch

    from ..hf.patches import flex_block_mask
    from .device_check import _tracing_for_us

    mapping = masking.AttentionMaskInterface._global_mapping
    original = mapping.get("flex_attention")
    if original is None or getattr(original, "_flex_traceable", False):
        return
    ours = torch._dynamo.assume_constant_result(_tracing_for_us)

    @functools.wraps(original)
    def flex_attention_mask(*args, **kwargs):
        if torch.compiler.is_compiling() and ours() and _applies():
            return flex_block_mask(*args, **kwargs)
        return original(*args, **kwargs)

    flex_attention_mask._flex_traceable = True
    mapping["flex_attention"] = flex_attention_mask


def _current_side_effects() -> None:
    """SideEffectsProxyDict reads its output graph's current table (ours)."""
    from torch._dynamo.variables import dicts

    proxy = dicts.SideEffectsProxyDict
    if isinstance(proxy.__dict__.get("side_effects"), property):
        return
    init = proxy.__init__

    @functools.wraps(init)
    def __init__(self, item, tx):
        output = tx.output
        self.__dict__["_flex_output"] = output if _ours_for(output) else None
        init(self, item, tx)

    def _get(self):
        output = self.__dict__.get("_flex_output")
        return output.side_effects if output is not None else self.__dict__["_flex_side_effects"]

    def _set(self, value):
        self.__dict__["_flex_side_effects"] = value

    proxy.__init__ = __init__
    proxy.side_effects = property(_get, _set)


def install() -> None:
    """Makes the three changes above (idempotent)."""
    global _installed
    import torch.nn.attention.flex_attention as fa

    if _installed is None:
        original = fa.create_block_mask
        wrapped = _wrap_create_block_mask(original)
        fa.create_block_mask = wrapped
        _installed = original
    _rebind_in_transformers(_installed, fa.create_block_mask)
    _current_side_effects()
    after_import(_MASKING, _wrap_flex_mask_function)
