"""BlockMask tensors as semantics: compiled results against PyTorch.

Run (repository root, venv active): PYTHONPATH=python \
     pytest -q test/python/backend/test_block_tensors.py

Eager CPU flex_attention ignores the block tensors (it applies mask_mod
densely), while torch.compile(flex_attention) honours them: unlisted blocks
are masked, full blocks skip mask_mod, partial blocks evaluate it. So a
BlockMask from ``BlockMask.from_kv_blocks(..., mask_mod=None)`` (top-k block
selection) is compared with torch.compile(flex_attention), computed here,
and a BlockMask whose tensors agree with its mask_mod with eager. On CPU
torch.compile cannot return the logsumexp: there the reference is eager
flex_attention with the dense keep-mask of the block tensors (checked equal
to torch.compile's output first). Shapes are small (S <= 256) so that
torch.compile and our JIT stay fast.
"""

import pytest
import torch
from torch.nn.attention.flex_attention import (
    AuxRequest,
    BlockMask,
    create_block_mask,
    flex_attention,
)

import torch_mlir_flex

BACKENDS = ["reference", "tiled"]
RTOL, ATOL = 1e-4, 1e-5

# Every case recompiles (new shapes, block sizes, mask_mod): past dynamo's
# recompile limit it would silently run eager, which ignores the block
# tensors, so the limit is raised and hitting it is an error.
_DYNAMO = dict(recompile_limit=64, fail_on_recompile_limit_hit=True)
_compiled_flex = torch._dynamo.config.patch(**_DYNAMO)(torch.compile(flex_attention, dynamic=False))


def _qkv(B, Hq, S, E, Hkv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    Hkv = Hq if Hkv is None else Hkv
    return (torch.randn(B, Hq, S, E, generator=g), torch.randn(B, Hkv, S, E, generator=g),
            torch.randn(B, Hkv, S, E, generator=g))


def _topk_blocks(Bb, Hb, MB, NB, k, full=0, seed=1):
    """Random block selections per (b, h, query block): a permutation of the
    kv blocks whose first 0..k entries are partial and the next 0..full
    entries full (disjoint lists, as torch.compile expects)."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.rand(Bb, Hb, MB, NB, generator=g).argsort(-1).to(torch.int32)
    num = torch.randint(0, k + 1, (Bb, Hb, MB), generator=g, dtype=torch.int32)
    if not full:
        return num, perm.contiguous(), None, None
    fnum = torch.randint(0, full + 1, (Bb, Hb, MB), generator=g, dtype=torch.int32)
    fnum = torch.minimum(fnum, NB - num)
    # full list = the permutation rotated past the partial entries
    rows = perm.reshape(-1, NB)
    shifts = num.reshape(-1).tolist()
    fidx = torch.stack([torch.roll(r, -s) for r, s in zip(rows, shifts)]).reshape(perm.shape)
    return num, perm.contiguous(), fnum, fidx.to(torch.int32).contiguous()


class _Attend(torch.nn.Module):
    """flex_attention with a fixed BlockMask (its tensors become constants)."""

    def __init__(self, block_mask, gqa=False, lse=False, score_mod=None):
        super().__init__()
        self.block_mask, self.gqa, self.lse, self.score_mod = block_mask, gqa, lse, score_mod

    def forward(self, q, k, v):
        return _flex(flex_attention, q, k, v, self.block_mask, self.gqa, self.lse, self.score_mod)


def _flex(fn, q, k, v, block_mask, gqa, lse, score_mod=None):
    if not lse:
        return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa)
    out, aux = fn(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa,
                  return_aux=AuxRequest(lse=True))
    return out, aux.lse


def _close(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        # -inf (fully masked rows' lse) must match exactly.
        assert torch.equal(torch.isinf(a), torch.isinf(b)), "inf pattern differs"
        fin = torch.isfinite(b)
        torch.testing.assert_close(a[fin], b[fin], rtol=RTOL, atol=ATOL)
        assert not torch.isnan(a).any()


def _listed(num, idx, MB, NBLK):
    """[Bb, Hb, MB, NBLK] bool: kv block listed in the row's first num entries."""
    j = torch.arange(idx.shape[-1])
    valid = j < num.unsqueeze(-1).long()
    hit = torch.zeros(*idx.shape[:3], NBLK + 1, dtype=torch.bool)
    target = torch.where(valid, idx.long().clamp(0, NBLK), NBLK)
    hit.scatter_(-1, target, True)
    return hit[..., :NBLK]


def _dense_keep(bm, B, H, mask_mod=None):
    """[B, H, M, N] keep-mask of torch.compile's block semantics."""
    M, N = bm.seq_lengths
    QBS, KVBS = bm.BLOCK_SIZE
    MB, NBLK = -(-M // QBS), -(-N // KVBS)
    qb, kb = torch.arange(M) // QBS, torch.arange(N) // KVBS
    part = _listed(bm.kv_num_blocks, bm.kv_indices, MB, NBLK)[:, :, qb][..., kb]
    keep = part
    if mask_mod is not None:
        bi, hi = torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1)
        keep = keep & mask_mod(bi, hi, torch.arange(M).view(1, 1, M, 1),
                               torch.arange(N).view(1, 1, 1, N))
    if bm.full_kv_num_blocks is not None:
        keep = keep | _listed(bm.full_kv_num_blocks, bm.full_kv_indices, MB, NBLK)[:, :, qb][..., kb]
    return keep.expand(B, H, M, N).contiguous()


def _reference(block_mask, qkv, gqa, lse, score_mod, mask_mod=None):
    """torch.compile(flex_attention)'s output; with `lse`, eager flex on the
    dense keep-mask (its output checked against torch.compile's)."""
    want = _compiled_flex(*qkv, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa)
    if not lse:
        return want
    q = qkv[0]
    keep = _dense_keep(block_mask, q.shape[0], q.shape[1], mask_mod)
    dense_bm = create_block_mask(lambda b, h, m, n: keep[b, h, m, n], q.shape[0], q.shape[1],
                                 q.shape[2], qkv[1].shape[2], device="cpu")
    out, lse_ = _flex(flex_attention, *qkv, dense_bm, gqa, True, score_mod)
    _close(out, want)
    return out, lse_


def _check_against_compile(block_mask, qkv, backend, gqa=False, lse=False, score_mod=None,
                           mask_mod=None):
    want = _reference(block_mask, qkv, gqa, lse, score_mod, mask_mod)
    fn = torch_mlir_flex.compile(_Attend(block_mask, gqa, lse, score_mod), qkv, backend=backend)
    _close(fn(*qkv), want)
    # The block tensors matter: eager (which ignores them) differs.
    dense = _flex(flex_attention, *qkv, block_mask, gqa, False, score_mod)
    assert not torch.allclose(dense, want[0] if lse else want, rtol=RTOL, atol=ATOL)


# name: (B, Hq, Hkv, S, E, (QBS, KVBS), (Bb, Hb), k, full, lse, score_mod)
CASES = {
    "topk_per_head": (2, 2, 2, 128, 16, (32, 32), (2, 2), 2, 0, False, None),
    "full_blocks": (2, 2, 2, 128, 16, (32, 32), (2, 2), 2, 1, False, None),
    "broadcast_bh": (2, 2, 2, 128, 16, (32, 32), (1, 1), 2, 1, False, None),
    "broadcast_b": (2, 4, 4, 128, 16, (32, 64), (1, 4), 1, 1, False, None),
    "non_divisible_lse": (1, 2, 2, 100, 16, (32, 32), (1, 2), 2, 1, True, None),
    "gqa_lse": (1, 4, 2, 128, 16, (64, 32), (1, 4), 2, 1, True, None),
    "softcap_full": (1, 2, 2, 96, 16, (32, 32), (1, 2), 1, 2, False,
                     lambda s, b, h, m, n: 5.0 * torch.tanh(s / 5.0)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_kv_blocks_without_mask_mod(name, backend):
    B, Hq, Hkv, S, E, (QBS, KVBS), (Bb, Hb), k, full, lse, score_mod = CASES[name]
    MB, NB = -(-S // QBS), -(-S // KVBS)
    num, idx, fnum, fidx = _topk_blocks(Bb, Hb, MB, NB, k, full)
    bm = BlockMask.from_kv_blocks(num, idx, fnum, fidx, BLOCK_SIZE=(QBS, KVBS),
                                  seq_lengths=(S, S))
    _check_against_compile(bm, _qkv(B, Hq, S, E, Hkv), backend, gqa=Hq != Hkv, lse=lse,
                           score_mod=score_mod)


def _document_causal(b, h, m, n):
    return (m >= n) & (m // 64 == n // 64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_mod_with_consistent_blocks(backend):
    """create_block_mask outside forward: its (kept) tensors agree with
    mask_mod, so eager and torch.compile agree; full blocks skip mask_mod."""
    S = 160
    bm = create_block_mask(_document_causal, 1, 2, S, S, device="cpu", BLOCK_SIZE=32)
    assert bm.full_kv_num_blocks is not None and int(bm.full_kv_num_blocks.sum()) > 0
    qkv = _qkv(1, 2, S, 16)
    want = flex_attention(*qkv, block_mask=bm)
    _close(_compiled_flex(*qkv, block_mask=bm), want)
    fn = torch_mlir_flex.compile(_Attend(bm), qkv, backend=backend)
    _close(fn(*qkv), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_mod_with_selected_blocks(backend):
    """from_kv_blocks with a mask_mod: partial blocks evaluate it, full
    blocks skip it, unlisted blocks are masked (torch.compile semantics)."""
    S, BS = 128, 32
    num, idx, fnum, fidx = _topk_blocks(1, 2, S // BS, S // BS, 2, 1, seed=3)
    mask = lambda b, h, m, n: (m + n) % 3 != 0  # noqa: E731
    bm = BlockMask.from_kv_blocks(num, idx, fnum, fidx, BLOCK_SIZE=BS, seq_lengths=(S, S),
                                  mask_mod=mask)
    _check_against_compile(bm, _qkv(1, 2, S, 16, seed=4), backend, lse=True, mask_mod=mask)


class _TopkInside(torch.nn.Module):
    """Video-sparse-attention style: the kv blocks of each query block are
    the top-2 by pooled q.k score, selected inside forward (mask_mod=None)."""

    BS = 32

    def forward(self, q, k, v):
        B, H, S, E = q.shape
        nb = S // self.BS
        qp = q.reshape(B, H, nb, self.BS, E).mean(3)
        kp = k.reshape(B, H, nb, self.BS, E).mean(3)
        idx = (qp @ kp.transpose(-1, -2)).argsort(-1, descending=True).to(torch.int32)
        num = torch.full((B, H, nb), 2, dtype=torch.int32)
        bm = BlockMask.from_kv_blocks(num, idx.contiguous(), BLOCK_SIZE=self.BS,
                                      seq_lengths=(S, S))
        return flex_attention(q, k, v, block_mask=bm)


@pytest.mark.parametrize("backend", BACKENDS)
def test_topk_selection_inside_forward(backend):
    qkv = _qkv(1, 2, 128, 16, seed=5)
    model = _TopkInside()
    with torch._dynamo.config.patch(**_DYNAMO):
        want = torch.compile(model, dynamic=False)(*qkv)
    fn = torch_mlir_flex.compile(model, qkv, backend=backend)
    _close(fn(*qkv), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_count_out_of_range_is_reported(backend):
    """A count larger than the row of indices (torch.compile would read past
    it) raises after the call; the lowering clamps, never reads out of
    bounds."""
    num = torch.tensor([[[1, 3]]], dtype=torch.int32)  # NB = 2
    idx = torch.tensor([[[[0, 1], [1, 0]]]], dtype=torch.int32)
    bm = BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=32, seq_lengths=(64, 64))
    qkv = _qkv(1, 1, 64, 16)
    fn = torch_mlir_flex.compile(_Attend(bm), qkv, backend=backend)
    with pytest.raises(torch_mlir_flex.FlexRuntimeError,
                       match=r"kv_num_blocks value 3 at query block 1 is out of range \[0, 2\]"):
        fn(*qkv)


def test_dynamo_backend_keeps_block_tensors():
    """torch.compile(model, backend="torch_mlir_flex"): the BlockMask tensors
    reach the graph as inputs or attributes and are honoured."""
    from torch_mlir_flex import dynamo

    dynamo.register()  # no-op when the entry point is installed
    num, idx, fnum, fidx = _topk_blocks(1, 2, 4, 4, 2, 1, seed=7)
    bm = BlockMask.from_kv_blocks(num, idx, fnum, fidx, BLOCK_SIZE=32, seq_lengths=(128, 128))
    qkv = _qkv(1, 2, 128, 16, seed=8)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**_DYNAMO):
        got = torch.compile(_Attend(bm), backend="torch_mlir_flex", dynamic=False)(*qkv)
    torch._dynamo.reset()
    _close(got, _compiled_flex(*qkv, block_mask=bm))
