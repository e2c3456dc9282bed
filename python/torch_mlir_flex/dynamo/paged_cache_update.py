"""One Dynamo graph per step of transformers' continuous batching on its own
paged attention (`sdpa`, `paged|eager`) compiled for our backend: a
traceable `PagedAttentionCache.update`, for our backend's frames only.

transformers 5.25 wraps `PagedAttentionCache.update` (each attention
layer's write of the step's K/V into the paged cache and its read of the
request's whole K/V back) in `torch.compiler.disable` ("does not play well
with the views of the cache tensor": its allocator's per-layer K and V
views overlap, every one starting at its layer's first row and running to
the end of the cache). Dynamo breaks every layer's graph there: a 2-layer
Llama's step is 3 graphs, each compiled again when its guards fail.

`install()` replaces `PagedAttentionCache.update` by a function that,
while Dynamo traces a frame for our backend (device_check._tracing_for_us,
read once per frame), does the same update with traceable ops on one
tensor of the cache's rows instead of the overlapping views:

- the cache seen as rows [2 x slots, H_kv, D] is transformers' K view of
  the allocator's first layer (it starts at row 0): a tensor made outside
  the graph, so the compiled graph receives it as an input and updates it
  in place (backend/mutations.py; a view taken inside the graph would be
  written through a copy of the whole cache). Allocators of one model
  view one byte tensor from its start: all of them are written through
  the first allocator's rows (one graph input);
- a layer's K rows start at row 2 i P and its V rows at (2 i + 1) P (i:
  the layer's place among its allocator's layers, P: tokens per page; the
  layout transformers builds its views with): a view's row r is row
  r + offset;
- full-attention layers: `index_copy_` of the new K/V at `write_index` +
  offset, then, when the step reads the cache (`read_index` not empty),
  `index_select` at `read_index` + offset;
- sliding-window layers (a ring buffer; transformers reads before it
  writes): `index_select` at `read_index` + offset, the entries equal to
  the sentinel index replaced by the new K/V in order (transformers'
  `masked_scatter_`, as a cumulative count and a `where`), then the
  `index_copy_`;
- the keyword arguments transformers sets for the attention function (the
  layer type's `cu_seq_lens_k` as int32 and `max_length_k`) are set the
  same way.

Any other call (the MLA allocator of compressed latents, the block-table
decode path, `flex_paged`, whose own wrapper writes the cache:
hf/paged.py) and every call outside our backend's frames (eager,
inductor, Dynamo's `eager` backend) runs transformers' function unchanged,
graph break included. transformers' module may be imported after this
one: then the change is made when it is (an import hook that removes
itself).
"""

import functools
import sys

from .import_hook import after_import

_CACHE_MODULE = "transformers.generation.continuous_batching.cache"
_FLEX_PAGED = "flex_paged"  # hf/paged.py's attention (its update wrapper writes)

_original = None  # transformers' update once replaced


def _allocator_classes():
    """transformers' full-attention and sliding-window allocators (exact
    types: the MLA allocator of compressed latents subclasses the first)."""
    from transformers.generation.continuous_batching.cache_allocators import full_attention, sliding_attention

    return full_attention.FullAttentionCacheAllocator, sliding_attention.SlidingAttentionCacheAllocator


def _own_rows(allocator):
    """The allocator's cache as rows [2 x slots, H_kv, D]: transformers' K
    view of its first layer, which starts at row 0 (a tensor made outside
    the graph), or None. The compiled graph writes such an input in place;
    a view taken inside the graph (`cache_tensor.flatten(0, 1)`) is written
    through a slow copy (0.05 s per call for an 8 MiB cache, measured
    2026-12-07), so it is not used."""
    views = getattr(allocator, "_kv_token_views", None)
    if not views:
        return None
    first = views[allocator.layer_indices[0]][0]
    shape = allocator.cache_tensor.shape
    if tuple(first.shape) != (2 * shape[0], *shape[2:]) or first.dtype != allocator.cache_tensor.dtype:
        return None
    return first


def _rows(cache, allocator):
    """The rows this allocator's layers are written through, or None (then
    transformers' update runs). transformers' allocators all view one byte
    tensor from its start (a sliding-window and a full allocator of a
    Gemma2: the same memory, two tensor objects); two tensor objects would
    be two mutated graph inputs over one storage, so every allocator whose
    rows have the first allocator's shape and dtype (the same memory) is
    written through the first allocator's tensor: one graph input, updated
    by every layer in order."""
    own = _own_rows(allocator)
    if own is None:
        return None
    for other in cache.cache_allocators.values():
        rows = _own_rows(other)
        if rows is not None:
            same = tuple(rows.shape) == tuple(own.shape) and rows.dtype == own.dtype
            return rows if same else None
    return None


def _traceable(cache, layer_idx, kwargs, classes) -> bool:
    """Whether this call is one `_update` reproduces (read by Dynamo:
    guards on the attention name, the allocator's type, the block table,
    the cache's shapes)."""
    if kwargs.get("block_table") is not None:
        return False
    if cache.config._attn_implementation == _FLEX_PAGED:
        return False
    allocator = cache.layer_to_allocator[layer_idx]
    return type(allocator) in classes and _rows(cache, allocator) is not None


def _with_new(rows, index, new, sentinel):
    """`rows[index]`, the entries equal to `sentinel` replaced by the rows
    of `new` in order (the j-th sentinel by new[j]): transformers'
    `index_select` then `masked_scatter_` for a sliding-window layer."""
    import torch

    old = rows.index_select(0, index)
    is_new = index == sentinel
    j = (is_new.cumsum(0) - 1).clamp(min=0)
    return torch.where(is_new[:, None, None], new.index_select(0, j), old)


def _update(cache, key_states, value_states, layer_idx, kwargs, sliding_cls):
    """transformers' index-based update of a full-attention or
    sliding-window layer, on the shared rows: K/V [1, H_kv, T, D] in,
    [1, H_kv, R, D] out (R: the read index's length, or T when the step
    reads nothing). A full layer writes, then reads (its new K/V among
    them); a sliding layer reads its ring buffer first (the new tokens
    overwrite slots its earlier tokens attend), its new K/V at the read
    index's sentinel entries, then writes."""
    import torch

    allocator = cache.layer_to_allocator[layer_idx]
    kwargs["cu_seq_lens_k"] = kwargs["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
    kwargs["max_length_k"] = kwargs["max_length_k"][allocator.layer_type]
    read_index = kwargs["read_index"][allocator.index]
    write_index = kwargs["write_index"][allocator.index]

    rows = _rows(cache, allocator)
    page = allocator.tokens_per_page
    i = allocator.layer_indices.index(layer_idx)
    k_at, v_at = 2 * i * page, (2 * i + 1) * page
    new_k = key_states.squeeze(0).transpose(0, 1)  # [T, H_kv, D]
    new_v = value_states.squeeze(0).transpose(0, 1)
    k, v = new_k, new_v  # prefills only (nothing read): the new K/V are all there is
    if type(allocator) is sliding_cls and read_index.numel() != 0:
        k = _with_new(rows, read_index + k_at, new_k, allocator.sentinel_index + k_at)
        v = _with_new(rows, read_index + v_at, new_v, allocator.sentinel_index + v_at)
    rows.index_copy_(0, write_index + k_at, new_k)
    rows.index_copy_(0, write_index + v_at, new_v)
    if type(allocator) is not sliding_cls and read_index.numel() != 0:
        k = rows.index_select(0, read_index + k_at)
        v = rows.index_select(0, read_index + v_at)
    return k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0)


def _wrap(original):
    import torch

    from .device_check import _tracing_for_us

    ours = torch._dynamo.assume_constant_result(_tracing_for_us)
    classes = _allocator_classes()

    # Not original's __dict__: torch.compiler.disable's marks are there.
    @functools.wraps(original, updated=())
    def update(self, key_states, value_states, layer_idx, kwargs):
        if torch.compiler.is_compiling() and ours() and _traceable(self, layer_idx, kwargs, classes):
            return _update(self, key_states, value_states, layer_idx, kwargs, classes[1])
        return original(self, key_states, value_states, layer_idx, kwargs)

    update._flex_traceable_update = True
    return update


def _install_in(module) -> None:
    """Replaces the class's update (idempotent)."""
    global _original
    cls = module.PagedAttentionCache
    current = cls.update
    if getattr(current, "_flex_traceable_update", False):
        return
    _original = current
    cls.update = _wrap(current)


def install() -> None:
    """Makes the change above now or when transformers' module is imported
    (idempotent)."""
    after_import(_CACHE_MODULE, _install_in)


def uninstall() -> None:
    """Restores transformers' update (to measure without the change)."""
    global _original
    module = sys.modules.get(_CACHE_MODULE)
    if module is not None and _original is not None and \
            getattr(module.PagedAttentionCache.update, "_flex_traceable_update", False):
        module.PagedAttentionCache.update = _original
    _original = None
