"""Outlines flex-attention calls in Torch IR into calls to private decls.

Each ``torch.hop_flex_attention`` (upstream form) or
``torch.operator "torch_mlir_flex.hop_flex_attention"`` (our importer's form,
carrying captured buffers) becomes

    %out, %lse, %max = func.call @__flex_attention_N(%q, %k, %v, %bufs...)

to a private ``func.func`` declaration whose discardable ``flex.*`` attributes
carry everything else (see README.md).  The modifier functions stay in the
module; the decl's symbol-ref attributes keep them alive.
"""

import math
import re
from dataclasses import dataclass
from typing import List, Optional

from torch_mlir import ir
from torch_mlir.dialects import func

from .errors import FlexFrontendError

UPSTREAM_OP = "torch.hop_flex_attention"
FLEX_OPERATOR = "torch_mlir_flex.hop_flex_attention"
DECL_PREFIX = "__flex_attention_"

_VTENSOR_RE = re.compile(r"^!torch\.vtensor<\[([^\]]*)\],(.+)>$")


@dataclass
class FlexCallInfo:
    """What was outlined (returned for testing and diagnostics)."""

    decl_name: str
    score_mod: Optional[str]
    mask_mod: Optional[str]
    scale: float
    enable_gqa: bool
    return_lse: bool
    return_max_scores: bool
    num_score_buffers: int
    num_mask_buffers: int
    num_block_tensors: int = 0
    block_sizes: Optional[tuple] = None  # (Q_BLOCK_SIZE, KV_BLOCK_SIZE)


def _shape(t: ir.Type) -> List[Optional[int]]:
    m = _VTENSOR_RE.match(str(t))
    if not m:
        raise FlexFrontendError(f"flex attention operand must be a ranked !torch.vtensor, got {t}")
    dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
    return [None if d == "?" else int(d) for d in dims]


def _owner_op(v: ir.Value):
    owner = v.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _const(v: ir.Value, what: str):
    """Value of a torch.constant.{none,bool,int,float} feeding a flex call."""
    op = _owner_op(v)
    name = getattr(op, "name", None)
    if name == "torch.constant.none":
        return None
    if name in ("torch.constant.float", "torch.constant.int", "torch.constant.bool"):
        a = op.attributes["value"]
        if isinstance(a, ir.BoolAttr):
            return bool(ir.BoolAttr(a).value)
        if isinstance(a, ir.FloatAttr):
            return ir.FloatAttr(a).value
        iv = ir.IntegerAttr(a).value
        return bool(iv) if name == "torch.constant.bool" else iv
    raise FlexFrontendError(
        f"flex attention '{what}' must be a torch constant, got {v}")


def _is_flex_call(op) -> bool:
    if op.name == UPSTREAM_OP:
        return True
    if op.name == "torch.operator":
        n = ir.StringAttr(op.attributes["name"]).value
        return n in (FLEX_OPERATOR, "torch_mlir_flex.hop_flex_attention_backward")
    return False


def find_ops(module: ir.Module, matches) -> list:
    """The ops of ``module`` (nested ones included, in walk order) for which
    ``matches(op)`` is true."""
    found = []

    def visit(op):
        if matches(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def find_flex_calls(module: ir.Module):
    return find_ops(module, _is_flex_call)


def _opt_attr(op, name):
    return op.attributes[name] if name in op.attributes else None


def _int_attr(op, name, default=0) -> int:
    a = _opt_attr(op, name)
    return default if a is None else ir.IntegerAttr(a).value


def _truthy_attr(a) -> bool:
    if a is None:
        return False
    if isinstance(a, ir.BoolAttr):
        return bool(ir.BoolAttr(a).value)
    if isinstance(a, ir.IntegerAttr):
        return bool(ir.IntegerAttr(a).value)
    return True  # UnitAttr


def _symbol_names(module: ir.Module):
    names = set()
    for op in module.body.operations:
        if "sym_name" in op.attributes:
            names.add(ir.StringAttr(op.attributes["sym_name"]).value)
    return names


def _result_types(op) -> List[ir.Type]:
    types = [r.type for r in op.results]
    if len(types) == 3:
        return types
    if len(types) != 1:
        raise FlexFrontendError(f"flex attention must have 1 or 3 results, got {len(types)}")
    b, h, m = ["?" if d is None else str(d) for d in _shape(types[0])[:3]]
    aux = ir.Type.parse(f"!torch.vtensor<[{b},{h},{m}],f32>")
    return [types[0], aux, aux]


def _outline_one(module, op, decl_name) -> FlexCallInfo:
    operands = list(op.operands)
    if len(operands) < 6:
        raise FlexFrontendError(f"flex attention call has {len(operands)} operands, expected >= 6")
    q, k, v = operands[:3]
    scale = _const(operands[3], "scale")
    return_lse = bool(_const(operands[4], "return_lse"))
    return_max = bool(_const(operands[5], "return_max_scores"))
    bufs = operands[6:]
    n_block, block_sizes = _block_tensor_attrs(op)
    n_score = _int_attr(op, "num_score_buffers", 0)
    n_mask = _int_attr(op, "num_mask_buffers", len(bufs) - n_score - n_block)
    if n_score + n_mask + n_block != len(bufs) or n_score < 0 or n_mask < 0:
        raise FlexFrontendError(
            f"flex attention has {len(bufs)} buffer operands but "
            f"num_score_buffers={n_score}, num_mask_buffers={n_mask}, "
            f"num_block_tensors={n_block}")

    q_shape, k_shape = _shape(q.type), _shape(k.type)
    if len(q_shape) != 4 or len(k_shape) != 4:
        raise FlexFrontendError("flex attention q/k/v must be rank 4 [B, H, S, E]")
    if scale is None:
        if q_shape[3] is None:
            raise FlexFrontendError(
                "flex attention with default scale needs a static head dim E")
        scale = 1.0 / math.sqrt(q_shape[3])
    hq, hkv = q_shape[1], k_shape[1]
    gqa = _truthy_attr(_opt_attr(op, "enable_gqa")) or (
        hq is not None and hkv is not None and hq != hkv)

    score_ref = _opt_attr(op, "score_mod_fn")
    mask_ref = _opt_attr(op, "mask_mod_fn")
    res_types = _result_types(op)
    call_operands = [q, k, v] + bufs

    a = {}
    if score_ref is not None:
        a["flex.score_mod"] = score_ref
    if mask_ref is not None:
        a["flex.mask_mod"] = mask_ref
    a["flex.scale"] = ir.FloatAttr.get_f64(float(scale))
    if gqa:
        a["flex.enable_gqa"] = ir.UnitAttr.get()
    a["flex.return_lse"] = ir.BoolAttr.get(return_lse)
    a["flex.return_max_scores"] = ir.BoolAttr.get(return_max)
    set_buffer_attrs(a, n_score, n_mask, n_block, block_sizes)
    outline_to_decl(module, op, decl_name, call_operands, res_types, a)

    def sym(attr):
        return None if attr is None else ir.FlatSymbolRefAttr(attr).value

    return FlexCallInfo(decl_name, sym(score_ref), sym(mask_ref), float(scale), gqa,
                        return_lse, return_max, n_score, n_mask, n_block, block_sizes)


def set_buffer_attrs(a, n_score: int, n_mask: int, n_block: int, block_sizes) -> None:
    """The decl's buffer counts (and block sizes, with block tensors), set in
    ``a`` (a decl's attributes, or a dict of them)."""
    i64 = ir.IntegerType.get_signless(64)
    a["flex.num_score_buffers"] = ir.IntegerAttr.get(i64, n_score)
    a["flex.num_mask_buffers"] = ir.IntegerAttr.get(i64, n_mask)
    if n_block:
        a["flex.num_block_tensors"] = ir.IntegerAttr.get(i64, n_block)
        a["flex.block_sizes"] = ir.DenseI64ArrayAttr.get(list(block_sizes))


def outline_to_decl(module: ir.Module, op, decl_name: str, call_operands, res_types,
                    attrs: dict) -> None:
    """Declares ``func.func private @decl_name`` at the module's end, typed
    (call_operands' types) -> res_types and carrying ``attrs`` (name ->
    attribute: the discardable ``flex.*`` ones), and replaces ``op`` by a
    call of it."""
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        decl = func.FuncOp(decl_name, ir.FunctionType.get([x.type for x in call_operands], res_types))
        decl.attributes["sym_visibility"] = ir.StringAttr.get("private")
        for name, attr in attrs.items():
            decl.attributes[name] = attr
    replace_with_call(op, decl_name, res_types, call_operands)


def replace_with_call(op, decl_name: str, res_types, call_operands) -> None:
    """Replaces `op` by a call of the declaration `decl_name`."""
    with ir.InsertionPoint(op), op.location:
        call = func.CallOp(res_types, ir.FlatSymbolRefAttr.get(decl_name), call_operands)
    for old, new in zip(op.results, call.results):
        old.replace_all_uses_with(new)
    op.erase()


def _block_tensor_attrs(op):
    """(number of BlockMask tensor operands, (q, kv) block sizes or None)."""
    n_block = _int_attr(op, "num_block_tensors", 0)
    if n_block == 0:
        return 0, None
    sizes = (_int_attr(op, "q_block_size", 0), _int_attr(op, "kv_block_size", 0))
    if n_block not in (2, 4) or min(sizes) <= 0:
        raise FlexFrontendError(
            f"flex attention has num_block_tensors={n_block} and block sizes {sizes}; "
            "expected 2 or 4 block tensors and positive q_block_size / kv_block_size")
    return n_block, sizes


def outline_flex_calls(module: ir.Module) -> List[FlexCallInfo]:
    """Outlines every flex call of ``module`` in place (Torch IR level):
    forward calls (returned), backward calls (outline_backward.py) and
    quantized matmuls (outline_quant.py)."""
    from .outline_backward import BACKWARD_DECL_PREFIX, is_backward_call, outline_backward_one
    from .outline_quant import outline_quant_calls

    taken = _symbol_names(module)
    infos = []

    def fresh(prefix):
        counter = 0
        while f"{prefix}{counter}" in taken:
            counter += 1
        taken.add(f"{prefix}{counter}")
        return f"{prefix}{counter}"

    with module.context:
        for op in find_flex_calls(module):
            if is_backward_call(op):
                outline_backward_one(module, op, fresh(BACKWARD_DECL_PREFIX))
            else:
                infos.append(_outline_one(module, op, fresh(DECL_PREFIX)))
        outline_quant_calls(module, fresh)  # quantized matmuls (outline_quant.py)
    return infos
