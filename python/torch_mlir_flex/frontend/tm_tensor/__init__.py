"""Lowers the TMTensor ops that torch-mlir's conversion leaves (scan, sort,
scatter) to scf.for loops on tensors, on the wheel side, before the
textual hand-off (see ../README.md, "tm_tensor ops").

``lower_tm_tensor_ops(module, origin_of)`` rewrites every ``tm_tensor``
op in place; ``origin_of(op)`` names the aten op it came from (for
messages and the index rules of index_put). Ops without a lowering
(``tm_tensor.attention``, ``tm_tensor.topk``) raise FlexFrontendError.
"""

from typing import Callable, Dict, Optional

from torch_mlir import ir

from .op import TmOp
from .scan import lower_scan
from .scatter import lower_scatter
from .sort import lower_sort

_LOWERINGS = {
    "tm_tensor.scan": lower_scan,
    "tm_tensor.sort": lower_sort,
    "tm_tensor.scatter": lower_scatter,
}


def _collect(module):
    found = []

    def visit(op):
        if op.name.startswith("tm_tensor."):
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _enclosing_func(op) -> str:
    p = op.parent
    while p is not None and p.name != "func.func":
        p = p.parent
    return ir.StringAttr(p.attributes["sym_name"]).value if p is not None else ""


def lower_tm_tensor_ops(module: ir.Module, origin_of: Callable[[object], str],
                        modifiers: Optional[Dict[str, str]] = None) -> int:
    """Rewrites the module's tm_tensor ops in place; returns how many.
    `modifiers` maps score_mod/mask_mod function names to their kind: a
    tm_tensor op there is refused (a modifier runs per score element, and
    flex-materialize cannot scalarize these loops)."""
    ops = [TmOp(op, origin_of(op)) for op in _collect(module)]
    for t in ops:
        fn = _enclosing_func(t.op)
        if modifiers and fn in modifiers:
            raise t.error(
                f"in {modifiers[fn]} @{fn} works on a whole tensor, which a modifier cannot "
                "do (it runs once per score element); compute it outside flex_attention "
                "and capture the result")
        if t.name not in _LOWERINGS:
            raise t.error("has no lowering in torch-mlir-flex's linalg backend")
    with module.context:
        for t in ops:
            with ir.InsertionPoint(t.op), t.location:
                results = _LOWERINGS[t.name](t)
            for old, new in zip(t.op.results, results):
                old.replace_all_uses_with(new)
            t.op.erase()
    return len(ops)
