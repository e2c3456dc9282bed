"""tm_tensor.sort (aten.sort, argsort, topk) -> a stable merge sort on tensors.

    %r:2 = tm_tensor.sort dimension(d) outs(%values, %indices)
        { ^bb0(%a0, %b0, %a1, %b1): %c = arith.cmpf oge, %a0, %b0  yield %c }

Every line along ``d`` is sorted by a bottom-up merge sort (O(n log n)):
passes of width 1, 2, 4, ... merge adjacent runs from the operands into
scratch tensors and back (two passes per ``scf.for`` iteration, so the
result is back in the operands), all operands permuted together.

Order: torch-mlir's comparators (``cmpf oge/ole``, ``cmpi sge/sle/uge/ule``
on the first operand) are recognized and replaced by a strict order that
matches torch: NaN is larger than every number (last ascending, first
descending), equal keys keep their input order (stable). Any other
comparator is used as TMTensor defines it: ``region(left, right)`` true
means the pair is in order, so the merge takes the right element first only
when the region is false.
"""

from torch_mlir import ir
from torch_mlir.dialects import arith, math

from . import builder as B
from .op import TmOp

# arith.cmpf / arith.cmpi predicate numbers -> (descending, signed?).
_CMPF_ORDER = {2: True, 3: True, 9: True, 10: True,   # ogt oge ugt uge
               4: False, 5: False, 11: False, 12: False}  # olt ole ult ule
_CMPI_ORDER = {4: (True, True), 5: (True, True), 2: (False, True), 3: (False, True),
               8: (True, False), 9: (True, False), 6: (False, False), 7: (False, False)}


def _andi(a, b):
    return arith.AndIOp(a, b).result


def _ori(a, b):
    return arith.OrIOp(a, b).result


def _not(a):
    return arith.XOrIOp(a, arith.ConstantOp(a.type, ir.IntegerAttr.get(a.type, 1)).result).result


def _recognized_order(op: TmOp):
    """(kind, descending, signed) for torch-mlir's one-compare comparators
    on the first operand, else None."""
    block = op.region.blocks[0]
    ops = [o.operation if hasattr(o, "operation") else o for o in block.operations]
    if len(ops) != 2 or ops[0].name not in ("arith.cmpf", "arith.cmpi"):
        return None
    cmp, yld = ops
    a, b = block.arguments[0], block.arguments[1]
    lhs, rhs = cmp.operands[0], cmp.operands[1]
    if list(yld.operands) != [cmp.results[0]] or {lhs, rhs} != {a, b} or lhs == rhs:
        return None
    pred = ir.IntegerAttr(cmp.attributes["predicate"]).value
    swapped = lhs == b
    if cmp.name == "arith.cmpf":
        if pred not in _CMPF_ORDER:
            return None
        return "float", _CMPF_ORDER[pred] != swapped, True
    if pred not in _CMPI_ORDER:
        return None
    desc, signed = _CMPI_ORDER[pred]
    return "int", desc != swapped, signed


def _strict_before(op: TmOp):
    """fn(left_values, right_values) -> i1: the right element goes first."""
    order = _recognized_order(op)
    if order is None:
        def by_region(lv, rv):
            args = [v for pair in zip(lv, rv) for v in pair]
            return _not(B.inline_region(op.region, args)[0])
        return by_region
    kind, desc, signed = order

    def by_key(lv, rv):
        l, r = lv[0], rv[0]
        if kind == "int":
            return B.cmpi(("sgt" if desc else "slt") if signed else ("ugt" if desc else "ult"), r, l)
        if desc:  # NaN first
            return _ori(B.cmpf("ogt", r, l), _andi(B.cmpf("uno", r, r), B.cmpf("ord", l, l)))
        return _ori(B.cmpf("olt", r, l), _andi(B.cmpf("uno", l, l), B.cmpf("ord", r, r)))
    return by_key


def _pass_pairs(n: ir.Value, static_n) -> ir.Value:
    """ceil(ceil(log2(n)) / 2): loop iterations of two merge passes each."""
    if static_n is not None:
        passes = max(static_n - 1, 0).bit_length()
        return B.index((passes + 1) // 2)
    i64 = ir.IntegerType.get_signless(64)
    nm1 = B.subi(arith.MaxSIOp(n, B.index(1)).result, B.index(1))
    lz = math.CountLeadingZerosOp(arith.IndexCastOp(i64, nm1).result).result
    passes = arith.SubIOp(B.const_like(i64, 64), lz).result
    pairs = arith.ShRUIOp(arith.AddIOp(passes, B.const_like(i64, 1)).result, B.const_like(i64, 1)).result
    return arith.IndexCastOp(ir.IndexType.get(), pairs).result


def lower_sort(op: TmOp):
    outs = op.outs
    if op.ins or not outs:
        raise op.error("with inputs or without outputs is not supported")
    m = len(outs)
    d = op.int_attr("dimension")
    ty = ir.RankedTensorType(outs[0].type)
    before = _strict_before(op)
    n = B.dim(outs[0], d)
    pairs = _pass_pairs(n, None if ty.is_dynamic_dim(d) else ty.get_dim_size(d))

    def line(ivs, args):
        def at(k):
            return ivs[:d] + [k] + ivs[d:]

        def merge_pass(src, dst, width):
            two_w = arith.MulIOp(width, B.index(2)).result

            def run(lo, dst):
                mid = B.mini(B.addi(lo, width), n)
                hi = B.mini(B.addi(lo, two_w), n)

                def elem(k, carried):
                    dst, i, j = carried[:m], carried[m], carried[m + 1]
                    ii = B.mini(i, B.subi(mid, B.index(1)))
                    jj = B.mini(j, B.subi(hi, B.index(1)))
                    lv = [B.extract(s, at(ii)) for s in src]
                    rv = [B.extract(s, at(jj)) for s in src]
                    take_left = _andi(B.cmpi("slt", i, mid),
                                      _ori(B.cmpi("sge", j, hi), _not(before(lv, rv))))
                    dst = [B.insert(B.select(take_left, l, r), t, at(k)) for l, r, t in zip(lv, rv, dst)]
                    one = B.index(1)
                    return dst + [B.select(take_left, B.addi(i, one), i),
                                  B.select(take_left, j, B.addi(j, one))]

                return B.for_loop(lo, hi, list(dst) + [lo, mid], elem)[:m]

            return B.for_loop(B.index(0), n, dst, run, step=two_w)

        def two_passes(p, carried):
            srcs, tmps = carried[:m], carried[m:]
            width = arith.ShLIOp(B.index(1), B.addi(p, p)).result
            tmps = merge_pass(srcs, tmps, width)
            srcs = merge_pass(tmps, srcs, arith.MulIOp(width, B.index(2)).result)
            return srcs + tmps

        return B.for_loop(B.index(0), pairs, args, two_passes)

    outer = [B.dim(outs[0], i) for i in range(ty.rank) if i != d]
    scratch = [B.scratch_like(t) for t in outs]
    dests = [B.private_copy(t) for t in outs]
    return B.loop_nest(outer, dests + scratch, line)[:m]
