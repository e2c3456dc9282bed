"""Outlines quantized matmuls in Torch IR into calls to private decls.

Each ``torch.operator "torch.torch_mlir_flex.quant_matmul"`` (the custom op
of importer/quant_op.py, imported opaque) becomes

    %y = func.call @__flex_quant_matmul_N(%x, %w, %scales)

to a private ``func.func`` declaration carrying the op's constant operands as
discardable attributes (README.md, "Quantized matmul"):
``flex.quant.format`` (string), ``flex.quant.group_size`` and
``flex.quant.layout`` (i64). ``flex-materialize-quant-matmul`` rebuilds a
``flex.quant_matmul`` op from it in our MLIR.
"""

from typing import List

from torch_mlir import ir

from .errors import FlexFrontendError
from .outline import _const, _owner_op, _shape, find_ops, outline_to_decl

QUANT_OPERATORS = ("torch.torch_mlir_flex.quant_matmul", "torch_mlir_flex.quant_matmul")
QUANT_DECL_PREFIX = "__flex_quant_matmul_"
FORMATS = ("int8", "int4_cpu")


def is_quant_call(op) -> bool:
    return op.name == "torch.operator" and \
        ir.StringAttr(op.attributes["name"]).value in QUANT_OPERATORS


def find_quant_calls(module: ir.Module) -> list:
    return find_ops(module, is_quant_call)


def _str_const(v: ir.Value, what: str) -> str:
    op = _owner_op(v)
    if getattr(op, "name", None) != "torch.constant.str":
        raise FlexFrontendError(f"quant_matmul '{what}' must be a torch.constant.str, got {v}")
    return ir.StringAttr(op.attributes["value"]).value


def _int_const(v: ir.Value, what: str) -> int:
    value = _const(v, what)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FlexFrontendError(f"quant_matmul '{what}' must be a torch.constant.int, got {v}")
    return value


def _outline_one(module: ir.Module, op, decl_name: str) -> None:
    operands = list(op.operands)
    if len(operands) != 6 or len(op.results) != 1:
        raise FlexFrontendError(
            f"quant_matmul call has {len(operands)} operands and {len(op.results)} results, "
            "expected 6 (x, w, scales, format, group_size, layout) and 1")
    x, w, scales = operands[:3]
    fmt = _str_const(operands[3], "format")
    group_size = _int_const(operands[4], "group_size")
    layout = _int_const(operands[5], "layout")
    if fmt not in FORMATS:
        raise FlexFrontendError(f"quant_matmul format must be one of {FORMATS}, got {fmt!r}")
    ranks = [len(_shape(v.type)) for v in (x, w, scales)]
    if ranks != [2, 2, 1 if fmt == "int8" else 3]:
        raise FlexFrontendError(
            f"quant_matmul ({fmt}) operands x, w, scales have ranks {ranks}, expected "
            f"[2, 2, {1 if fmt == 'int8' else 3}]")
    i64 = ir.IntegerType.get_signless(64)
    outline_to_decl(module, op, decl_name, [x, w, scales], [op.results[0].type], {
        "flex.quant.format": ir.StringAttr.get(fmt),
        "flex.quant.group_size": ir.IntegerAttr.get(i64, group_size),
        "flex.quant.layout": ir.IntegerAttr.get(i64, layout),
    })


def outline_quant_calls(module: ir.Module, fresh) -> List[str]:
    """Outlines every quant_matmul of ``module`` in place (Torch IR level);
    ``fresh(prefix)`` names each decl. Returns the decl names."""
    names = []
    for op in find_quant_calls(module):
        name = fresh(QUANT_DECL_PREFIX)
        _outline_one(module, op, name)
        names.append(name)
    return names
