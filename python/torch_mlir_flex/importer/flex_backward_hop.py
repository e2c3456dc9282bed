"""Handler for ``torch.ops.higher_order.flex_attention_backward`` nodes.

AOTAutograd's backward graph of a flex_attention call holds

    dq, dk, dv, grads = flex_attention_backward(q, k, v, out, lse, grad_out,
        grad_lse, fw_graph, joint_graph, block_mask, scale, kernel_options,
        score_bufs, mask_bufs)

It becomes

    %dq, %dk, %dv, %g... = torch.operator "torch_mlir_flex.hop_flex_attention_backward"(
        %q, %k, %v, %out, %lse, %grad_out, [%grad_lse,] %scale,
        %score_bufs..., %mask_bufs..., %block_tensors...)
        {score_mod_fn = @sdpa_scoreN, mask_mod_fn = @sdpa_maskN, joint_fn = @sdpa_jointN,
         has_grad_lse, grad_captures = [j...], num_score_buffers, num_mask_buffers,
         [num_block_tensors, q_block_size, kv_block_size], [enable_gqa]}

with the operands and modifier functions of the forward's form B
(flex_hop.py); `lse` in log2 units, as the forward HOP returns it. The
results are dq, dk, dv, then the gradient of each runtime score buffer
listed in `grad_captures` (positions among the runtime score buffers):
those the graph uses. The joint function (joint.py) takes (score, b, h,
q_idx, kv_idx, grad, runtime score buffers...) and returns the score's
gradient, then per entry of `grad_captures` a value and its indices.
"""

import operator

import torch
from torch import fx

from torch_mlir.ir import ArrayAttr, BoolAttr, FlatSymbolRefAttr, IntegerAttr, IntegerType, Location, \
    Operation, StringAttr

from .errors import FlexImportError, node_where
from .flex_hop import buffer_operands, import_flex_operands, modifier_attrs, submodule
from .hop_layout import BACKWARD
from .joint import flattened_joint
from .modifiers import JOINT, Runtime

BACKWARD_OP = "torch_mlir_flex.hop_flex_attention_backward"
GRADS_RESULT = 3  # the HOP's 4th result: the tuple of captured-buffer gradients


def used_capture_grads(node: fx.Node):
    """{getitem node of the gradient tuple: {j: getitem node of grad j}}."""
    tuples = {}
    for t in node.users:
        if t.target is operator.getitem and t.args[1] == GRADS_RESULT:
            tuples[t] = {u.args[1]: u for u in t.users if u.target is operator.getitem}
    return tuples


def import_flex_attention_backward(gni, loc: Location, node: fx.Node):
    where = node_where(node)
    cc = gni._cc
    ops = import_flex_operands(gni, loc, node)
    call = ops.call
    tuples = used_capture_grads(node)
    used = sorted({j for items in tuples.values() for j in items})
    runtime_index = {}
    for j, c in enumerate(ops.score_caps):
        if isinstance(c, Runtime):
            runtime_index[j] = len(runtime_index)
    for j in used:
        if j not in runtime_index:
            raise FlexImportError(
                f"flex_attention_backward {where}: the gradient of score_mod's captured tensor #{j} "
                "is used, but that tensor is a constant of the graph")
    joint_ref = node.args[BACKWARD.joint]
    if not (isinstance(joint_ref, fx.Node) and joint_ref.op == "get_attr"):
        raise FlexImportError(f"flex_attention_backward {where}: joint_graph must be a get_attr "
                              f"submodule, got {joint_ref!r}")
    joint_gm = flattened_joint(submodule(node, joint_ref), used, where)
    joint_sym = gni.fx_importer.flex_modifiers.symbol_for(
        joint_gm, joint_ref.target, JOINT, ops.score_caps, node)

    grad_lse = node.args[6]
    operands = [gni._import_argument(loc, a, None) for a in node.args[:6]]
    if grad_lse is not None:
        operands.append(gni._import_argument(loc, grad_lse, None))
    operands.append(ops.scale)
    attrs = modifier_attrs(gni, node, ops)
    operands += buffer_operands(gni, loc, ops, attrs)
    i64 = IntegerType.get_signless(64, context=gni._c)
    attrs["name"] = StringAttr.get(BACKWARD_OP, context=gni._c)
    attrs["joint_fn"] = FlatSymbolRefAttr.get(joint_sym, context=gni._c)
    attrs["has_grad_lse"] = BoolAttr.get(grad_lse is not None, context=gni._c)
    attrs["grad_captures"] = ArrayAttr.get([IntegerAttr.get(i64, runtime_index[j]) for j in used],
                                           context=gni._c)

    vals = node.meta.get("val")
    if not (isinstance(vals, (tuple, list)) and len(vals) == 4):
        raise FlexImportError(f"flex_attention_backward {where}: expected 4 results (dq, dk, dv, "
                              f"captured gradients) in node metadata, got {vals!r}")
    result_types = [cc.value_info_to_type(x) for x in vals[:3]]
    result_types += [cc.value_info_to_type(vals[GRADS_RESULT][j]) for j in used]
    with loc:
        op = Operation.create("torch.operator", results=result_types, operands=operands, attributes=attrs)
    gni._multi_result_nodes.add(node)
    for i in range(3):
        gni.bind_node_value(node, op.results[i], i)
    grads = {j: op.results[3 + k] for k, j in enumerate(used)}
    for t, items in tuples.items():
        gni.flex_grad_tuples[t] = grads
