"""Paged flex attention for transformers' continuous batching.

    import torch_mlir_flex.hf as flex_hf
    flex_hf.register_paged_flex()
    model.set_attn_implementation("flex_paged")
    out = model.generate_batch(prompts, generation_config=...,
                               continuous_batching_config=...)

transformers 5.25's continuous batching (`generate_batch`,
`ContinuousBatchingManager`, `transformers serve`) keeps K/V in a paged
cache and runs the model on a flattened batch: input_ids [1, T], requests
delimited by `cu_seq_lens_q` / `cu_seq_lens_k`. Its SDPA and eager paths
gather each request's cache into a contiguous K/V per layer and step
(`index_select` by `read_index`). This attention function instead calls
flex_attention over the layer's whole cache storage, read in place, for
full-attention and sliding-window layers alike:

- K and V are views of the cache tensor from the layer's first K / V row
  (the origin of transformers' per-layer views), [1, H_kv, n, D] with one
  n for all layers: row r is the physical slot r that `read_index` /
  `write_index` address (rows holding other layers' pages are never
  attended). A compiled graph receives the contiguous cache tensor and
  takes the views itself (a strided view argument would be copied);
- full-attention layers: the model's `cache.update` writes the step's new
  K/V into the layer's pages (`index_copy_` on the cache tensor at
  `write_index`, as transformers' allocator does) and skips the read-back
  gather; one flex_attention call reads the cache;
- sliding-window layers (a ring buffer of `sliding_window` slots per
  request: the token at position p lives in slot p % window): a chunk of
  new tokens overwrites slots its own earlier tokens still attend, so the
  cache is read before the write, in two flex_attention calls merged by
  their log-sum-exp: the ring buffer as it was (the slots `read_index`
  names) and the step's new K/V; then the attention function writes the
  new K/V into the ring;
- the writes are traced: transformers' own update is
  `torch.compiler.disable`d, which would split every layer's graph; ours
  is a mutated input of the one compiled graph per step;
- index maps and BlockMasks (hf/paged_mask.py), built once per step before
  the model runs (a wrapper of the runner's `compute_batch`) and passed as
  the model keyword `flex_paged_masks` (inputs of the compiled graph):
  mask_mod = same request, causal, and inside the window for sliding
  layers; a KV block is one page, so other requests' pages, other layers'
  rows and pages out of the window are skipped block-wise. score_mod: the
  config's softcap if any; GQA through `enable_gqa`.

Compiled, a step is one Dynamo graph with no graph break: a request
stream is one compilation when transformers pads every step to
`max_batch_tokens` (its padding with a compile config and no padding
intervals); steps padded to intervals compile a few times (Dynamo's
automatic dynamic shapes), and CompileConfig(dynamic=True) compiles too
(the BlockMask's block sizes are read as constants: paged_mask.py).

transformers 5.25 strips a "paged|" prefix (other than "paged|eager") and
its continuous batching accepts only "paged|eager", "sdpa" or flash names;
`register_paged_flex()` registers the function under NAME and lets the
continuous-batching manager accept NAME (a wrapper of its check); its
wrappers of `PagedAttentionCache.update` and `ModelRunner.compute_batch`
change nothing for other attention implementations. Details:
docs/serving.md, "Paged flex attention".
"""

import weakref

import torch
from torch.nn.attention.flex_attention import AuxRequest, flex_attention

from . import paged_mask
from .paged_mask import is_sliding, reads_full_in_place

NAME = "flex_paged"
# The model passes the cache to `cache.update` only; the wrapped update hands
# it to the attention function under this keyword.
_CACHE_KWARG = "flex_paged_cache"
# The step's masks (one entry per cache allocator, by its index), built
# before the model runs and passed to the model as this keyword.
_MASKS_KWARG = "flex_paged_masks"

_registered = False


def register_paged_flex():
    """Register `paged_flex_attention_forward` with transformers'
    AttentionInterface under NAME (mask interface: none; continuous batching
    passes no mask) and let continuous batching accept NAME. Idempotent."""
    global _registered
    if _registered:
        return NAME
    from transformers import AttentionInterface
    from transformers.generation.continuous_batching import cache as cb_cache
    from transformers.generation.continuous_batching import continuous_api, model_runner
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(NAME, paged_flex_attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, _no_mask)
    _wrap_cb_check(continuous_api.ContinuousBatchingManager)
    _wrap_cache_update(cb_cache.PagedAttentionCache)
    _wrap_compute_batch(model_runner.ModelRunner)
    _registered = True
    return NAME


def _no_mask(*args, **kwargs):
    return None


def _wrap_cb_check(manager_cls):
    original = manager_cls.switch_to_cb_friendly_attn

    def switch_to_cb_friendly_attn(self, model, auto_switch_to_flash=True):
        if model.config._attn_implementation == NAME:
            return None  # ours reads the paged cache itself
        return original(self, model, auto_switch_to_flash)

    manager_cls.switch_to_cb_friendly_attn = switch_to_cb_friendly_attn


def _wrap_cache_update(cache_cls):
    original = cache_cls.update

    @torch.compiler.disable
    def gathered_update(self, key_states, value_states, layer_idx, kwargs):
        # transformers' own update, out of the graph: every other attention
        # implementation and cache allocator (refused by flex_paged's call).
        if self.config._attn_implementation == NAME:
            kwargs[_CACHE_KWARG] = self  # the attention function reads the cache
        return original(self, key_states, value_states, layer_idx, kwargs)

    def update(self, key_states, value_states, layer_idx, kwargs):
        if self.config._attn_implementation == NAME and kwargs.get("block_table") is None:
            allocator = self.layer_to_allocator[layer_idx]
            if reads_full_in_place(allocator):
                return _write_in_place(self, key_states, value_states, layer_idx, kwargs)
            if is_sliding(allocator):
                # Read in place by the attention function, which writes after.
                _layer_step(self, layer_idx, kwargs)
                return key_states, value_states
        if self.config._attn_implementation != NAME:  # traceable for our backend: dynamo/paged_cache_update.py
            return original(self, key_states, value_states, layer_idx, kwargs)
        return gathered_update(self, key_states, value_states, layer_idx, kwargs)

    update._flex_paged_wrapped = True
    if not getattr(original, "_flex_paged_wrapped", False):
        cache_cls.update = update


def _wrap_compute_batch(runner_cls):
    original = runner_cls.compute_batch

    def compute_batch(self, model, batch_data):
        if model.config._attn_implementation == NAME and batch_data.get("block_table") is None:
            batch_data = dict(batch_data)
            _record_floats(model)
            _share_rows(batch_data["cache"])
            batch_data[_MASKS_KWARG] = paged_mask.step_masks(batch_data)
        return original(self, model, batch_data)

    compute_batch._flex_paged_wrapped = True
    if not getattr(original, "_flex_paged_wrapped", False):
        runner_cls.compute_batch = compute_batch


# The allocator's cache rows, one tensor object for all the allocators
# that view the same storage the same way (_share_rows).
_ROWS = "_flex_paged_rows"


def _share_rows(cache):
    """Give every allocator its cache as rows [slots * 2, H_kv, D], one
    tensor object per storage and layout. transformers' allocators each
    view one shared byte tensor (a full and a sliding-window allocator:
    the same rows, as two tensors). Compiled, two tensors of one storage
    are two graph inputs, each updated in place and written back whole:
    the second write-back would undo the first allocator's writes. One
    object is one graph input (Dynamo deduplicates it), updated by every
    layer in order. Outside any compiled graph (the runner's wrapper)."""
    shared = {}
    for allocator in cache.cache_allocators.values():
        t = getattr(allocator, "cache_tensor", None)
        if t is None:
            continue
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype, tuple(t.shape), t.stride())
        if key not in shared:
            rows = getattr(allocator, _ROWS, None)
            if rows is None or getattr(allocator, _ROWS + "_of", None) is not t:
                rows = t.view(-1, allocator.num_key_value_heads, allocator.head_dim)
                torch._dynamo.mark_static_address(rows)  # as transformers marks the cache
            shared[key] = rows
        setattr(allocator, _ROWS, shared[key])
        setattr(allocator, _ROWS + "_of", t)


# layer index -> the float attributes of the model's layers of that index
# and of its config (scaling, softcap, ...), recorded outside the graph as
# their repr: Dynamo would make floats read from here symbolic too.
_LAYER_FLOATS = {}
_recorded = weakref.WeakSet()


def _record_floats(model):
    """Candidates for `_pinned`, once per model (the runner's wrapper)."""
    if model in _recorded:
        return
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    common = {v for v in vars(config).values() if type(v) is float}
    for m in model.modules():
        idx = getattr(m, "layer_idx", None)
        if type(idx) is int:
            own = {v for v in vars(m).values() if type(v) is float}
            known = set(_LAYER_FLOATS.get(idx, ()))
            _LAYER_FLOATS[idx] = tuple(sorted(known | {repr(v) for v in own | common}))
    _recorded.add(model)


def _pinned(value, layer_idx):
    """A Python float for `value` (the layer's scaling or softcap). Under
    CompileConfig(dynamic=True) Dynamo passes a module's float attribute
    as a symbolic float, which flex_attention's scale and a score_mod's
    capture cannot be compiled with (Dynamo refuses the capture; our
    backend the scale): compared with the layer's recorded floats (a Dynamo
    guard), the equal constant is returned. A plain float compares equal to
    itself: unchanged."""
    if value is None:
        return value
    for text in _LAYER_FLOATS.get(layer_idx, ()):
        c = float(text)  # a constant to Dynamo
        if value == c:
            return c
    return value


def _layer_rows(allocator, layer_idx):
    """The allocator's cache as rows [slots * 2, H_kv, D] (contiguous), the
    first rows of the layer's K and V views, and the number of slots n
    addressed in every layer's views (paged_mask.num_slots). Plain integers
    from the layout transformers builds its views with (a page of K rows,
    then a page of V rows, per layer and block; sliding-window allocators
    share the layout)."""
    rows = getattr(allocator, _ROWS, None)
    if rows is None:  # the model run without the runner's wrapper
        rows = allocator.cache_tensor.view(-1, allocator.num_key_value_heads, allocator.head_dim)
    page = allocator.tokens_per_page
    i = allocator.layer_indices.index(layer_idx)
    return rows, 2 * i * page, (2 * i + 1) * page, paged_mask.num_slots(allocator)


def _layer_step(cache, layer_idx, kwargs):
    """What transformers' update puts into `kwargs` for the attention
    function (the layer type's sequence lengths), and the cache."""
    allocator = cache.layer_to_allocator[layer_idx]
    kwargs["cu_seq_lens_k"] = kwargs["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
    kwargs["max_length_k"] = kwargs["max_length_k"][allocator.layer_type]
    kwargs[_CACHE_KWARG] = cache


def _write_rows(allocator, layer_idx, write_index, key_states, value_states):
    """The step's K/V ([1, H_kv, T, D]) into the layer's slots at
    `write_index`: an indexed in-place write on the cache tensor."""
    rows, k_at, v_at, _ = _layer_rows(allocator, layer_idx)
    rows.index_copy_(0, write_index + k_at, key_states[0].transpose(0, 1))
    rows.index_copy_(0, write_index + v_at, value_states[0].transpose(0, 1))


def _write_in_place(cache, key_states, value_states, layer_idx, kwargs):
    """transformers' write of a full-attention layer's step, traced (its
    update is `torch.compiler.disable`d). Returns the new K/V (the attention
    reads the cache in place)."""
    _layer_step(cache, layer_idx, kwargs)
    allocator = cache.layer_to_allocator[layer_idx]
    _write_rows(allocator, layer_idx, kwargs["write_index"][allocator.index], key_states, value_states)
    return key_states, value_states


def _check_call(module, dropout, kwargs):
    cache = kwargs.get(_CACHE_KWARG)
    if cache is None or "cu_seq_lens_q" not in kwargs:
        raise ValueError(
            f"attention '{NAME}' runs only under transformers' continuous batching "
            "(generate_batch / ContinuousBatchingManager): no paged cache in its arguments")
    if dropout:
        raise ValueError(f"attention '{NAME}' is for inference: dropout={dropout} is not supported")
    if kwargs.get("block_table") is not None:
        raise ValueError(f"attention '{NAME}' does not take transformers' block-table decode path "
                         "(max_blocks_per_request must be 0)")
    if getattr(module, "sinks", None) is not None:
        raise ValueError(f"attention '{NAME}' does not support attention sinks")
    allocator = cache.layer_to_allocator[module.layer_idx]
    if not (reads_full_in_place(allocator) or is_sliding(allocator)):
        raise ValueError(f"attention '{NAME}' supports full and sliding-window attention caches, "
                         f"not {type(allocator).__name__}")
    return allocator


def paged_flex_attention_forward(module, query, key, value, attention_mask, scaling=None,
                                 dropout=0.0, softcap=None, **kwargs):
    """transformers' attention-function contract for the paged cache: query
    [1, Hq, T, D], key/value the step's new K/V [1, H_kv, T, D]; returns
    ([1, T, Hq, D], None)."""
    allocator = _check_call(module, dropout, kwargs)
    scaling, softcap = _pinned(scaling, module.layer_idx), _pinned(softcap, module.layer_idx)
    masks = kwargs.get(_MASKS_KWARG)
    mask = masks[allocator.index] if masks is not None else None
    if mask is None:
        mask = _layer_masks(allocator, query.shape[2], kwargs)
    rows, k_at, v_at, n = _layer_rows(allocator, module.layer_idx)
    # Views of the contiguous cache rows taken here, so that a compiled
    # graph receives the cache itself (no copy of a strided view).
    k = rows[k_at:k_at + n].unsqueeze(0).transpose(1, 2)
    v = rows[v_at:v_at + n].unsqueeze(0).transpose(1, 2)
    score_mod, gqa = _softcap_mod(softcap), query.shape[1] != k.shape[1]
    if reads_full_in_place(allocator):  # cache written by the update
        out = flex_attention(query, k, v, score_mod=score_mod, scale=scaling, enable_gqa=gqa,
                             block_mask=paged_mask.static_blocks(mask, "full"))
        return out.transpose(1, 2).contiguous(), None
    old_mask, new_mask = mask
    out, aux = flex_attention(query, _pad_keys(key), _pad_keys(value), score_mod=score_mod,
                              block_mask=paged_mask.static_blocks(new_mask, "new"), scale=scaling,
                              enable_gqa=gqa, return_aux=AuxRequest(lse=True))
    if old_mask is not None:  # the ring buffer before this step's write
        old, old_aux = flex_attention(query, k, v, score_mod=score_mod, scale=scaling, enable_gqa=gqa,
                                      block_mask=paged_mask.static_blocks(old_mask, "old"),
                                      return_aux=AuxRequest(lse=True))
        out = _merge(old, old_aux.lse, out, aux.lse)
    _write_rows(allocator, module.layer_idx, kwargs["write_index"][allocator.index], key, value)
    return out.transpose(1, 2).contiguous(), None


def _merge(out_a, lse_a, out_b, lse_b):
    """Attention over the union of two key sets from the two parts (outputs
    [B, H, M, D], natural-log lse [B, H, M]): weights exp(lse) each. A row
    no key of either part sees (padding) has lse -inf twice: output 0."""
    d = lse_a.float() - lse_b.float()
    w = torch.sigmoid(torch.where(torch.isnan(d), torch.zeros_like(d), d)).unsqueeze(-1)
    return (out_a.float() * w + out_b.float() * (1 - w)).to(out_a.dtype)


def _softcap_mod(softcap):
    if softcap is None:
        return None

    def score_mod(score, b, h, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)

    return score_mod


def _pad_keys(x):
    """The step's new K or V ([1, H_kv, T, D]) padded to whole
    paged_mask.NEW_BLOCK-key blocks (keys of no request)."""
    T = x.shape[2]
    pad = -(-T // paged_mask.NEW_BLOCK) * paged_mask.NEW_BLOCK - T
    # Padded even by 0 keys: no branch on a symbolic T (a guard, a recompile).
    return torch.nn.functional.pad(x, (0, 0, 0, pad))


@torch.compiler.disable
def _layer_masks(allocator, T, kwargs):
    """The layer's masks when the model runs without the runner's step
    masks (a graph break under torch.compile)."""
    i = allocator.index
    args = (allocator, T, kwargs["write_index"][i], kwargs["read_index"][i],
            kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"])
    if reads_full_in_place(allocator):
        return paged_mask.full_mask(*args)
    return paged_mask.window_masks(*args)
