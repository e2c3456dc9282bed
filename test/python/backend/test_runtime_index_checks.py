"""Runtime checks inside compiled code (flex-insert-checks / flex-lower-checks):
out-of-range reads raise an IndexError subclass after the call, never an
out-of-bounds read or a process abort; negative indices wrap as in eager.

    PYTHONPATH=python pytest -q test/python/backend/test_runtime_index_checks.py
"""

import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.backend import FlexIndexError, FlexRuntimeError, JitFunction

warnings.filterwarnings("ignore")

BACKENDS = ["reference", "tiled"]
S = 32


def qkv(B=1, H=2, E=16):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, E, generator=g) for _ in range(3))


class ScoreTableByIds(torch.nn.Module):
    """score_mod `s + table[ids[kv]]`: a constant table, runtime ids."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.linspace(-1.0, 1.0, 8))

    def forward(self, q, k, v, ids):
        table = self.table

        def score(s, b, h, m, n):
            return s + table[ids[n]]

        return flex_attention(q, k, v, score_mod=score)


class MaskFlagsByDoc(torch.nn.Module):
    """mask_mod `flags[doc[kv]] & (q >= kv)`: two runtime captures."""

    def forward(self, q, k, v, flags, doc):
        def mask(b, h, m, n):
            return flags[doc[n]] & (m >= n)

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


class TablePastEnd(torch.nn.Module):
    """score_mod `s + tab[m + off]` on a constant table of S entries."""

    def __init__(self, off):
        super().__init__()
        self.off = off
        self.register_buffer("tab", torch.arange(S, dtype=torch.float32) / S)

    def forward(self, q, k, v):
        tab, off = self.tab, self.off

        def score(s, b, h, m, n):
            return s + tab[m + off]

        return flex_attention(q, k, v, score_mod=score)


class EmbedThenAttend(torch.nn.Module):
    """Token embedding (torch-mlir's gather + asserts) before flex_attention."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(10, 16).requires_grad_(False)

    def forward(self, tokens):
        x = self.emb(tokens)[None, None]  # [1, 1, S, 16]
        return flex_attention(x, x.clone(), x.clone())


def _ids(bad=None, negative=False):
    ids = torch.arange(S, dtype=torch.int64) % 8
    if negative:
        ids = ids - 8  # -8 .. -1: eager wraps them
    if bad is not None:
        ids[5] = bad
    return ids


_cache = {}


def compiled(name, backend):
    """One compile per (model, backend) for the whole module."""
    key = (name, backend)
    if key not in _cache:
        model, args = MODELS[name]()
        _cache[key] = (model, torch_mlir_flex.compile(model, args, backend=backend))
    return _cache[key]


MODELS = {
    "score_ids": lambda: (ScoreTableByIds(), qkv() + (_ids(),)),
    "mask_doc": lambda: (MaskFlagsByDoc(), qkv() + (torch.ones(4, dtype=torch.bool),
                                                    torch.arange(S, dtype=torch.int64) % 4)),
    "past_end": lambda: (TablePastEnd(3), qkv()),
    "embedding": lambda: (EmbedThenAttend(), (torch.arange(S, dtype=torch.int64) % 10,)),
}


def eager_error(model, args):
    with pytest.raises(IndexError) as e:
        model(*args)
    return e.value


@pytest.mark.parametrize("backend", BACKENDS)
def test_score_mod_runtime_id_out_of_range(backend):
    model, fn = compiled("score_ids", backend)
    good = qkv() + (_ids(),)
    torch.testing.assert_close(fn(*good), model(*good), atol=1e-5, rtol=1e-5)
    bad = qkv() + (_ids(bad=11),)
    eager_error(model, bad)
    with pytest.raises(FlexIndexError) as e:
        fn(*bad)
    msg = str(e.value)
    assert isinstance(e.value, IndexError)
    assert "index 11 is out of bounds for dimension 0 with size 8" in msg
    assert "score_mod" in msg and "captured tensor" in msg
    # Too negative for the wrap: reported as written, like eager.
    with pytest.raises(FlexIndexError, match="index -9 is out of bounds for dimension 0 with size 8"):
        fn(*(qkv() + (_ids(bad=-9),)))
    # The status is per call: good inputs work again.
    torch.testing.assert_close(fn(*good), model(*good), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_ids_wrap_like_eager(backend):
    model, fn = compiled("score_ids", backend)
    args = qkv() + (_ids(negative=True),)
    torch.testing.assert_close(fn(*args), model(*args), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_mod_runtime_capture_out_of_range(backend):
    model, fn = compiled("mask_doc", backend)
    flags = torch.tensor([True, False, True, True])
    doc = torch.arange(S, dtype=torch.int64) % 4
    torch.testing.assert_close(fn(*qkv(), flags, doc), model(*qkv(), flags, doc),
                               atol=1e-5, rtol=1e-5)
    doc_bad = doc.clone()
    doc_bad[7] = 4
    eager_error(model, qkv() + (flags, doc_bad))
    with pytest.raises(FlexIndexError) as e:
        fn(*qkv(), flags, doc_bad)
    msg = str(e.value)
    assert "index 4 is out of bounds for dimension 0 with size 4" in msg
    assert "mask_mod" in msg and "captured tensor" in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_table_indexed_past_its_end(backend):
    model, fn = compiled("past_end", backend)
    eager_error(model, qkv())
    with pytest.raises(FlexIndexError) as e:
        fn(*qkv())
    msg = str(e.value)
    assert f"is out of bounds for dimension 0 with size {S}" in msg
    assert "score_mod" in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_bad_token_raises(backend):
    model, fn = compiled("embedding", backend)
    good = (torch.arange(S, dtype=torch.int64) % 10,)
    torch.testing.assert_close(fn(*good), model(*good), atol=1e-5, rtol=1e-5)
    bad = good[0].clone()
    bad[3] = 12
    eager_error(model, (bad,))
    with pytest.raises(FlexIndexError, match="index 12 is out of bounds for dimension 0 with size 10"):
        fn(bad)
    bad[3] = -1  # embedding does not wrap
    eager_error(model, (bad,))
    with pytest.raises(FlexIndexError, match="index -1 is out of bounds"):
        fn(bad)


# torch-mlir's runtime asserts (cf.assert in its linalg output) are recorded
# checks: a FlexRuntimeError (not an IndexError), the process goes on.
ASSERT_IR = """
#id = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<4xi64>) -> tensor<4xi64> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0 : i64
  %first = tensor.extract %x[%c0] : tensor<4xi64>
  %ok = arith.cmpi sge, %first, %z : i64
  cf.assert %ok, "first element {must} be >= 0"
  %init = tensor.empty() : tensor<4xi64>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xi64>) outs(%init : tensor<4xi64>) {
  ^bb0(%a: i64, %o: i64):
    %d = arith.addi %a, %a : i64
    linalg.yield %d : i64
  } -> tensor<4xi64>
  return %y : tensor<4xi64>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_cf_assert_raises_instead_of_abort(backend):
    fn = JitFunction(ASSERT_IR, "main", pipeline=backend)
    x = torch.tensor([1, 2, 3, 4])
    torch.testing.assert_close(fn(x), 2 * x)
    with pytest.raises(FlexRuntimeError, match=r"first element \{must\} be >= 0 \(runtime assert in @main\)") as e:
        fn(torch.tensor([-1, 2, 3, 4]))
    assert not isinstance(e.value, IndexError)
    torch.testing.assert_close(fn(x), 2 * x)



# A capture of dynamic size (hand-written IR: flex-materialize does not take
# dynamic captures from torch yet): its reads are guarded under scf.if, so a
# short or empty capture raises instead of being read out of bounds.
DYN_CAPTURE_IR = """
func.func @main(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>,
                %t: tensor<?xf32>) -> tensor<1x2x16x8xf32> {
  %init = tensor.empty() : tensor<1x2x16x8xf32>
  %o = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      captures(%t : tensor<?xf32>) outs(%init : tensor<1x2x16x8xf32>) scale(1.0) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
    %e = tensor.extract %t[%n] : tensor<?xf32>
    %r = arith.addf %s, %e : f32
    flex.yield %r : f32
  } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_capture_short_or_empty(backend):
    fn = JitFunction(DYN_CAPTURE_IR, "main", pipeline=backend)
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(3))
    t = torch.randn(16, generator=g)
    ref = flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + t[n], scale=1.0)
    torch.testing.assert_close(fn(q, k, v, t), ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(FlexIndexError, match="index 10 is out of bounds for dimension 0 with size 10"):
        fn(q, k, v, t[:10].clone())
    with pytest.raises(FlexIndexError, match="index 0 is out of bounds for dimension 0 with size 0"):
        fn(q, k, v, torch.empty(0))


# index_copy_ does not wrap negative indices (eager raises IndexError) where
# index_put, the op torch decomposes it into, does: a negative index must
# raise, not write row size + index (importer/decompositions.py).
class CopyRows(torch.nn.Module):
    def forward(self, cache, rows, src):
        cache.index_copy_(0, rows, src)
        return cache * 2


class PutRows(torch.nn.Module):
    def forward(self, cache, rows, src):
        cache[rows] = src  # index_put: negative indices wrap, as in eager
        return cache * 2


def _rows_args(rows):
    g = torch.Generator().manual_seed(5)
    return torch.randn(5, 3, generator=g), torch.tensor(rows), torch.randn(2, 3, generator=g)


def _index_copy_raises_like_eager(fn):
    for rows in ([-3, 1], [0, -1], [5, 2]):
        cache, idx, src = _rows_args(rows)
        with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 5"):
            CopyRows()(cache.clone(), idx, src)
        with pytest.raises(FlexIndexError, match=r"index out of range in aten\.index_put") as e:
            fn(cache, idx, src)
        assert isinstance(e.value, IndexError)
    # Valid rows after the failures: output and the caller's cache as eager's.
    cache, idx, src = _rows_args([4, 1])
    want_cache = cache.clone()
    want = CopyRows()(want_cache, idx, src)
    torch.testing.assert_close(fn(cache, idx, src), want)
    torch.testing.assert_close(cache, want_cache)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_copy_negative_or_past_end_raises(backend):
    fn = torch_mlir_flex.compile(CopyRows(), _rows_args([0, 1]), backend=backend)
    _index_copy_raises_like_eager(fn)


def test_index_copy_raises_through_dynamo():
    from torch_mlir_flex import dynamo

    dynamo.register()
    before = dict(dynamo.stats)
    fn = torch.compile(CopyRows(), backend="torch_mlir_flex", dynamic=False)
    fn(*_rows_args([0, 1]))
    _index_copy_raises_like_eager(fn)
    assert dynamo.stats["eager"] == before.get("eager", 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_put_negative_rows_still_wrap(backend):
    fn = torch_mlir_flex.compile(PutRows(), _rows_args([0, 1]), backend=backend)
    cache, idx, src = _rows_args([-3, -1])
    want_cache = cache.clone()
    want = PutRows()(want_cache, idx, src)
    torch.testing.assert_close(fn(cache, idx, src), want)
    torch.testing.assert_close(cache, want_cache)


# index_add / index_add_ refuse negative indices in eager (a RuntimeError)
# where the accumulating index_put they decompose into wraps them.
class AddRows(torch.nn.Module):
    def forward(self, acc, rows, src):
        acc.index_add_(0, rows, src, alpha=0.5)
        return acc.index_add(0, rows, src) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_add_negative_or_past_end_raises(backend):
    fn = torch_mlir_flex.compile(AddRows(), _rows_args([0, 1]), backend=backend)
    for rows in ([-3, 1], [0, -1], [5, 2]):
        acc, idx, src = _rows_args(rows)
        # Eager: an IndexError (alpha != 1) or a RuntimeError (alpha 1);
        # FlexIndexError is both.
        with pytest.raises((RuntimeError, IndexError), match="out of (bounds|range)"):
            AddRows()(acc.clone(), idx, src)
        with pytest.raises(FlexIndexError, match=r"index out of range in aten\.index_put") as e:
            fn(acc, idx, src)
        assert isinstance(e.value, RuntimeError) and isinstance(e.value, IndexError)
    # Valid (repeated) rows: output and the caller's accumulator as eager's.
    acc, idx, src = _rows_args([4, 4])
    want_acc = acc.clone()
    want = AddRows()(want_acc, idx, src)
    torch.testing.assert_close(fn(acc, idx, src), want)
    torch.testing.assert_close(acc, want_acc)
