"""Numerical edge cases vs eager flex_attention, every backend: large scores,
-inf from score_mod (whole rows, some entries), fully masked rows, NaN
inputs, f16/bf16 ranges. docs/robustness.md records what eager does."""

import math
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from .helpers import backends, require_compile

B, H, M, N, E = 1, 2, 12, 70, 16
NEG_INF = float("-inf")


def dense(mask_mod, m=M, n=N):
    return BlockMask.from_kv_blocks(torch.ones(B, H, 1, dtype=torch.int32), torch.zeros(B, H, 1, 1, dtype=torch.int32),
                                    BLOCK_SIZE=(m, n), mask_mod=mask_mod, seq_lengths=(m, n))


class Edge(torch.nn.Module):
    """Several flex calls, each one edge case; returns (out, lse) of each."""

    def forward(self, q, k, v):
        calls = [
            dict(score_mod=lambda s, b, h, i, j: s * 1e4),                      # |s| ~ 1e4: one-hot softmax
            dict(score_mod=lambda s, b, h, i, j: s - 1e4 * (j % 3)),            # -1e4 offsets
            dict(score_mod=lambda s, b, h, i, j: s + 1e4),                      # large constant shift
            dict(score_mod=lambda s, b, h, i, j: torch.where(i == 3, NEG_INF, s)),          # a whole row -inf
            dict(score_mod=lambda s, b, h, i, j: torch.where((i + j) % 3 == 0, NEG_INF, s)),  # some entries
            dict(score_mod=lambda s, b, h, i, j: s * 0 + NEG_INF),              # every row -inf
            dict(block_mask=dense(lambda b, h, i, j: (i >= 4) & (j <= i))),     # rows 0..3 fully masked
            dict(block_mask=dense(lambda b, h, i, j: j < 0)),                   # everything masked
            # mask after score_mod: tanh(-inf) = -1 must not leak into masked entries
            dict(score_mod=lambda s, b, h, i, j: torch.tanh(torch.where(j > i, NEG_INF, s)),
                 block_mask=dense(lambda b, h, i, j: j <= i + 2)),
        ]
        outs = []
        for kw in calls:
            o, lse = flex_attention(q, k, v, return_lse=True, **kw)
            outs += [o, lse]
        return tuple(outs)


def _eager(model, args):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return model(*args)


def _inputs(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*s, generator=g).to(dtype) for s in [(B, H, M, E), (B, H, N, E), (B, H, N, E)])


def _check(got, want, rtol=1e-3, atol=1e-5):
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, i
        # same non-finite pattern (NaN where eager has NaN, +-inf likewise)
        assert torch.equal(a.isnan(), b.isnan()), f"result {i}: NaN pattern differs"
        assert torch.equal(a.isinf(), b.isinf()) and torch.equal(a[a.isinf()], b[b.isinf()]), f"result {i}: inf differs"
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"result {i}: {m}")


@pytest.fixture(scope="module", params=["reference", "tiled"])
def compiled_edge(request):
    compile_ = require_compile()
    if request.param not in backends():
        pytest.skip(f"backend {request.param!r} is not registered yet")
    return compile_(Edge(), _inputs(), backend=request.param)


def test_large_and_infinite_scores_and_masked_rows(compiled_edge):
    args = _inputs()
    want = _eager(Edge(), args)
    got = compiled_edge(*args)
    # large-score cases: lse ~ 1e4 * |s| / ln 2, compare relatively
    _check(got, want, rtol=1e-3, atol=1e-3)
    # the documented semantics on top of "same as eager":
    o_row, lse_row = got[6], got[7]
    assert torch.all(o_row[:, :, 3] == 0) and torch.all(lse_row[:, :, 3] == NEG_INF)
    assert torch.all(got[10] == 0) and torch.all(got[11] == NEG_INF)
    assert torch.all(got[12][:, :, :4] == 0) and torch.all(got[13][:, :, :4] == NEG_INF)
    assert not any(t.isnan().any() for t in got)


def _nan_inputs(where):
    q, k, v = (t.clone() for t in _inputs(seed=1))
    if where == "q_row":
        q[0, 1, 5, 3] = float("nan")
    elif where == "k_col":
        k[0, 0, 2, 0] = float("nan")
    else:
        v[0, 1, 7, 4] = float("nan")
    return q, k, v


# Calls of Edge whose rows always keep a finite score (no fully masked row).
UNMASKED_CALLS = [0, 1, 2, 4]


@pytest.mark.parametrize("where", ["q_row", "k_col", "v_entry"])
def test_nan_inputs_propagate_like_eager(compiled_edge, where):
    q, k, v = _nan_inputs(where)
    want = _eager(Edge(), (q, k, v))
    got = compiled_edge(q, k, v)
    pick = lambda t: [t[2 * c + r] for c in UNMASKED_CALLS for r in (0, 1)]
    _check(pick(got), pick(want), rtol=1e-3, atol=1e-3)
    assert any(t.isnan().any() for t in pick(got))


def test_fully_masked_rows_stay_zero_with_nan_values(compiled_edge):
    """Deliberate difference: eager computes a fully masked row as 0-weights
    @ V, so a NaN anywhere in V makes it NaN; flex.attention defines such a
    row as exactly 0 (lse -inf) whatever V holds."""
    q, k, v = _nan_inputs("v_entry")
    want = _eager(Edge(), (q, k, v))
    got = compiled_edge(q, k, v)
    o, lse = got[14], got[15]  # the everything-masked call
    assert want[14].isnan().any()
    assert torch.all(o == 0) and torch.all(lse == NEG_INF)


def test_nan_score_followed_by_masked_scores(compiled_edge):
    # Regression: the online max used to let a later -inf replace a NaN
    # running max, giving 0 instead of eager's NaN.
    q, k, v = _nan_inputs("q_row")  # row 5 of the causal call: NaN for j <= 5, -inf after
    want = _eager(Edge(), (q, k, v))
    got = compiled_edge(q, k, v)
    assert want[12][0, 1, 5].isnan().all()
    assert got[12][0, 1, 5].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mag", [1.0, 300.0])
def test_half_precision_large_scores(dtype, mag):
    """q·k beyond the f16 range (|s| up to ~2e5): eager computes scores in
    f32, so do we; the output is rounded to the input dtype once."""
    compile_ = require_compile()

    class Plain(torch.nn.Module):
        def forward(self, q, k, v):
            return flex_attention(q, k, v, return_lse=True)

    g = torch.Generator().manual_seed(2)
    q = (torch.randn(1, 2, 8, 64, generator=g) * mag).to(dtype)
    k = (torch.randn(1, 2, 8, 64, generator=g) * mag).to(dtype)
    v = torch.randn(1, 2, 8, 64, generator=g).to(dtype)
    want = _eager(Plain(), (q, k, v))
    tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    for b in backends():
        got = compile_(Plain(), (q, k, v), backend=b)(q, k, v)
        assert not got[0].isnan().any()
        torch.testing.assert_close(got[0], want[0], rtol=tol, atol=tol)
        torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-2)


def test_half_precision_large_values():
    """|v| near the top of the f16 range stays finite (f32 accumulation);
    bf16 values near its (= f32's) maximum overflow our unnormalized f32
    accumulator where eager (normalize, then P·V) stays finite: documented
    in docs/robustness.md; up to 1e37 both agree."""
    compile_ = require_compile()

    class Plain(torch.nn.Module):
        def forward(self, q, k, v):
            return flex_attention(q, k, v)

    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 8, 64, generator=g)
    k = torch.randn(1, 2, 8, 64, generator=g)
    for dtype, big in [(torch.float16, 6.0e4), (torch.bfloat16, 1e37)]:
        v = (torch.rand(1, 2, 8, 64, generator=g) * big).to(dtype)
        qd, kd = q.to(dtype), k.to(dtype)
        want = _eager(Plain(), (qd, kd, v))
        for b in backends():
            got = compile_(Plain(), (qd, kd, v), backend=b)(qd, kd, v)
            assert got.isfinite().all(), (dtype, b)
            torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=0)
