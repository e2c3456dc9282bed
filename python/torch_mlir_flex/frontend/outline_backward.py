"""Outlines ``torch.operator "torch_mlir_flex.hop_flex_attention_backward"``
(importer/flex_backward_hop.py) into

    %dq, %dk, %dv, %g... = func.call @__flex_backward_N(%q, %k, %v, %out, %lse,
        %grad_out, [%grad_lse,] %score_bufs..., %mask_bufs..., %block_tensors...)

to a private declaration carrying the rest as ``flex.*`` attributes:
``flex.score_mod``, ``flex.mask_mod`` (absent: no mask), ``flex.joint``,
``flex.scale`` (f64), ``flex.enable_gqa`` (unit, GQA only),
``flex.has_grad_lse``, ``flex.num_score_buffers``, ``flex.num_mask_buffers``,
``flex.num_block_tensors`` and ``flex.block_sizes`` (with block tensors),
``flex.grad_captures`` (array<i64>: the runtime score buffers whose
gradients follow dq, dk, dv). flex-materialize rebuilds
``flex.attention_backward`` from it.
"""

import math

from torch_mlir import ir
from torch_mlir.dialects import func

from .errors import FlexFrontendError
from .outline import (_block_tensor_attrs, _const, _int_attr, _opt_attr, _shape, _truthy_attr,
                      replace_with_call, set_buffer_attrs)

BACKWARD_OPERATOR = "torch_mlir_flex.hop_flex_attention_backward"
BACKWARD_DECL_PREFIX = "__flex_backward_"
NUM_TENSOR_OPERANDS = 6  # q, k, v, out, logsumexp, grad_out


def is_backward_call(op) -> bool:
    return op.name == "torch.operator" and \
        ir.StringAttr(op.attributes["name"]).value == BACKWARD_OPERATOR


def outline_backward_one(module, op, decl_name) -> None:
    operands = list(op.operands)
    has_glse = _truthy_attr(_opt_attr(op, "has_grad_lse"))
    n_lead = NUM_TENSOR_OPERANDS + (1 if has_glse else 0)
    if len(operands) < n_lead + 1:
        raise FlexFrontendError(f"flex attention backward has {len(operands)} operands, "
                                f"expected >= {n_lead + 1}")
    tensors = operands[:n_lead]
    scale = _const(operands[n_lead], "scale")
    bufs = operands[n_lead + 1:]
    n_block, block_sizes = _block_tensor_attrs(op)
    n_score = _int_attr(op, "num_score_buffers", 0)
    n_mask = _int_attr(op, "num_mask_buffers", 0)
    if n_score + n_mask + n_block != len(bufs) or n_score < 0 or n_mask < 0:
        raise FlexFrontendError(
            f"flex attention backward has {len(bufs)} buffer operands but num_score_buffers={n_score}, "
            f"num_mask_buffers={n_mask}, num_block_tensors={n_block}")
    q_shape = _shape(tensors[0].type)
    if scale is None:
        if q_shape[3] is None:
            raise FlexFrontendError("flex attention backward with default scale needs a static head dim E")
        scale = 1.0 / math.sqrt(q_shape[3])
    grad_captures = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["grad_captures"])]
    if any(j < 0 or j >= n_score for j in grad_captures):
        raise FlexFrontendError(f"flex attention backward: grad_captures {grad_captures} outside "
                                f"the {n_score} score buffers")
    res_types = [r.type for r in op.results]
    call_operands = tensors + bufs
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        decl = func.FuncOp(decl_name, ir.FunctionType.get([x.type for x in call_operands], res_types))
        decl.attributes["sym_visibility"] = ir.StringAttr.get("private")
        a = decl.attributes
        for key, attr in (("flex.score_mod", "score_mod_fn"), ("flex.mask_mod", "mask_mod_fn"),
                          ("flex.joint", "joint_fn")):
            if attr in op.attributes:
                a[key] = op.attributes[attr]
        a["flex.scale"] = ir.FloatAttr.get_f64(float(scale))
        if _truthy_attr(_opt_attr(op, "enable_gqa")):
            a["flex.enable_gqa"] = ir.UnitAttr.get()
        a["flex.has_grad_lse"] = ir.BoolAttr.get(has_glse)
        set_buffer_attrs(a, n_score, n_mask, n_block, block_sizes)
        a["flex.grad_captures"] = ir.DenseI64ArrayAttr.get(grad_captures)
    replace_with_call(op, decl_name, res_types, call_operands)
