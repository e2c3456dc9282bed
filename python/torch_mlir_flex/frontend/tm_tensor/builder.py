"""IR-building helpers for the tm_tensor rewrites (torch-mlir wheel's MLIR).

Every helper builds at the current ``ir.InsertionPoint`` and ``ir.Location``
(callers open both). Loops are ``scf.for`` over ``index`` carrying whole
tensors; elements are read with ``tensor.extract`` and written with
``tensor.insert``, which one-shot bufferization turns into in-place
loads/stores.
"""

from typing import Callable, List, Sequence

from torch_mlir import ir
from torch_mlir.dialects import arith, bufferization, scf, tensor


def owner_op(o):
    return o.operation if hasattr(o, "operation") else o


def index(v: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), v).result


def const_like(t: ir.Type, v) -> ir.Value:
    """A scalar constant of int or float type ``t``."""
    if isinstance(t, ir.IntegerType) or str(t).startswith("i"):
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, int(v))).result
    return arith.ConstantOp(t, ir.FloatAttr.get(t, float(v))).result


def dim(t: ir.Value, i: int) -> ir.Value:
    """Size of dimension ``i`` of the ranked tensor ``t`` as an index."""
    ty = ir.RankedTensorType(t.type)
    if ty.is_dynamic_dim(i):
        return tensor.DimOp(t, index(i)).result
    return index(ty.get_dim_size(i))


def scratch_like(t: ir.Value) -> ir.Value:
    """A new tensor of ``t``'s type with undefined contents. Not
    tensor.empty: cse would merge two of them into one value, and two loop
    destinations initialized from it then share one buffer after
    bufferization."""
    ty = ir.RankedTensorType(t.type)
    dyn = [dim(t, i) for i in range(ty.rank) if ty.is_dynamic_dim(i)]
    return bufferization.AllocTensorOp(ty, dyn).result


# Producers whose result is a new buffer with defined contents after
# bufferization (tensor.empty is not: cse may merge two of them).
_FRESH = ("linalg.fill", "bufferization.alloc_tensor")


def private_copy(t: ir.Value) -> ir.Value:
    """``t``, or a copy of it (``bufferization.alloc_tensor copy``) unless
    it is freshly allocated. The loops write their destination in place;
    without the copy, a destination that is (a view of) a function argument
    would be written in the caller's memory, since one-shot bufferization
    treats function arguments as writable."""
    producer = t.owner
    name = getattr(getattr(producer, "operation", producer), "name", None)
    if name in _FRESH:
        return t
    return bufferization.AllocTensorOp(t.type, [], copy=t).result


def extract(t: ir.Value, idx: Sequence[ir.Value]) -> ir.Value:
    return tensor.ExtractOp(t, list(idx)).result


def insert(v: ir.Value, t: ir.Value, idx: Sequence[ir.Value]) -> ir.Value:
    return tensor.InsertOp(v, t, list(idx)).result


def addi(a, b):
    return arith.AddIOp(a, b).result


def subi(a, b):
    return arith.SubIOp(a, b).result


def mini(a, b):
    return arith.MinSIOp(a, b).result


def cmpi(pred: str, a, b) -> ir.Value:
    """arith.cmpi with a predicate named as in the IR ("slt", "eq", ...)."""
    return arith.CmpIOp(arith.CmpIPredicate[pred], a, b).result


def cmpf(pred: str, a, b) -> ir.Value:
    """arith.cmpf with a predicate named as in the IR ("olt", "uno", ...)."""
    return arith.CmpFOp(arith.CmpFPredicate[pred.upper()], a, b).result


def select(c, a, b):
    return arith.SelectOp(c, a, b).result


def for_loop(lb: ir.Value, ub: ir.Value, iter_args: Sequence[ir.Value],
             body: Callable[[ir.Value, List[ir.Value]], Sequence[ir.Value]],
             step: ir.Value = None) -> List[ir.Value]:
    """scf.for lb..ub (step 1 by default); ``body(iv, args)`` returns the
    values to yield. Returns the loop's results."""
    loop = scf.ForOp(lb, ub, step if step is not None else index(1), list(iter_args))
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(list(body(loop.induction_variable, list(loop.inner_iter_args))))
    return list(loop.results)


def loop_nest(ubs: Sequence[ir.Value], iter_args: Sequence[ir.Value],
              body: Callable[[List[ir.Value], List[ir.Value]], Sequence[ir.Value]]) -> List[ir.Value]:
    """Nested scf.for 0..ub for each of ``ubs`` (outermost first);
    ``body(ivs, args)`` builds the innermost body. No loops for ``ubs == []``."""

    def build(level: int, ivs: List[ir.Value], args: List[ir.Value]):
        if level == len(ubs):
            return list(body(ivs, args))
        return for_loop(index(0), ubs[level], args,
                        lambda iv, a: build(level + 1, ivs + [iv], a))

    return build(0, [], list(iter_args))


def if_else(cond: ir.Value, types: Sequence[ir.Type],
            then_fn: Callable[[], Sequence[ir.Value]],
            else_fn: Callable[[], Sequence[ir.Value]]) -> List[ir.Value]:
    op = scf.IfOp(cond, list(types), has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(list(then_fn()))
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(list(else_fn()))
    return list(op.results)


def inline_region(region: ir.Region, args: Sequence[ir.Value]) -> List[ir.Value]:
    """Clones the single block of ``region`` (block arguments replaced by
    ``args``) at the insertion point; returns the values its terminator
    yields."""
    block = region.blocks[0]
    if len(block.arguments) != len(args):
        raise ValueError(f"region has {len(block.arguments)} arguments, got {len(args)} values")
    mapping = dict(zip(block.arguments, args))
    ops = list(block.operations)
    for op in ops[:-1]:
        new = owner_op(op.clone())
        for old, repl in mapping.items():
            new.replace_uses_of_with(old, repl)
        mapping.update(zip(owner_op(op).results, new.results))
    return [mapping.get(v, v) for v in owner_op(ops[-1]).operands]
