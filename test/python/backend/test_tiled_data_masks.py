"""Data-dependent masks on the "tiled" pipeline: block classification by
intervals through reads of captured tensors (document ids, bool and float
per-position tables), checked against eager flex_attention and against the
same lowering without block skipping (bit-identical).

Run (repository root, venv active): PYTHONPATH=python \
     pytest -q test/python/backend/test_tiled_data_masks.py
"""

import math

import pytest
import torch

import torch_mlir_flex  # noqa: F401  (load order)
from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import tiled_pipeline

from test_tiled import _close, _inputs, _reference, fi

LN2 = math.log(2.0)


def _classification(text):
    """flex-to-flash's block classification of the (single) op, after the
    pipeline's flex-insert-checks."""
    from torch_mlir_flex.mlir import ir, passmanager

    kinds = []
    with ir.Context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(
            "builtin.module(flex-insert-checks,func.func(flex-to-flash))").run(module.operation)

        def visit(op):
            attrs = op.operation.attributes
            if "flex.block_classification" in attrs:
                kinds.append(ir.StringAttr(attrs["flex.block_classification"]).value)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return kinds


def _doc_ids(S, seed, max_len=40):
    """Random document lengths summing to S, with length-1 documents."""
    g = torch.Generator().manual_seed(seed)
    lens, tot = [], 0
    while tot < S:
        n = 1 if len(lens) % 3 == 1 else int(torch.randint(1, max_len, (1,), generator=g))
        n = min(n, S - tot)
        lens.append(n)
        tot += n
    return torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens)).to(torch.int64)


def _check(text, args, t_mask, q, k, v, tiles_list=((0, 0), (16, 16), (16, 32)), kind="interval"):
    assert _classification(text) == [kind]
    r_out, r_lse, _ = _reference(q, k, v, None, t_mask)
    for tiles in tiles_list:
        fn_skip = JitFunction(text, "f", pipeline=tiled_pipeline(*tiles))
        out, lse = fn_skip(*args)
        _close(out, r_out)
        _close(lse * LN2, r_lse)
        fn_all = JitFunction(text, "f", pipeline=tiled_pipeline(*tiles, block_sparsity=False))
        a_out, a_lse = fn_all(*args)
        assert torch.equal(out, a_out) and torch.equal(lse, a_lse)


DOC_EQ = """
        %dq = tensor.extract %doc[%m] : tensor<{S}xi64>
        %dk = tensor.extract %doc[%n] : tensor<{S}xi64>
        %c = arith.cmpi eq, %dq, %dk : i64"""


@pytest.mark.parametrize("S,causal", [(200, False), (257, True), (64, False)])
def test_document_ids(S, causal):
    B, H, E = 1, 2, 16
    q, k, v = _inputs(B, H, S, S, E, seed=S)
    doc = _doc_ids(S, seed=S)
    mask = fi.document_mask("doc", S) if causal else DOC_EQ.format(S=S)
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask,
                           captures=[("doc", f"tensor<{S}xi64>")])

    def t_mask(b, h, m, n):
        keep = doc[m] == doc[n]
        return keep & (m >= n) if causal else keep

    _check(text, (q, k, v, doc), t_mask, q, k, v)


def test_document_ids_per_batch_i32():
    """doc[b, q] (batch-dependent ids, i32, compared through extsi) with
    M != N: queries and keys read separate captures of their own lengths."""
    B, H, M, N, E = 2, 2, 90, 150, 16
    q, k, v = _inputs(B, H, M, N, E, seed=11)
    dq = torch.stack([_doc_ids(M, seed=1, max_len=30), _doc_ids(M, seed=2, max_len=50)])
    dk = torch.stack([_doc_ids(N, seed=3, max_len=30), _doc_ids(N, seed=4, max_len=70)])
    dq, dk = dq.to(torch.int32), dk.to(torch.int32)
    mask = f"""
        %a = tensor.extract %dq[%b, %m] : tensor<{B}x{M}xi32>
        %x = tensor.extract %dk[%b, %n] : tensor<{B}x{N}xi32>
        %a64 = arith.extsi %a : i32 to i64
        %x64 = arith.extsi %x : i32 to i64
        %c = arith.cmpi eq, %a64, %x64 : i64"""
    text = fi.attention_ir(B=B, Hq=H, M=M, N=N, E=E, lse=True, mask_mod=mask,
                           captures=[("dq", f"tensor<{B}x{M}xi32>"),
                                     ("dk", f"tensor<{B}x{N}xi32>")])

    def t_mask(b, h, m, n):
        return dq[b, m] == dk[b, n]

    _check(text, (q, k, v, dq, dk), t_mask, q, k, v)


def test_imported_document_form():
    """The form the importer produces: index -> i32 -> i64 casts, the
    negative-index wrap select, i64 -> index, then the read; document and
    causal."""
    B, H, S, E = 1, 2, 130, 16
    q, k, v = _inputs(B, H, S, S, E, seed=5)
    doc = _doc_ids(S, seed=7)
    read = """
        %{x}i = arith.index_cast %{a} : index to i32
        %{x}e = arith.extsi %{x}i : i32 to i64
        %{x}neg = arith.cmpi slt, %{x}e, %zero : i64
        %{x}w = arith.addi %{x}e, %len : i64
        %{x}s = arith.select %{x}neg, %{x}w, %{x}e : i64
        %{x}x = arith.index_cast %{x}s : i64 to index
        %{x}d = tensor.extract %doc[%{x}x] : tensor<{S}xi64>"""
    mask = (f"""
        %zero = arith.constant 0 : i64
        %len = arith.constant {S} : i64""" + read.format(x="q", a="m", S=S) +
            read.format(x="k", a="n", S=S) + """
        %eq = arith.cmpi eq, %qd, %kd : i64
        %ca = arith.cmpi sge, %m, %n : index
        %c = arith.andi %eq, %ca : i1""")
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask,
                           captures=[("doc", f"tensor<{S}xi64>")])

    def t_mask(b, h, m, n):
        return (doc[m] == doc[n]) & (m >= n)

    _check(text, (q, k, v, doc), t_mask, q, k, v)


def test_bool_capture():
    """keep[kv] & (keep2[q] | q >= kv) with bool tables (runs of True and
    False so that whole blocks are kept or dropped)."""
    B, H, S, E = 1, 2, 150, 16
    q, k, v = _inputs(B, H, S, S, E, seed=9)
    keep = torch.zeros(S, dtype=torch.bool)
    keep[:70] = True
    keep[100:103] = True
    keep[120:] = True
    keep2 = torch.zeros(S, dtype=torch.bool)
    keep2[40:90] = True
    mask = f"""
        %kk = tensor.extract %keep[%n] : tensor<{S}xi1>
        %kq = tensor.extract %keep2[%m] : tensor<{S}xi1>
        %ca = arith.cmpi sge, %m, %n : index
        %o = arith.ori %kq, %ca : i1
        %c = arith.andi %kk, %o : i1"""
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask,
                           captures=[("keep", f"tensor<{S}xi1>"),
                                     ("keep2", f"tensor<{S}xi1>")])

    def t_mask(b, h, m, n):
        return keep[n] & (keep2[m] | (m >= n))

    _check(text, (q, k, v, keep, keep2), t_mask, q, k, v)


@pytest.mark.parametrize("elt,dtype", [("f32", torch.float32), ("bf16", torch.bfloat16),
                                       ("f16", torch.float16)])
def test_float_capture(elt, dtype):
    """bias[kv] > 0 (a float table, blocks of positive and negative values,
    a NaN) and a select between two reads of it, with extui of a bool."""
    B, H, S, E = 1, 2, 140, 16
    q, k, v = _inputs(B, H, S, S, E, seed=13)
    bias = (torch.where(torch.arange(S) % 50 < 30, 1.0, -1.0) * (torch.rand(S) + 0.1)).to(dtype)
    bias[77] = 0.0
    bias[5] = float("nan")  # comparisons with it are false: decides nothing
    mask = f"""
        %x = tensor.extract %bias[%n] : tensor<{S}x{elt}>
        %y = tensor.extract %bias[%m] : tensor<{S}x{elt}>
        %z = arith.constant 0.0 : {elt}
        %pos = arith.cmpf ogt, %x, %z : {elt}
        %ca = arith.cmpi sge, %m, %n : index
        %w = arith.select %ca, %x, %y : {elt}
        %ge = arith.cmpf oge, %w, %z : {elt}
        %u = arith.extui %ge : i1 to i32
        %one = arith.constant 1 : i32
        %ge1 = arith.cmpi eq, %u, %one : i32
        %c = arith.andi %pos, %ge1 : i1"""
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask,
                           captures=[("bias", f"tensor<{S}x{elt}>")])

    def t_mask(b, h, m, n):
        w = torch.where(m >= n, bias[n], bias[m])
        return (bias[n] > 0) & (w >= 0)

    _check(text, (q, k, v, bias), t_mask, q, k, v)


def test_prefix_lengths():
    """Prefix-LM with per-batch prefix lengths: kv < prefix[b] | q >= kv."""
    B, H, S, E = 2, 2, 120, 16
    q, k, v = _inputs(B, H, S, S, E, seed=15)
    prefix = torch.tensor([37, 1], dtype=torch.int64)
    mask = f"""
        %p = tensor.extract %prefix[%b] : tensor<{B}xi64>
        %ni = arith.index_cast %n : index to i64
        %inp = arith.cmpi slt, %ni, %p : i64
        %ca = arith.cmpi sge, %m, %n : index
        %c = arith.ori %inp, %ca : i1"""
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask,
                           captures=[("prefix", f"tensor<{B}xi64>")])

    def t_mask(b, h, m, n):
        return (n < prefix[b]) | (m >= n)

    _check(text, (q, k, v, prefix), t_mask, q, k, v)


def test_chained_reads_use_dense_fallback():
    """start[doc[kv]] <= q: the index of the outer read is data: runtime
    checks guard it, and the block is classified by the dense pre-pass."""
    B, H, S, E = 1, 2, 100, 16
    q, k, v = _inputs(B, H, S, S, E, seed=17)
    doc = _doc_ids(S, seed=19)
    nd = int(doc.max()) + 1
    start = torch.tensor([int((doc == d).nonzero()[0]) for d in range(nd)], dtype=torch.int64)
    mask = f"""
        %d = tensor.extract %doc[%n] : tensor<{S}xi64>
        %di = arith.index_cast %d : i64 to index
        %st = tensor.extract %start[%di] : tensor<{nd}xi64>
        %mi = arith.index_cast %m : index to i64
        %c = arith.cmpi sle, %st, %mi : i64"""
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask,
                           captures=[("doc", f"tensor<{S}xi64>"),
                                     ("start", f"tensor<{nd}xi64>")])

    def t_mask(b, h, m, n):
        return start[doc[n]] <= m

    _check(text, (q, k, v, doc, start), t_mask, q, k, v, tiles_list=((16, 16),),
           kind="dense")


# Index masks in the forms the importer produces for Python's `%`, `//`
# (through f64 floor) and abs: classified by intervals too.
MOD_FLOOR_ABS = """
        %qi = arith.index_cast %m : index to i32
        %ki = arith.index_cast %n : index to i32
        %c0 = arith.constant 0 : i32
        %c5 = arith.constant 5 : i32
        %r = arith.remsi %ki, %c5 : i32
        %nz = arith.cmpi ne, %r, %c0 : i32
        %ng = arith.cmpi slt, %r, %c0 : i32
        %fix = arith.andi %nz, %ng : i1
        %r5 = arith.addi %r, %c5 : i32
        %mod = arith.select %fix, %r5, %r : i32
        %keepmod = arith.cmpi ne, %mod, %c0 : i32
        %c24 = arith.constant 24 : i64
        %c24i = arith.trunci %c24 : i64 to i32
        %qf = arith.sitofp %qi : i32 to f64
        %kf = arith.sitofp %ki : i32 to f64
        %bf = arith.sitofp %c24i : i32 to f64
        %qd = arith.divf %qf, %bf : f64
        %kd = arith.divf %kf, %bf : f64
        %qb = math.floor %qd : f64
        %kb = math.floor %kd : f64
        %qbi = arith.fptosi %qb : f64 to i32
        %kbi = arith.fptosi %kb : f64 to i32
        %blk = arith.cmpi sge, %qbi, %kbi : i32
        %d = arith.subi %qi, %ki : i32
        %ad = math.absi %d : i32
        %c40 = arith.constant 40 : i32
        %near = arith.cmpi sle, %ad, %c40 : i32
        %a = arith.andi %blk, %near : i1
        %c = arith.ori %a, %keepmod : i1"""


def test_mod_floor_div_abs_index_mask():
    """(floor(q / 24) >= floor(kv / 24) & |q - kv| <= 40) | kv % 5 != 0."""
    B, H, S, E = 1, 2, 170, 16
    q, k, v = _inputs(B, H, S, S, E, seed=21)
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=MOD_FLOOR_ABS)

    def t_mask(b, h, m, n):
        return (((m // 24) >= (n // 24)) & ((m - n).abs() <= 40)) | (n % 5 != 0)

    _check(text, (q, k, v), t_mask, q, k, v, tiles_list=((0, 0), (8, 8), (16, 32)))


def test_block_and_window_index_mask():
    """floor(q / 24) >= floor(kv / 24) & |q - kv| <= 40 (the same forms
    without the modulo, so that blocks are empty and full)."""
    B, H, S, E = 1, 2, 170, 16
    q, k, v = _inputs(B, H, S, S, E, seed=23)
    mask = MOD_FLOOR_ABS.replace("%c = arith.ori %a, %keepmod : i1", "%c = arith.andi %a, %a : i1")
    text = fi.attention_ir(B=B, Hq=H, M=S, N=S, E=E, lse=True, mask_mod=mask)

    def t_mask(b, h, m, n):
        return ((m // 24) >= (n // 24)) & ((m - n).abs() <= 40)

    _check(text, (q, k, v), t_mask, q, k, v, tiles_list=((0, 0), (8, 8), (16, 32)))
