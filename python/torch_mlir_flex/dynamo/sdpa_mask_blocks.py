"""The BlockMask of a masked SDPA call, computed from its mask where the
call runs (sdpa_as_flex.py): a key block that masks every query of a
query block is not listed, and flex attention skips it. Continuous
batching pads each step's key reads to the whole cache and masks the
padding, and puts the requests' keys side by side (a block-diagonal
mask): without the table every step computed attention over every
cached key.

A mask entry *masks* when it is False (bool), -inf, or the float dtype's
smallest value (`finfo.min`, which transformers' masks use). Skipping a
`finfo.min` key is exact for a row that has a kept key: its weight,
exp(score + min - row max), is 0 in float arithmetic (the next float above
min is 2**104 higher in f32 and bf16; in f16, 32 higher: a row whose kept
keys all sit within ~100 of -65504 would differ). Rows with no kept key
keep SDPA's results:
- all -inf (or all False): output 0, as eager SDPA's (sdpa_as_flex.py);
- all `finfo.min` (transformers' padded query rows): every score is
  `min`, the softmax uniform, and SDPA's output the mean of V over all
  keys: `fix_uniform_rows` writes that mean into those rows;
- `finfo.min` and -inf only: their query block lists the key blocks of
  their `min` entries (computed as SDPA computes them).

Query blocks (`q_block_size`): a step of continuous batching holds one
decode row per request, each reading its own request's keys; a block of
128 such rows would read the union of all requests' keys for every row.
Calls with few query rows (decode steps, <= 128) use blocks of one row,
the others 128 rows (prefill chunks, one request's rows together); with
dynamic sizes the two are two graphs (a guard on the row count). Either
choice computes the same numbers.

The layers of a model share one mask: the table is computed once per
mask, sizes and trace (`_memo`).
"""

import weakref

KV_BLOCK = 128
Q_BLOCK = 128
# Calls with at most this many query rows get one-row query blocks (decode
# steps of continuous batching).
FEW_ROWS = 128
_LARGE = 1 << 30  # one block for every query (torch's _LARGE_SPARSE_BLOCK_SIZE)


def q_block_size(num_queries) -> int:
    """Rows per query block for a call with `num_queries` rows. A dynamic
    count is compared with a guard: torch.export then narrows its range
    to one side of FEW_ROWS, and Dynamo compiles the other side apart
    (specialize.guard_export_ranges): one graph per range."""
    return 1 if num_queries <= FEW_ROWS else Q_BLOCK


def block_mask(mask, query, key):
    """(flex_attention's BlockMask tuple, uniform rows or None) for SDPA's
    `mask` broadcast to [B, H, L, S] (L, S: query's and key's lengths).
    Uniform rows (bool [Bm, Hm, Lm]): rows whose every entry is
    `finfo.min`, for `fix_uniform_rows`; None for a bool mask."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    L, S = query.shape[2], key.shape[2]
    grads = any(t.requires_grad for t in (query, key))
    mode = get_proxy_mode()
    if mode is None:  # not traced: nothing to share
        return _block_mask(mask, L, S, grads)
    memo = _memo_of(mask)
    key_ = (str(L), str(S), grads)
    hit = memo.get(key_)
    # Only within the trace that made it (a mask constant outlives traces).
    if hit is None or hit[0]() is not mode:
        hit = memo[key_] = (weakref.ref(mode), _block_mask(mask, L, S, grads))
    return hit[1]


_memo = None  # mask -> {(L, S, grads): (weakref of the tracing mode, (BlockMask tuple, uniform rows))}


def _memo_of(mask) -> dict:
    global _memo
    if _memo is None:
        from torch.utils.weak import WeakIdKeyDictionary

        _memo = WeakIdKeyDictionary()
    return _memo.setdefault(mask, {})


def _block_mask(mask, L, S, grads):
    import torch
    import torch.nn.functional as F
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    from torch.nn.attention.flex_attention import BlockMask

    m = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    Bm, Hm, Lm, Sm = m.shape
    uniform = None
    if m.dtype == torch.bool:
        listed = m
    else:
        ninf, low = torch.isneginf(m), m == torch.finfo(m.dtype).min
        kept = ~(ninf | low)
        row_kept, row_low, row_ninf = kept.any(-1), low.any(-1), ninf.any(-1)
        uniform = ~row_kept & row_low & ~row_ninf
        mixed = ~row_kept & row_low & row_ninf
        listed = kept | (low & mixed.unsqueeze(-1))
    listed = listed.expand(Bm, Hm, Lm, S)
    if statically_known_true(Lm == 1):
        # A mask the same for every query (known without a guard): one
        # query block of all rows.
        qbs, rows, nq = _LARGE, 1, 1
    else:
        qbs = rows = q_block_size(L)
        nq = (Lm + qbs - 1) // qbs
    nk = (S + KV_BLOCK - 1) // KV_BLOCK
    listed = F.pad(listed, (0, nk * KV_BLOCK - S, 0, nq * rows - Lm), value=False)
    blocks = listed.reshape(Bm, Hm, nq, rows, nk, KV_BLOCK).any(-1).any(3)
    counts = blocks.sum(-1, dtype=torch.int32)
    indices = torch.argsort(blocks.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
    bm = BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=(qbs, KV_BLOCK), seq_lengths=(L, S),
                                  compute_q_blocks=grads)
    return bm.as_tuple(), uniform


def fix_uniform_rows(out, uniform, value):
    """`out` [B, Hq, L, Ev] with the rows SDPA computes as a uniform
    softmax (`uniform`, from `block_mask`) set to the mean of `value`
    [B, Hkv, S, Ev] over its keys, as SDPA computes them."""
    import torch

    if uniform is None:
        return out
    mean = value.mean(dim=-2, keepdim=True, dtype=torch.float32).to(out.dtype)
    if out.shape[1] != value.shape[1]:
        mean = mean.repeat_interleave(out.shape[1] // value.shape[1], dim=1)
    return torch.where(uniform.unsqueeze(-1), mean, out)
