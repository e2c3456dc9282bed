"""Torch IR rewrites that work around torch-mlir 20261001 lowering bugs.

``aten.index.Tensor`` with an si32 index tensor lowers to an ``arith.cmpi``
between i32 and i64 (invalid IR).  Modifier functions receive b/h/q_idx/kv_idx
as si32, so ``bias[h]`` in a score_mod hits this.  We widen such indices to
si64 with ``aten.to.dtype`` first (value-preserving).
"""

import re

from torch_mlir import ir

_INDEX_OPS = ("torch.aten.index.Tensor", "torch.aten.index.Tensor_hacked_twin")
_SI32_RE = re.compile(r"^!torch\.vtensor<(\[[^\]]*\]),si32>$")
_TORCH_INT64 = 4  # torch.int64 ScalarType


def _owner_op(o):
    return o.operation if hasattr(o, "operation") else o


def _owner(v):
    o = v.owner
    return o.operation if hasattr(o, "operation") else o


def _collect(module):
    ops = []

    def visit(op):
        if op.name in _INDEX_OPS:
            ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return ops


def _to_si64(value, shape, loc):
    i64 = ir.IntegerType.get_signless(64)
    mk = ir.Operation.create
    dtype = mk("torch.constant.int", results=[ir.Type.parse("!torch.int")],
               attributes={"value": ir.IntegerAttr.get(i64, _TORCH_INT64)}, loc=loc)
    false = mk("torch.constant.bool", results=[ir.Type.parse("!torch.bool")],
               attributes={"value": ir.BoolAttr.get(False)}, loc=loc)
    none = mk("torch.constant.none", results=[ir.Type.parse("!torch.none")], loc=loc)
    conv = mk("torch.aten.to.dtype",
              results=[ir.Type.parse(f"!torch.vtensor<{shape},si64>")],
              operands=[value, dtype.result, false.result, false.result, none.result],
              loc=loc)
    return conv.result


def widen_int32_index_tensors(module: ir.Module) -> int:
    """Rewrites si32 indices of aten.index.Tensor to si64; returns count."""
    count = 0
    with module.context:
        for op in _collect(module):
            lst = _owner(op.operands[1])
            if getattr(lst, "name", None) != "torch.prim.ListConstruct":
                continue
            if any(_owner_op(u.owner).name not in _INDEX_OPS for u in op.operands[1].uses):
                continue
            for i, idx in enumerate(list(lst.operands)):
                m = _SI32_RE.match(str(idx.type))
                if not m:
                    continue
                with ir.InsertionPoint(lst):
                    lst.operands[i] = _to_si64(idx, m.group(1), lst.location)
                count += 1
    return count
