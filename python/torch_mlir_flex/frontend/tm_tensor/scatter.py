"""tm_tensor.scatter (scatter, scatter_add, scatter_reduce, index_put,
index_add, bincount) -> scf.for loops on tensors.

    %r = tm_tensor.scatter {dimension_map = array<i64: m0, ...>}
        unique_indices(u) ins(%updates, %indices) outs(%original)
        { ^bb0(%update, %current): ... yield %new }

As TMTensor defines it: for every position ``(i, s...)`` of ``updates``,
the slice position ``s`` fills the trailing dimensions of ``original``;
then each ``indices[i, t]`` is added at dimension ``dimension_map[t]``;
``original[pos] = region(updates[i, s...], original[pos])``. Updates apply
in order of ``i`` (so with repeated indices the last write wins, and
accumulations are sequential like torch's CPU kernels).

Indices are checked: ``cf.assert`` that each position is inside
``original`` (torch raises IndexError there); the JIT reports a failed
check after the call, so an update whose position is outside writes
nothing (it rewrites element 0 with its own value; updates before it are
applied, as in eager). For ``aten.index_put`` (the
origin of index_put/index_add/setitem lowerings) negative indices count
from the end first, as in Python.
"""

from torch_mlir import ir
from torch_mlir.dialects import arith, cf

from . import builder as B
from .op import TmOp

_WRAPS_NEGATIVE = ("aten.index_put", "aten._index_put_impl", "aten.index_add")


def _index(op: TmOp, raw: ir.Value, size: ir.Value) -> ir.Value:
    idx = arith.IndexCastOp(ir.IndexType.get(), raw).result
    if op.origin.startswith(_WRAPS_NEGATIVE):
        idx = B.select(B.cmpi("slt", idx, B.index(0)), B.addi(idx, size), idx)
    return idx


def _check(op: TmOp, pos: ir.Value, size: ir.Value, d: int) -> ir.Value:
    ok = arith.AndIOp(B.cmpi("sge", pos, B.index(0)), B.cmpi("slt", pos, size)).result
    cf.AssertOp(ok, f"index out of range in {op.origin} (dimension {d})")
    return ok


# Ops that only retype a value (the frontend runs before they fold away).
_RETYPES = ("torch_c.to_builtin_tensor", "torch_c.from_builtin_tensor", "tensor.cast")
# Views of their first operand: one-shot bufferization makes each a view of
# the same buffer (subview, expand_shape, collapse_shape). A KV cache written
# through `cache.view(...)[rows].index_copy_(...)` or `cache.view(...)[idx] =`
# scatters into such a view of the input.
_VIEWS = ("tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape")
# scf.for's operands before its iteration arguments (lower bound, upper, step).
_FOR_BOUNDS = 3


def _is_function_argument(v: ir.Value) -> bool:
    """`v` is an argument of the function or a view of one (through
    retyping casts, slices and reshapes), or the result of loops that
    started from one (an earlier scatter into the same cache: K, then V
    written through one view)."""
    owner = v.owner
    while not isinstance(owner, ir.Block):
        op = getattr(owner, "operation", owner)
        if op.name in _RETYPES or op.name in _VIEWS:
            v = op.operands[0]
        elif op.name == "scf.for":
            v = op.operands[_FOR_BOUNDS + ir.OpResult(v).result_number]
        else:
            return False
        owner = v.owner
    parent = owner.owner
    return getattr(parent, "name", None) == "func.func" or getattr(
        getattr(parent, "operation", None), "name", None) == "func.func"


def lower_scatter(op: TmOp):
    updates, indices = op.ins
    (original,) = op.outs
    dim_map = op.i64_array_attr("dimension_map")
    upd_rank = ir.RankedTensorType(updates.type).rank
    orig_rank = ir.RankedTensorType(original.type).rank
    depth = ir.RankedTensorType(indices.type).get_dim_size(1)
    if depth != len(dim_map) or any(not 0 <= m < orig_rank for m in dim_map):
        raise op.error(f"has dimension_map {dim_map} for index depth {depth} "
                       f"and rank {orig_rank}")
    offset = orig_rank - (upd_rank - 1)
    if offset < 0 or set(range(offset)) - set(dim_map):
        raise op.error(f"updates of rank {upd_rank} with dimension_map {dim_map} "
                       f"do not address every dimension of rank {orig_rank}")

    def body(ivs, args):
        (orig,) = args
        pos = [None] * orig_rank
        for k, iv in enumerate(ivs[1:]):
            pos[offset + k] = iv
        sizes = {m: B.dim(original, m) for m in dim_map}
        for t, m in enumerate(dim_map):
            idx = _index(op, B.extract(indices, [ivs[0], B.index(t)]), sizes[m])
            pos[m] = idx if pos[m] is None else B.addi(pos[m], idx)
        ok = None
        for m, size in sizes.items():
            ok_m = _check(op, pos[m], size, m)
            ok = ok_m if ok is None else arith.AndIOp(ok, ok_m).result
        if ok is not None:
            # A failed check reports the error after the call (the JIT's
            # status): until then no write may leave the tensor. Such an
            # update rewrites element 0 with its own value.
            for m in sizes:
                pos[m] = B.select(ok, pos[m], B.index(0))
        current = B.extract(orig, pos)
        new = B.inline_region(op.region, [B.extract(updates, ivs), current])[0]
        if ok is not None:
            new = B.select(ok, new, current)
        return [B.insert(new, orig, pos)]

    ubs = [B.dim(updates, i) for i in range(upd_rank)]
    # A function argument (or a view of one: a slice, a reshape) is updated
    # itself: a KV cache the program writes
    # with index_copy_ / index_put is updated where it stands when the
    # caller lets the function write that input (calling.py's in_place);
    # one-shot bufferization copies it first when it may not (any other
    # input) or when its old value is read later. Any other destination gets
    # a private copy: without it, the static-cache decode graph of a
    # transformers model gave wrong tokens (an in-place update of a
    # temporary that one-shot bufferization let through; not isolated yet).
    dest = original if _is_function_argument(original) else B.private_copy(original)
    return B.loop_nest(ubs, [dest], body)
