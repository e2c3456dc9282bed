"""Post-import check of the flex IR contract (docs/importer.md).

``verify_flex_calls(module)`` walks every flex call (``torch.hop_flex_attention``
and ``torch.operator "torch_mlir_flex.hop_flex_attention"``) and checks that:
* the referenced modifier functions exist as ``func.func`` in the module;
* score_mod takes 5 + num_score_buffers args, mask_mod 4 + num_mask_buffers;
* their leading args are 0-d vtensors (score float, indices integer) and the
  captured args have exactly the types of the corresponding call operands;
* score_mod returns one 0-d float vtensor, mask_mod one 0-d i1 vtensor;
* operand count = 6 + buffers + block tensors (0, 2 or 4, with positive
  ``q_block_size`` / ``kv_block_size``), results = 3 (out, lse, max_scores).
Raises FlexImportError on the first mismatch.
"""

import re
from typing import List

from torch_mlir import ir

from .errors import FlexImportError
from .flex_hop import CAPTURE_OP, UPSTREAM_OP

_SCALAR = re.compile(r"^!torch\.vtensor<\[\],(?P<dt>[a-z0-9]+)>$")


def _is_flex(op) -> bool:
    if op.name == UPSTREAM_OP:
        return True
    if op.name == "torch.operator" and "name" in op.attributes:
        return ir.StringAttr(op.attributes["name"]).value == CAPTURE_OP
    return False


def _flex_ops(module) -> List[ir.Operation]:
    found = []

    def visit(op):
        op = op.operation
        if _is_flex(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _funcs(module):
    out = {}
    for op in module.body.operations:
        if op.operation.name == "func.func":
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return out


def _int_attr(op, name, where) -> int:
    if name not in op.attributes:
        raise FlexImportError(f"{where}: missing attribute '{name}'")
    return ir.IntegerAttr(op.attributes[name]).value


def _check_modifier(fn_name, funcs, kind, lead, capture_types, where):
    fn = funcs.get(fn_name)
    if fn is None:
        raise FlexImportError(f"{where}: {kind}_mod_fn @{fn_name} is not a func.func in the module")
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    ins = [str(t) for t in ftype.inputs]
    expect = lead + len(capture_types)
    if len(ins) != expect:
        raise FlexImportError(
            f"{where}: @{fn_name} takes {len(ins)} arguments but the call provides "
            f"{lead} + {len(capture_types)} captured buffers = {expect}"
        )
    for i, t in enumerate(ins[:lead]):
        m = _SCALAR.match(t)
        ok = m and (
            (kind == "score" and i == 0 and m["dt"].startswith(("f", "bf")))
            or ((kind == "mask" or i > 0) and m["dt"].startswith(("si", "ui", "i")))
        )
        if not ok:
            raise FlexImportError(f"{where}: @{fn_name} argument {i} has type {t}, expected a 0-d {'float' if kind == 'score' and i == 0 else 'integer'} vtensor")
    for i, (t, want) in enumerate(zip(ins[lead:], capture_types)):
        if t != want:
            raise FlexImportError(
                f"{where}: @{fn_name} captured argument {i} has type {t} but the call passes {want}"
            )
    outs = [str(t) for t in ftype.results]
    m = _SCALAR.match(outs[0]) if len(outs) == 1 else None
    ok = m and (m["dt"] == "i1" if kind == "mask" else m["dt"].startswith(("f", "bf")))
    if not ok:
        raise FlexImportError(
            f"{where}: @{fn_name} returns {outs}, expected one 0-d "
            f"{'i1' if kind == 'mask' else 'float'} vtensor"
        )


def _check_block_attrs(op, where) -> int:
    """Number of block-tensor operands (0, 2 or 4); checks the block sizes."""
    if "num_block_tensors" not in op.attributes:
        return 0
    nb = _int_attr(op, "num_block_tensors", where)
    if nb not in (2, 4):
        raise FlexImportError(f"{where}: num_block_tensors is {nb}, expected 2 or 4")
    for name in ("q_block_size", "kv_block_size"):
        if _int_attr(op, name, where) <= 0:
            raise FlexImportError(f"{where}: {name} must be positive")
    return nb


def verify_flex_calls(module) -> int:
    """Checks every flex call of ``module``; returns the number checked."""
    funcs = _funcs(module)
    ops = _flex_ops(module)
    for idx, op in enumerate(ops):
        where = f"flex call #{idx} ({op.location})"
        operands = [str(v.type) for v in op.operands]
        if op.name == UPSTREAM_OP:
            ns = nm = nb = 0
        else:
            ns = _int_attr(op, "num_score_buffers", where)
            nm = _int_attr(op, "num_mask_buffers", where)
            nb = _check_block_attrs(op, where)
            if ns + nm + nb == 0:
                raise FlexImportError(f"{where}: {CAPTURE_OP} without buffers; use {UPSTREAM_OP}")
        if len(operands) != 6 + ns + nm + nb:
            raise FlexImportError(
                f"{where}: has {len(operands)} operands, expected 6 + {ns} + {nm} + {nb}"
            )
        if len(op.results) != 3:
            raise FlexImportError(f"{where}: has {len(op.results)} results, expected 3")
        if "score_mod_fn" not in op.attributes:
            raise FlexImportError(f"{where}: missing score_mod_fn")
        score = ir.FlatSymbolRefAttr(op.attributes["score_mod_fn"]).value
        _check_modifier(score, funcs, "score", 5, operands[6 : 6 + ns], where)
        if "mask_mod_fn" in op.attributes:
            mask = ir.FlatSymbolRefAttr(op.attributes["mask_mod_fn"]).value
            _check_modifier(mask, funcs, "mask", 4, operands[6 + ns : 6 + ns + nm], where)
        elif nm:
            raise FlexImportError(f"{where}: {nm} mask buffers but no mask_mod_fn")
    return len(ops)
