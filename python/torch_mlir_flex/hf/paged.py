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
flex_attention once per layer over the layer's whole cache storage, read in
place:

- the model's `cache.update` writes the step's new K/V into the layer's
  pages (`index_copy_` on the cache tensor at `write_index`, as
  transformers' allocator does) and skips the read-back gather. The write
  is traced: transformers' own update is `torch.compiler.disable`d, which
  would split every layer's graph; this one is a mutated input of the one
  compiled graph per step;
- K and V are views of the cache tensor from the layer's first K / V row
  (the origin of transformers' per-layer views), [1, H_kv, n, D] with one
  n for all layers: row r is the physical slot r that `read_index` /
  `write_index` address (rows holding other layers' pages are never
  attended). A compiled graph receives the contiguous cache tensor and
  takes the views itself (a strided view argument would be copied);
- an index map, built once per step before the model runs (a wrapper of
  the continuous-batching runner's `compute_batch`) and shared by the
  layers: for each
  physical slot, the request and logical position stored there (-1: none),
  from `write_index` (the new tokens) and `read_index` (all tokens read);
  for each query token, its request and logical position (from the
  cumulative lengths);
- mask_mod: same request and slot position <= query position; score_mod:
  the config's softcap if any; GQA through `enable_gqa`;
- a BlockMask whose KV block is one page (BLOCK_SIZE = (page_size,
  page_size)): a query block lists only the pages of its own requests at
  positions it may see, so other requests' pages and other layers' rows are
  skipped block-wise. It reaches the layers as the model keyword
  `flex_paged_masks` (an input of the compiled graph).

Sliding-window layers (a ring buffer of `sliding_window` slots per request,
rewritten as the window slides) are read through transformers' gather: a
chunk of new tokens can overwrite slots that its own earlier tokens still
attend, so the cache cannot be read in place after the write. The gather
and write are traced as well (its `masked_scatter_` of the new rows into
the sentinel slots as a cumsum-indexed `where`). There the flex call runs
over the gathered varlen K/V with the same request/causal mask plus the
window (its BlockMask also built before the step).

Compiled, a step is one Dynamo graph with no graph break: a request
stream is one compilation when transformers pads every step to
`max_batch_tokens` (its padding with a compile config and no padding
intervals); steps padded to intervals compile a few times (Dynamo's
automatic dynamic shapes; docs/serving.md).

transformers 5.25 strips a "paged|" prefix (other than "paged|eager") and
its continuous batching accepts only "paged|eager", "sdpa" or flash names;
`register_paged_flex()` registers the function under NAME and lets the
continuous-batching manager accept NAME (a wrapper of its check); its
wrappers of `PagedAttentionCache.update` and `ModelRunner.compute_batch`
change nothing for other attention implementations. Details:
docs/serving.md, "Paged flex attention".
"""

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

NAME = "flex_paged"
# The model passes the cache to `cache.update` only; the wrapped update hands
# it to the attention function under this keyword.
_CACHE_KWARG = "flex_paged_cache"
# The step's BlockMasks (one per in-place cache allocator, by its index),
# built before the model runs and passed to the model as this keyword.
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
        # implementation, and flex_paged's sliding-window layers.
        if self.config._attn_implementation == NAME:
            kwargs[_CACHE_KWARG] = self  # the attention function reads the cache
        return original(self, key_states, value_states, layer_idx, kwargs)

    def update(self, key_states, value_states, layer_idx, kwargs):
        if self.config._attn_implementation == NAME and kwargs.get("block_table") is None:
            allocator = self.layer_to_allocator[layer_idx]
            if _reads_in_place(allocator):
                return _write_in_place(self, key_states, value_states, layer_idx, kwargs)
            if _is_sliding(allocator):
                return _read_and_write_window(self, key_states, value_states, layer_idx, kwargs)
        return gathered_update(self, key_states, value_states, layer_idx, kwargs)

    update._flex_paged_wrapped = True
    if not getattr(original, "_flex_paged_wrapped", False):
        cache_cls.update = update


def _wrap_compute_batch(runner_cls):
    original = runner_cls.compute_batch

    def compute_batch(self, model, batch_data):
        if model.config._attn_implementation == NAME and batch_data.get("block_table") is None:
            batch_data = dict(batch_data)
            batch_data[_MASKS_KWARG] = _step_masks(batch_data)
        return original(self, model, batch_data)

    compute_batch._flex_paged_wrapped = True
    if not getattr(original, "_flex_paged_wrapped", False):
        runner_cls.compute_batch = compute_batch


def _layer_rows(allocator, layer_idx):
    """The allocator's cache as rows [slots * 2, H_kv, D] (contiguous), the
    first rows of the layer's K and V views, and the number of slots n
    addressed in every layer's views (the last layer's V view is the
    shortest): one length, so the step's maps serve all the layers. Plain
    integers from the layout transformers builds its views with (a page of
    K rows, then a page of V rows, per layer and block)."""
    rows = allocator.cache_tensor.view(-1, allocator.num_key_value_heads, allocator.head_dim)
    page = allocator.tokens_per_page
    i = allocator.layer_indices.index(layer_idx)
    n = (rows.shape[0] // page - 2 * len(allocator.layer_indices) + 1) * page
    return rows, 2 * i * page, (2 * i + 1) * page, n


def _layer_step(cache, layer_idx, kwargs):
    """(allocator, cache rows, K and V row offsets, write index) of the
    layer's step; the layer type's sequence lengths and the cache put into
    `kwargs` for the attention function."""
    allocator = cache.layer_to_allocator[layer_idx]
    kwargs["cu_seq_lens_k"] = kwargs["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
    kwargs["max_length_k"] = kwargs["max_length_k"][allocator.layer_type]
    kwargs[_CACHE_KWARG] = cache
    rows, k_at, v_at, _ = _layer_rows(allocator, layer_idx)
    return allocator, rows, k_at, v_at, kwargs["write_index"][allocator.index]


def _write_in_place(cache, key_states, value_states, layer_idx, kwargs):
    """transformers' write of the step's K/V ([1, H_kv, T, D]) into a
    full-attention layer's pages, as an indexed in-place write on the cache
    tensor: traced into the compiled graph (a mutated input), where
    transformers' update is `torch.compiler.disable`d. Returns the new K/V
    (the attention reads the cache in place)."""
    _, rows, k_at, v_at, write_index = _layer_step(cache, layer_idx, kwargs)
    rows.index_copy_(0, write_index + k_at, key_states[0].transpose(0, 1))
    rows.index_copy_(0, write_index + v_at, value_states[0].transpose(0, 1))
    return key_states, value_states


def _read_and_write_window(cache, key_states, value_states, layer_idx, kwargs):
    """transformers' sliding-window update, traced: read each request's
    window from the ring buffer (new tokens at the sentinel slots of
    `read_index`, in order), then write the step's K/V. Returns the gathered
    K/V [1, H_kv, S, D] (the new K/V when nothing is read)."""
    allocator, rows, k_at, v_at, write_index = _layer_step(cache, layer_idx, kwargs)
    read_index = kwargs["read_index"][allocator.index]
    new_k, new_v = key_states[0].transpose(0, 1), value_states[0].transpose(0, 1)
    out = key_states, value_states
    if read_index.numel():
        # masked_scatter_ of transformers without its data-dependent count:
        # the j-th sentinel slot takes new row j.
        new = (read_index == allocator.sentinel_index)[:, None, None]
        src = (torch.cumsum(new.view(-1).to(torch.int64), 0) - 1).clamp(0, new_k.shape[0] - 1)
        k = torch.where(new, new_k[src], rows[read_index + k_at])
        v = torch.where(new, new_v[src], rows[read_index + v_at])
        out = k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0)
    rows.index_copy_(0, write_index + k_at, new_k)
    rows.index_copy_(0, write_index + v_at, new_v)
    return out


def _is_sliding(allocator):
    return allocator.layer_type == "sliding_attention" and hasattr(allocator, "sliding_window")


def _reads_in_place(allocator):
    return allocator.layer_type == "full_attention" and allocator.supports_block_table


def paged_flex_attention_forward(module, query, key, value, attention_mask, scaling=None,
                                 dropout=0.0, softcap=None, **kwargs):
    """transformers' attention-function contract for the paged cache: query
    [1, Hq, T, D], key/value the step's new K/V (full-attention layers) or
    the gathered K/V (sliding layers); returns ([1, T, Hq, D], None)."""
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
    if not (_reads_in_place(allocator) or allocator.layer_type == "sliding_attention"):
        raise ValueError(f"attention '{NAME}' supports full and sliding-window attention caches, "
                         f"not {type(allocator).__name__}")
    if _reads_in_place(allocator):
        rows, k_at, v_at, n = _layer_rows(allocator, module.layer_idx)
        masks = kwargs.get(_MASKS_KWARG)
        if masks is not None and masks[allocator.index] is not None:
            block_mask = masks[allocator.index]  # built before the step (a graph input)
        else:
            block_mask = _in_place_mask(allocator, query.shape[2], kwargs)
        # Views of the contiguous cache rows taken here, so that a compiled
        # graph receives the cache itself (no copy of a strided view).
        k = rows[k_at:k_at + n].unsqueeze(0).transpose(1, 2)
        v = rows[v_at:v_at + n].unsqueeze(0).transpose(1, 2)
    else:
        k, v = _pad_keys(key), _pad_keys(value)
        masks = kwargs.get(_MASKS_KWARG)
        if masks is not None and masks[allocator.index] is not None:
            block_mask = masks[allocator.index]
        else:
            block_mask = _gathered_mask(allocator, query.shape[2], key.shape[2], kwargs)
    out = flex_attention(query, k, v, score_mod=_softcap_mod(softcap), block_mask=block_mask,
                         scale=scaling, enable_gqa=query.shape[1] != k.shape[1])
    return out.transpose(1, 2).contiguous(), None


def _softcap_mod(softcap):
    if softcap is None:
        return None

    def score_mod(score, b, h, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)

    return score_mod


# ---------------------------------------------------------------- index maps
# Built outside any compiled graph (scatter, sort and data-dependent sizes),
# once per step and kind of layer (`_step_masks`, before the model runs);
# the compiled graph receives the BlockMask tensors and the maps its
# mask_mod reads as inputs.

# kind of layer -> (key, BlockMask, the tensors the key names): this step's
# mask per kind (a step of a model mixing sliding and full layers uses two).
_step_cache = {}


def _step_key(*tensors):
    """The step's index tensors: the same objects, unmodified (transformers
    refills the same storage each step, which bumps the version)."""
    return tuple((id(t), t._version, t.data_ptr(), tuple(t.shape)) for t in tensors)


def _cached(kind, key):
    hit = _step_cache.get(kind)
    return hit[1] if hit is not None and hit[0] == key else None


def _remember(kind, key, value, keep):
    _step_cache[kind] = (key, value, keep)  # keep: the ids in key stay unique
    return value


def _query_map(cu_q, cu_k, num_tokens):
    """Request id and logical position of each query token. Padding tokens
    (past cu_q[-1]) get the last request id of a plateaued cu_q, which no
    real request has."""
    t = torch.arange(num_tokens, dtype=torch.int64)
    req = torch.searchsorted(cu_q.to(torch.int64), t, right=True) - 1
    req = req.clamp_(0, cu_q.numel() - 1)
    cu_q64, cu_k64 = cu_q.to(torch.int64), cu_k.to(torch.int64)
    last = cu_q.numel() - 1
    reqc = req.clamp(max=last - 1) if last > 0 else req
    q_len = cu_q64[reqc + 1] - cu_q64[reqc]
    k_len = cu_k64[reqc + 1] - cu_k64[reqc]
    pos = (t - cu_q64[reqc]) + (k_len - q_len)
    pad = t >= cu_q64[-1]
    req = torch.where(pad, torch.full_like(req, last), req)
    pos = torch.where(pad, torch.zeros_like(pos), pos)
    return req.to(torch.int32), pos.to(torch.int32)


def _key_map(cu_k, num_keys):
    """Request id and logical position of each entry of a varlen key list."""
    j = torch.arange(num_keys, dtype=torch.int64)
    cu = cu_k.to(torch.int64)
    req = (torch.searchsorted(cu, j, right=True) - 1).clamp_(0, cu_k.numel() - 1)
    last = cu_k.numel() - 1
    pad = j >= cu[-1]
    pos = torch.where(pad, torch.zeros_like(j), j - cu[req.clamp(max=max(last - 1, 0))])
    req = torch.where(pad, torch.full_like(req, last), req)
    return req.to(torch.int32), pos.to(torch.int32)


def _page_blocks(q_req, q_pos, kv_req, kv_pos, block, num_kv):
    """[T, num_kv // block] (visible, fully visible) per query token and
    page, for paged slots: a page belongs to one request, its used slots
    hold consecutive positions from page_min to page_max."""
    nk = num_kv // block
    slot_req = kv_req[: nk * block].view(nk, block)
    slot_pos = kv_pos[: nk * block].view(nk, block)
    used = slot_req >= 0
    page_req = torch.where(used, slot_req, -1).amax(1)
    page_min = torch.where(used, slot_pos, torch.iinfo(torch.int32).max).amin(1)
    page_max = torch.where(used, slot_pos, -1).amax(1)
    same = page_req[None, :] == q_req[:, None]
    seen = same & (page_min[None, :] <= q_pos[:, None])
    full = same & used.all(1)[None, :] & (page_max[None, :] <= q_pos[:, None])
    return seen, full


def _element_blocks(q_req, q_pos, kv_req, kv_pos, block, num_kv, window):
    """[T, num_kv // block] (visible, fully visible) from the element mask
    (gathered keys: a block may hold keys of several requests)."""
    allowed = _mask_mod(q_req, q_pos, kv_req, kv_pos, window)(
        0, 0, torch.arange(q_req.numel())[:, None], torch.arange(num_kv)[None, :])
    allowed = allowed.view(q_req.numel(), num_kv // block, block)
    return allowed.any(-1), allowed.all(-1)


def _block_mask(seen, full, q_req, q_pos, kv_req, kv_pos, block, num_kv, window):
    """BlockMask with BLOCK_SIZE (block, block) from per-token block
    visibility: query block i lists the KV blocks one of its tokens may see
    (partial: mask_mod decides per element) and, apart, the blocks all its
    tokens see whole (full: no mask_mod)."""
    T, nk = seen.shape
    nq = -(-T // block)
    pad = nq * block - T
    if pad:  # rows past T: see nothing, do not spoil "full"
        seen = torch.cat([seen, seen.new_zeros(pad, nk)])
        full = torch.cat([full, full.new_ones(pad, nk)])
    seen = seen.view(nq, block, nk).any(1)
    full = full.view(nq, block, nk).all(1) & seen
    partial = seen & ~full

    def listed(blocks):
        num = blocks.sum(-1, dtype=torch.int32).view(1, 1, nq)
        order = torch.argsort(blocks.to(torch.int8), dim=-1, descending=True, stable=True)
        return num, order.to(torch.int32).view(1, 1, nq, nk)

    num, indices = listed(partial)
    full_num, full_indices = listed(full)
    return BlockMask.from_kv_blocks(
        num, indices, full_num, full_indices, BLOCK_SIZE=(block, block),
        mask_mod=_mask_mod(q_req, q_pos, kv_req, kv_pos, window), seq_lengths=(T, num_kv))


def _mask_mod(q_req, q_pos, kv_req, kv_pos, window):
    if window is None:
        def mask_mod(b, h, q_idx, kv_idx):
            return (kv_req[kv_idx] == q_req[q_idx]) & (kv_pos[kv_idx] <= q_pos[q_idx])
    else:
        def mask_mod(b, h, q_idx, kv_idx):
            delta = q_pos[q_idx] - kv_pos[kv_idx]
            return (kv_req[kv_idx] == q_req[q_idx]) & (delta >= 0) & (delta < window)
    return mask_mod


def _step_masks(batch_data):
    """The step's BlockMask per in-place (full-attention) cache allocator,
    by allocator index (None for the others), from the model's keyword
    arguments: built before the model runs, outside any compiled graph."""
    cache = batch_data["cache"]
    T = batch_data["input_ids"].shape[1]
    masks = [None] * len(cache.cache_allocators)
    for allocator in cache.cache_allocators.values():
        if _reads_in_place(allocator):
            cu_k = batch_data["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
            masks[allocator.index] = _full_mask(
                allocator, T, batch_data["write_index"][allocator.index],
                batch_data["read_index"][allocator.index], batch_data["cu_seq_lens_q"], cu_k)
        elif _is_sliding(allocator):
            cu_k = batch_data["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
            S = batch_data["read_index"][allocator.index].numel() or T
            masks[allocator.index] = _window_mask(allocator, T, S, batch_data["cu_seq_lens_q"], cu_k)
    return masks


@torch.compiler.disable
def _in_place_mask(allocator, T, kwargs):
    """The BlockMask when the model runs without the runner's step masks
    (a graph break under torch.compile)."""
    return _full_mask(allocator, T, kwargs["write_index"][allocator.index],
                      kwargs["read_index"][allocator.index], kwargs["cu_seq_lens_q"],
                      kwargs["cu_seq_lens_k"])


def _full_mask(allocator, T, write_index, read_index, cu_q, cu_k):
    """BlockMask over the full-attention layers' in-place view: pages of
    `allocator.tokens_per_page` slots, n slots (`_layer_rows`)."""
    page_size = allocator.tokens_per_page
    n = _layer_rows(allocator, allocator.layer_indices[0])[3]
    kind, key = "full", (n, page_size, T) + _step_key(write_index, read_index, cu_q, cu_k)
    hit = _cached(kind, key)
    if hit is not None:
        return hit
    q_req, q_pos = _query_map(cu_q, cu_k, T)
    slot_req = torch.full((n,), -1, dtype=torch.int32)
    slot_pos = torch.zeros((n,), dtype=torch.int32)
    w = write_index.to(torch.int64)
    keep = w < n
    slot_req[w[keep]] = q_req[: w.numel()][keep]
    slot_pos[w[keep]] = q_pos[: w.numel()][keep]
    if read_index.numel():
        r_req, r_pos = _key_map(cu_k, read_index.numel())
        r = read_index.to(torch.int64)
        keep = r < n
        slot_req[r[keep]] = r_req[keep]
        slot_pos[r[keep]] = r_pos[keep]
    # Slots written or read only by padding tokens belong to no request.
    pad_id = cu_q.numel() - 1
    slot_req = torch.where(slot_req == pad_id, -1, slot_req)
    q_req = torch.where(q_req == pad_id, -2, q_req)
    seen, full = _page_blocks(q_req, q_pos, slot_req, slot_pos, page_size, n)
    mask = _block_mask(seen, full, q_req, q_pos, slot_req, slot_pos, page_size, n, None)
    return _remember(kind, key, mask, (write_index, read_index, cu_q, cu_k))


_WINDOW_BLOCK = 16


def _pad_keys(x):
    """Sliding-window layers' gathered K or V ([1, H_kv, S, D], varlen by
    cu_seq_lens_k) padded to whole 16-key blocks (keys of no request)."""
    S = x.shape[2]
    S_pad = -(-S // _WINDOW_BLOCK) * _WINDOW_BLOCK
    # Padded even by 0 keys: no branch on a symbolic S (a guard, a recompile).
    return torch.nn.functional.pad(x, (0, 0, 0, S_pad - S))


@torch.compiler.disable
def _gathered_mask(allocator, T, S, kwargs):
    """The window BlockMask when the model runs without the runner's step
    masks (a graph break under torch.compile)."""
    return _window_mask(allocator, T, S, kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"])


def _window_mask(allocator, T, S, cu_q, cu_k):
    """BlockMask over the gathered varlen keys of a sliding-window layer
    (S keys, padded to whole blocks)."""
    window = getattr(allocator, "sliding_window", None)
    block = _WINDOW_BLOCK
    S_pad = -(-S // block) * block
    kind, cache_key = "window", (window, S_pad, T) + _step_key(cu_q, cu_k)
    hit = _cached(kind, cache_key)
    if hit is not None:
        return hit
    q_req, q_pos = _query_map(cu_q, cu_k, T)
    k_req, k_pos = _key_map(cu_k, S_pad)
    pad_id = cu_q.numel() - 1
    k_req = torch.where(k_req == pad_id, -1, k_req)
    q_req = torch.where(q_req == pad_id, -2, q_req)
    # Gathered keys sit at their logical positions relative to each
    # request's first gathered key; query positions use the same origin.
    seen, full = _element_blocks(q_req, q_pos, k_req, k_pos, block, S_pad, window)
    mask = _block_mask(seen, full, q_req, q_pos, k_req, k_pos, block, S_pad, window)
    return _remember(kind, cache_key, mask, (cu_q, cu_k))
