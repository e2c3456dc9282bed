"""Real-world mask_mods, written from the documented behaviour of
attention-gym's mask catalogue: causal, sliding and dilated windows, prefix
LM, document / packed masks, NATTEN and 2-D / 3-D neighbourhoods, tree and
speculative-decoding masks, block diffusion, shared prefix, paged
attention, streaming sinks, global tokens, padding and jagged lengths."""

import torch

from .realworld_common import case

S = 32


def causal(m, b, h, q, kv):
    return q >= kv


def window(w, bidir=False):
    def mask(m, b, h, q, kv):
        d = q - kv
        return (d.abs() <= w) if bidir else ((d >= 0) & (d <= w))

    return mask


def dilated(w, dil):
    def mask(m, b, h, q, kv):
        d = q - kv
        return (d >= 0) & (d <= w) & (d % dil == 0)

    return mask


def prefix_lm(p):
    def mask(m, b, h, q, kv):
        return (kv < p) | (q >= kv)

    return mask


case("gym_causal", mask=causal)
case("gym_causal_non_divisible", mask=causal, M=40)
case("gym_causal_cross_lengths", mask=causal, M=24, N=40)
case("gym_sliding_window", mask=window(6))
case("gym_sliding_window_bidirectional", mask=window(5, bidir=True))
case("gym_sliding_window_non_divisible", mask=window(7), M=45)
case("gym_dilated_window", mask=dilated(12, 3))
case("gym_prefix_lm", mask=prefix_lm(10))
case("gym_causal_f16", mask=causal, dtype=torch.float16)
case("gym_sliding_window_bf16", mask=window(6), dtype=torch.bfloat16)
case("gym_prefix_lm_f16", mask=prefix_lm(12), dtype=torch.float16)


def prefix_per_batch(m, b, h, q, kv):
    return (kv < m.prefix[b]) | (q >= kv)


case("gym_prefix_lm_per_batch", mask=prefix_per_batch, B=2, mask_bh=True,
     buffers=lambda: {"prefix": torch.tensor([5, 17])})


def _doc_ids(lengths):
    return torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])


def document(m, b, h, q, kv):
    return m.doc[q] == m.doc[kv]


def document_causal(m, b, h, q, kv):
    return (m.doc[q] == m.doc[kv]) & (q >= kv)


case("gym_document", mask=document, buffers=lambda: {"doc": _doc_ids([7, 13, 12])})
case("gym_document_causal", mask=document_causal, buffers=lambda: {"doc": _doc_ids([9, 9, 14])})
case("gym_document_f16", mask=document_causal, dtype=torch.float16, buffers=lambda: {"doc": _doc_ids([20, 12])})


def document_offsets(m, b, h, q, kv):
    """Packed sequences: causal within a document using its start offset
    (a nested lookup offsets[doc[q]])."""
    start = m.offsets[m.doc[q]]
    return (m.doc[q] == m.doc[kv]) & (kv >= start) & (q >= kv)


case("gym_packed_offsets", mask=document_offsets,
     buffers=lambda: {"doc": _doc_ids([10, 6, 16]), "offsets": torch.tensor([0, 10, 16])})


def document_runtime(m, b, h, q, kv, doc):
    return (doc[q] == doc[kv]) & (q >= kv)


case("gym_document_runtime", mask=document_runtime,
     extra=lambda: [(_doc_ids([12, 20]),), (_doc_ids([4, 4, 24]),)])


def document_batched_runtime(m, b, h, q, kv, doc):
    return doc[b, q] == doc[b, kv]


case("gym_document_per_batch_runtime", mask=document_batched_runtime, B=2, mask_bh=True,
     extra=lambda: (torch.stack([_doc_ids([16, 16]), _doc_ids([3, 29])]),))


def natten_1d(k):
    def mask(m, b, h, q, kv):
        c = q.clamp(k // 2, S - 1 - k // 2)
        return (c - kv).abs() <= k // 2

    return mask


def natten_2d(W, k, dil=1):
    def mask(m, b, h, q, kv):
        qr, qc, kr, kc = q // W, q % W, kv // W, kv % W
        return ((qr - kr).abs() <= k * dil) & ((qc - kc).abs() <= k * dil) & ((qr - kr) % dil == 0) & \
            ((qc - kc) % dil == 0)

    return mask


def natten_2d_clamped(R, W, k):
    def mask(m, b, h, q, kv):
        cr = (q // W).clamp(k, R - 1 - k)
        cc = (q % W).clamp(k, W - 1 - k)
        return ((cr - kv // W).abs() <= k) & ((cc - kv % W).abs() <= k)

    return mask


def neighbourhood_3d(T, R, W, k):
    def mask(m, b, h, q, kv):
        qt, qr, qc = q // (R * W), (q // W) % R, q % W
        kt, kr, kc = kv // (R * W), (kv // W) % R, kv % W
        return ((qt - kt).abs() <= k) & ((qr - kr).abs() <= k) & ((qc - kc).abs() <= k)

    return mask


def tiled_2d(W, th, tw):
    def mask(m, b, h, q, kv):
        return ((q // W) // th == (kv // W) // th) & ((q % W) // tw == (kv % W) // tw)

    return mask


case("gym_natten_1d", mask=natten_1d(5))
case("gym_natten_2d", mask=natten_2d(6, 1), M=36)
case("gym_natten_2d_dilated", mask=natten_2d(6, 1, dil=2), M=36)
case("gym_natten_2d_clamped", mask=natten_2d_clamped(4, 8, 1))
case("gym_natten_2d_bf16", mask=natten_2d(8, 1), dtype=torch.bfloat16)
case("gym_neighbourhood_3d", mask=neighbourhood_3d(2, 4, 4, 1))
case("gym_tiled_2d", mask=tiled_2d(8, 2, 4))


def _tree_ancestors():
    """A draft tree of 8 speculative tokens after a 24-token prefix: parent
    of each node; ancestor[i, j] = j is i or an ancestor of i."""
    parent = [-1, 0, 0, 1, 1, 2, 3, 5]
    anc = torch.zeros(8, 8, dtype=torch.bool)
    for i in range(8):
        j = i
        while j >= 0:
            anc[i, j] = True
            j = parent[j]
    return anc


def tree_mask(m, b, h, q, kv):
    P = 24
    in_tree = (q >= P) & (kv >= P)
    tree = m.anc[(q - P).clamp(0, 7), (kv - P).clamp(0, 7)]
    return torch.where(in_tree, tree, kv <= q)


def speculative(m, b, h, q, kv):
    # 8 query tokens (the draft tree) against a 32-token cache.
    P = 24
    tree = m.anc[q, (kv - P).clamp(0, 7)]
    return (kv < P) | tree


case("gym_tree_mask", mask=tree_mask, buffers=lambda: {"anc": _tree_ancestors()})
case("gym_speculative_decode", mask=speculative, M=8, N=32, buffers=lambda: {"anc": _tree_ancestors()})


def block_causal(bs):
    def mask(m, b, h, q, kv):
        return q // bs >= kv // bs

    return mask


def block_diffusion(half, bs):
    """First half: noised blocks x_t, second half: clean x_0. x_t attends
    within its block and to x_0 blocks strictly before; x_0 is
    block-causal."""

    def mask(m, b, h, q, kv):
        q_x0, kv_x0 = q >= half, kv >= half
        qb, kb = (q % half) // bs, (kv % half) // bs
        diag = (q_x0 == kv_x0) & (qb == kb)
        offset = ~q_x0 & kv_x0 & (kb < qb)
        clean = q_x0 & kv_x0 & (qb >= kb)
        return diag | offset | clean

    return mask


case("gym_block_causal", mask=block_causal(8))
case("gym_block_diffusion", mask=block_diffusion(16, 4))


def shared_prefix(m, b, h, q, kv):
    P = 8
    return (kv < P) | ((m.doc[q] == m.doc[kv]) & (q >= kv))


case("gym_shared_prefix", mask=shared_prefix, buffers=lambda: {"doc": _doc_ids([8, 10, 14])})


def paged(m, b, h, q, kv):
    """Keys stored in 8-token physical pages; page_owner[b, page] is the
    logical page of batch b held there (-1: not this batch's page)."""
    logical_page = m.page_owner[b, kv // 8]
    logical_kv = logical_page * 8 + kv % 8
    return (logical_page >= 0) & (logical_kv <= q + 16)


case("gym_paged_attention", mask=paged, B=2, M=16, N=32, mask_bh=True,
     buffers=lambda: {"page_owner": torch.tensor([[1, -1, 0, 2], [-1, 0, 1, -1]])})


def sink_window(sinks, w):
    def mask(m, b, h, q, kv):
        return (q >= kv) & ((kv < sinks) | (q - kv <= w))

    return mask


def global_tokens(g):
    def mask(m, b, h, q, kv):
        return (kv < g) | (q < g) | (q >= kv)

    return mask


def stride(m, b, h, q, kv):
    return (q % 4 == kv % 4) & (q >= kv)


def same_block(m, b, h, q, kv):
    return q // 8 == kv // 8


def decode_offset(m, b, h, q, kv):
    return q + 24 >= kv


def cross_sparse(m, b, h, q, kv):
    return kv % 3 != 0


case("gym_streaming_sinks", mask=sink_window(4, 8))
case("gym_global_tokens", mask=global_tokens(3))
case("gym_strided", mask=stride)
case("gym_bidirectional_blocks", mask=same_block)
case("gym_causal_chunk_offset", mask=decode_offset, M=8, N=32)
case("gym_cross_attention_mask", mask=cross_sparse, M=16, N=48)


def jagged(m, b, h, q, kv):
    return (kv < m.lens[b]) & (q < m.lens[b])


case("gym_jagged_lengths", mask=jagged, B=3, mask_bh=True, buffers=lambda: {"lens": torch.tensor([32, 20, 7])})


def padding_bool(m, b, h, q, kv, valid):
    return valid[b, q] & valid[b, kv]


def _valid():
    v = torch.ones(2, S, dtype=torch.bool)
    v[0, 27:] = False
    v[1, 9:] = False
    return (v,)


case("gym_padding_bool_input", mask=padding_bool, B=2, mask_bh=True, extra=_valid)


def per_head_window(m, b, h, q, kv):
    return (q >= kv) & (q - kv <= m.win[h])


def bh_mask(m, b, h, q, kv):
    return torch.where(h == 0, q >= kv, (b == 1) | (kv < 10))


def masked_rows(m, b, h, q, kv):
    return (q >= 12) & (kv <= q)


case("flex_per_head_window", mask=per_head_window, H=4, mask_bh=True,
     buffers=lambda: {"win": torch.tensor([0, 3, 8, 31], dtype=torch.int32)})
case("flex_b_and_h_mask", mask=bh_mask, B=2, mask_bh=True)
case("flex_fully_masked_rows_lse", mask=masked_rows, lse=True)
case("gym_prefix_lm_in_forward", mask=prefix_lm(9), in_forward=True)
case("gym_sliding_in_forward_non_divisible", mask=window(5), M=40, in_forward=True)


def random_bool_buffer(m, b, h, q, kv):
    return m.keep[q, kv] | (q == kv)


def random_bool_runtime(m, b, h, q, kv, keep):
    return keep[q, kv] | (q == kv)


case("gym_random_bool_buffer", mask=random_bool_buffer, buffers=lambda: {"keep": torch.rand(S, S) > 0.6})
case("gym_random_bool_runtime", mask=random_bool_runtime, extra=lambda: (torch.rand(S, S) > 0.6,))
