"""Index maps and BlockMasks of the paged flex attention (hf/paged.py).

Built outside any compiled graph (scatter, sort and data-dependent sizes),
once per step and kind of layer, before the model runs (`step_masks`,
called by the wrapper of the continuous-batching runner's `compute_batch`);
the compiled graph receives the BlockMask tensors and the index maps its
mask_mod reads as inputs. Three kinds of mask, each over a step of T query
tokens (the flattened batch, requests delimited by the cumulative lengths):

- "full": full-attention layers, keys = the layer's cache rows read in
  place (n physical slots, written before the read): a KV block is a page;
- "old": sliding-window layers, keys = the layer's cache rows read in
  place before this step's write (the ring buffer as it was): slots named
  by `read_index` (the cached window of each request), pages as KV blocks,
  pages out of every query's window skipped;
- "new": sliding-window layers, keys = the step's own new K/V (T keys
  padded to NEW_BLOCK): each query sees the keys of its request between
  its position - window + 1 and its position.

Query and key positions share one origin per request (its first key of the
layer's read list), so the window test is `0 <= q_pos - kv_pos < window`.
"""

import torch
from torch.nn.attention.flex_attention import BlockMask

# KV block of the step's new keys in sliding-window layers (keys padded to it).
NEW_BLOCK = 16

# BLOCK_SIZE per kind of mask, as Python ints in a module-level dict: the
# attention function rebuilds its BlockMask with these (`static_blocks`),
# so Dynamo reads them from a global (specialized and guarded), never from
# the BlockMask the model receives (its ints turn symbolic under
# CompileConfig(dynamic=True), which our backend does not compile).
STATIC_BLOCKS = {}

# kind of mask -> (key, BlockMask, the tensors the key names): the step's
# mask per kind (a model mixing sliding and full layers uses three).
_step_cache = {}


def static_blocks(block_mask, kind):
    """`block_mask` with BLOCK_SIZE read from STATIC_BLOCKS[kind]."""
    return BlockMask(block_mask.seq_lengths, block_mask.kv_num_blocks, block_mask.kv_indices,
                     block_mask.full_kv_num_blocks, block_mask.full_kv_indices,
                     block_mask.q_num_blocks, block_mask.q_indices, block_mask.full_q_num_blocks,
                     block_mask.full_q_indices, BLOCK_SIZE=STATIC_BLOCKS[kind],
                     mask_mod=block_mask.mask_mod)


def _step_key(*tensors):
    """The step's index tensors: the same objects, unmodified (transformers
    refills the same storage each step, which bumps the version)."""
    return tuple((id(t), t._version, t.data_ptr(), tuple(t.shape)) for t in tensors)


def _cached(kind, key):
    hit = _step_cache.get(kind)
    if hit is not None and hit[0] == key:
        STATIC_BLOCKS[kind] = tuple(hit[1].BLOCK_SIZE)
        return hit[1]
    return None


def _remember(kind, key, value, keep):
    _step_cache[kind] = (key, value, keep)  # keep: the ids in key stay unique
    STATIC_BLOCKS[kind] = tuple(value.BLOCK_SIZE)
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


def _page_blocks(q_req, q_pos, kv_req, kv_pos, block, num_kv, window):
    """[T, num_kv // block] (visible, fully visible) per query token and
    page, for paged slots: a page belongs to one request; its used slots
    hold positions from page_min to page_max (in any order: a ring buffer
    wraps within a page)."""
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
    if window is not None:  # some slot inside the window / every slot inside it
        seen &= page_max[None, :] > q_pos[:, None] - window
        full &= page_min[None, :] > q_pos[:, None] - window
    return seen, full


def _block_mask(seen, full, mask_mod, block, num_kv):
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
    return BlockMask.from_kv_blocks(num, indices, full_num, full_indices, BLOCK_SIZE=(block, block),
                                    mask_mod=mask_mod, seq_lengths=(T, num_kv))


def _mask_mod(q_req, q_pos, kv_req, kv_pos, window):
    if window is None:
        def mask_mod(b, h, q_idx, kv_idx):
            return (kv_req[kv_idx] == q_req[q_idx]) & (kv_pos[kv_idx] <= q_pos[q_idx])
    else:
        # A 0-d tensor, not the int: an int captured by the mask_mod turns
        # symbolic under CompileConfig(dynamic=True), a scalar operand our
        # backend does not take; a tensor is one more input of the graph.
        width = torch.tensor(window, dtype=torch.int32)

        def mask_mod(b, h, q_idx, kv_idx):
            delta = q_pos[q_idx] - kv_pos[kv_idx]
            return (kv_req[kv_idx] == q_req[q_idx]) & (delta >= 0) & (delta < width)
    return mask_mod


def num_slots(allocator):
    """Slots addressed in every layer's in-place view of the allocator's
    cache (the last layer's V view is the shortest): one length, so one
    map serves all the layers (hf/paged.py `_layer_rows`)."""
    page = allocator.tokens_per_page
    rows = allocator.cache_tensor.numel() // (allocator.num_key_value_heads * allocator.head_dim)
    return (rows // page - 2 * len(allocator.layer_indices) + 1) * page


def is_sliding(allocator):
    return allocator.layer_type == "sliding_attention" and hasattr(allocator, "sliding_window")


def reads_full_in_place(allocator):
    return allocator.layer_type == "full_attention" and allocator.supports_block_table


def step_masks(batch_data):
    """The step's masks per cache allocator, by allocator index: a BlockMask
    for a full-attention allocator, (old, new) for a sliding-window one
    (old: None when the step reads no cache), None for others. Built from
    the model's keyword arguments before the model runs."""
    cache = batch_data["cache"]
    T = batch_data["input_ids"].shape[1]
    masks = [None] * len(cache.cache_allocators)
    for allocator in cache.cache_allocators.values():
        if not (reads_full_in_place(allocator) or is_sliding(allocator)):
            continue
        i = allocator.index
        cu_k = batch_data["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
        args = (allocator, T, batch_data["write_index"][i], batch_data["read_index"][i],
                batch_data["cu_seq_lens_q"], cu_k)
        masks[i] = full_mask(*args) if reads_full_in_place(allocator) else window_masks(*args)
    return masks


def _slot_map(n, cu_q, cu_k, index, keep_entry=None):
    """Request id and position of each of n physical slots from a varlen
    list of slots (`index`, delimited by cu_k); -1: no request."""
    slot_req = torch.full((n,), -1, dtype=torch.int32)
    slot_pos = torch.zeros((n,), dtype=torch.int32)
    if index.numel():
        r_req, r_pos = _key_map(cu_k, index.numel())
        r = index.to(torch.int64)
        keep = r < n
        if keep_entry is not None:
            keep &= keep_entry
        slot_req[r[keep]] = r_req[keep]
        slot_pos[r[keep]] = r_pos[keep]
    return slot_req, slot_pos


def _drop_padding(cu_q, q_req, slot_req):
    """Padding tokens (the plateau request of cu_q) belong to no request."""
    pad_id = cu_q.numel() - 1
    return torch.where(q_req == pad_id, -2, q_req), torch.where(slot_req == pad_id, -1, slot_req)


def full_mask(allocator, T, write_index, read_index, cu_q, cu_k):
    """BlockMask over a full-attention allocator's in-place view: pages of
    `allocator.tokens_per_page` slots, `num_slots` slots."""
    page_size, n = allocator.tokens_per_page, num_slots(allocator)
    kind, key = "full", (n, page_size, T) + _step_key(write_index, read_index, cu_q, cu_k)
    hit = _cached(kind, key)
    if hit is not None:
        return hit
    q_req, q_pos = _query_map(cu_q, cu_k, T)
    slot_req, slot_pos = _slot_map(n, cu_q, cu_k, read_index)
    # The step's tokens (also in read_index when it is not empty).
    w = write_index.to(torch.int64)
    keep = w < n
    slot_req[w[keep]] = q_req[: w.numel()][keep]
    slot_pos[w[keep]] = q_pos[: w.numel()][keep]
    q_req, slot_req = _drop_padding(cu_q, q_req, slot_req)
    seen, full = _page_blocks(q_req, q_pos, slot_req, slot_pos, page_size, n, None)
    mask = _block_mask(seen, full, _mask_mod(q_req, q_pos, slot_req, slot_pos, None), page_size, n)
    return _remember(kind, key, mask, (write_index, read_index, cu_q, cu_k))


def window_masks(allocator, T, write_index, read_index, cu_q, cu_k):
    """(old, new) BlockMasks of a sliding-window layer (module docstring):
    old over the ring buffer read in place (None when nothing is read),
    new over the step's T new keys padded to NEW_BLOCK."""
    window = allocator.sliding_window
    page_size, n = allocator.tokens_per_page, num_slots(allocator)
    key = (window, n, page_size, T) + _step_key(read_index, cu_q, cu_k)
    old, new = _cached("old", key), _cached("new", key)
    if new is not None and (old is not None or not read_index.numel()):
        return old if read_index.numel() else None, new
    q_req, q_pos = _query_map(cu_q, cu_k, T)
    if read_index.numel():
        # The cached entries only: the sentinel entries stand for the new keys.
        cached = read_index != allocator.sentinel_index
        slot_req, slot_pos = _slot_map(n, cu_q, cu_k, read_index, cached)
        oq_req, slot_req = _drop_padding(cu_q, q_req, slot_req)
        seen, full = _page_blocks(oq_req, q_pos, slot_req, slot_pos, page_size, n, window)
        old = _block_mask(seen, full, _mask_mod(oq_req, q_pos, slot_req, slot_pos, window),
                          page_size, n)
        _remember("old", key, old, (read_index, cu_q, cu_k))
    else:
        old = None
    new = _new_keys_mask(q_req, q_pos, cu_q, T, window)
    _remember("new", key, new, (read_index, cu_q, cu_k))
    return old, new


def _new_keys_mask(q_req, q_pos, cu_q, T, window):
    """BlockMask of the step's queries over the step's new keys: token i of
    a request starting at flat index s sees the flat range
    [max(s, i - window + 1), i] (a request's tokens are contiguous, their
    positions consecutive). NEW_BLOCK-key blocks, T keys padded to them."""
    block = NEW_BLOCK
    S = -(-T // block) * block
    q_req, kv_req = _drop_padding(cu_q, q_req, q_req)
    kv_req = torch.cat([kv_req, kv_req.new_full((S - T,), -1)])
    kv_pos = torch.cat([q_pos, q_pos.new_zeros(S - T)])
    t = torch.arange(T, dtype=torch.int64)
    start = cu_q.to(torch.int64)[q_req.clamp(min=0).to(torch.int64)]
    lo = torch.maximum(start, t - window + 1)
    first = torch.arange(0, S, block, dtype=torch.int64)
    last = first + block - 1
    real = (q_req >= 0)[:, None]
    seen = real & (first[None, :] <= t[:, None]) & (last[None, :] >= lo[:, None])
    full = real & (first[None, :] >= lo[:, None]) & (last[None, :] <= t[:, None])
    return _block_mask(seen, full, _mask_mod(q_req, q_pos, kv_req, kv_pos, window), block, S)
