"""Handler for ``torch.ops.higher_order.flex_attention`` nodes.

See docs/importer.md for the IR contract.  Without runtime captured tensors a
call becomes the upstream ``torch.hop_flex_attention`` op (6 operands); with
runtime captures or kept BlockMask tensors (block_mask.py) it becomes
``torch.operator "torch_mlir_flex.hop_flex_attention"`` whose operands are the
same 6 followed by the score buffers, the mask buffers and the block tensors,
with ``num_score_buffers`` / ``num_mask_buffers`` / ``num_block_tensors`` i64
attributes and, with block tensors, ``q_block_size`` / ``kv_block_size``.
"""

from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import torch
from torch import fx

from torch_mlir.ir import (
    BoolAttr,
    FlatSymbolRefAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Location,
    Operation,
    StringAttr,
)
from torch_mlir.extras.fx_importer import _make_constant_op

from .block_mask import (
    BLOCK_MASK_TUPLE_LEN,
    KV_BLOCK_SIZE_SLOT,
    KV_BLOCK_SLOTS,
    Q_BLOCK_SIZE_SLOT,
    _block_mask_arg,
    keeps_block_tensors,
)
from .errors import FlexImportError, node_where
from .hop_layout import layout_of
from .modifiers import MASK, SCORE, Capture, Runtime, is_noop_mask

UPSTREAM_OP = "torch.hop_flex_attention"
CAPTURE_OP = "torch_mlir_flex.hop_flex_attention"

# Resolves a captured-tensor argument to a constant tensor, or None if it is a
# runtime value.  Installed by FlexFxImporter per entry point.
ConstantResolver = Callable[[fx.Node], Optional[torch.Tensor]]


@dataclass
class FlexCall:
    query: Any
    key: Any
    value: Any
    score_mod: fx.Node
    mask_mod: Optional[fx.Node]
    scale: Any
    kernel_options: dict
    score_bufs: tuple
    mask_bufs: tuple
    # Kept BlockMask tensors: (kv_num_blocks, kv_indices[, full_kv_num_blocks,
    # full_kv_indices]) and (Q_BLOCK_SIZE, KV_BLOCK_SIZE); () / None if dropped.
    block_tensors: tuple = ()
    block_sizes: Optional[tuple] = None


def parse_flex_node(node: fx.Node) -> FlexCall:
    """Validates the torch 2.13 HOP layout (flex_attention or
    flex_attention_backward, hop_layout.py) and returns its pieces."""
    where = node_where(node)
    lay = layout_of(node)
    if node.kwargs:
        raise FlexImportError(
            f"flex_attention {where}: unexpected keyword arguments "
            f"{sorted(node.kwargs)}; expected {lay.num_args} positional HOP arguments "
            "(torch 2.13 layout)."
        )
    if len(node.args) != lay.num_args:
        raise FlexImportError(
            f"flex_attention {where}: HOP has {len(node.args)} arguments, expected "
            f"{lay.num_args} ({node.target}). "
            f"This importer targets torch 2.13, running torch {torch.__version__}."
        )
    a = node.args
    q, k, v = a[:3]
    score_mod, scale, kopts = a[lay.score_mod], a[lay.scale], a[lay.kernel_options]
    sbufs, mbufs = a[lay.score_bufs], a[lay.mask_bufs]
    if not (isinstance(score_mod, fx.Node) and score_mod.op == "get_attr"):
        raise FlexImportError(
            f"flex_attention {where}: score_mod must be a get_attr submodule, got "
            f"{score_mod!r}."
        )
    bm = _block_mask_arg(node)
    mask_mod = bm[BLOCK_MASK_TUPLE_LEN - 1]
    if mask_mod is not None and not (
        isinstance(mask_mod, fx.Node) and mask_mod.op == "get_attr"
    ):
        raise FlexImportError(
            f"flex_attention {where}: BlockMask mask_mod must be a get_attr "
            f"submodule, got {mask_mod!r}."
        )
    if not (scale is None or isinstance(scale, (int, float, fx.Node))):
        raise FlexImportError(
            f"flex_attention {where}: scale must be a float or None, got {scale!r}."
        )
    if not isinstance(kopts, dict):
        raise FlexImportError(
            f"flex_attention {where}: kernel_options must be a dict, got {kopts!r}."
        )
    for nm, bufs in (("score_mod_other_buffers", sbufs), ("mask_mod_other_buffers", mbufs)):
        if not isinstance(bufs, (tuple, list)):
            raise FlexImportError(
                f"flex_attention {where}: {nm} must be a tuple, got {bufs!r}."
            )
    blocks, sizes = _kept_block_tensors(node, bm)
    return FlexCall(q, k, v, score_mod, mask_mod, scale, dict(kopts), tuple(sbufs), tuple(mbufs),
                    blocks, sizes)


def _kept_block_tensors(node: fx.Node, bm):
    """The kept forward block tensors of ``node`` and the block sizes."""
    if not keeps_block_tensors(node):
        return (), None
    where = node_where(node)
    kvn, kvi, fkvn, fkvi = (bm[i] for i in KV_BLOCK_SLOTS)
    if kvn is None or kvi is None or (fkvn is None) != (fkvi is None):
        raise FlexImportError(
            f"flex_attention {where}: BlockMask needs kv_num_blocks and kv_indices, and "
            "full_kv_num_blocks / full_kv_indices both or neither.")
    sizes = (bm[Q_BLOCK_SIZE_SLOT], bm[KV_BLOCK_SIZE_SLOT])
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in sizes):
        raise FlexImportError(
            f"flex_attention {where}: BlockMask block sizes must be positive python ints, "
            f"got {sizes!r} (symbolic block sizes are not supported).")
    blocks = (kvn, kvi) if fkvn is None else (kvn, kvi, fkvn, fkvi)
    return blocks, sizes


def classify_captures(
    bufs: tuple, kind: str, node: fx.Node, resolve_constant: ConstantResolver
) -> List[Capture]:
    out: List[Capture] = []
    for i, b in enumerate(bufs):
        if isinstance(b, torch.Tensor):
            out.append(b)
            continue
        if not isinstance(b, fx.Node):
            raise FlexImportError(
                f"flex_attention {node_where(node)}: {kind}_mod captured value #{i} "
                f"is {type(b).__name__} ({b!r}); only tensors can be captured. "
                "Turn python scalars into constants or tensors."
            )
        const = resolve_constant(b)
        if const is not None:
            out.append(const)
            continue
        val = b.meta.get("val", b.meta.get("example_value"))
        if not isinstance(val, torch.Tensor):
            raise FlexImportError(
                f"flex_attention {node_where(node)}: {kind}_mod captured value #{i} "
                f"('{b.name}') is {type(val).__name__}, not a tensor; captured "
                "SymInts/scalars are not supported. Capture a tensor instead."
            )
        out.append(Runtime(b))
    return out


def check_qkv_dtypes(call: FlexCall, node: fx.Node):
    """q, k and v must be floating point; checked before the modifiers so that
    an integer input is not reported as a (default) score_mod returning int."""
    for what, arg in (("query", call.query), ("key", call.key), ("value", call.value)):
        val = arg.meta.get("val") if isinstance(arg, fx.Node) else arg
        if isinstance(val, torch.Tensor) and not val.dtype.is_floating_point:
            raise FlexImportError(
                f"flex_attention {what} has dtype {val.dtype}, which is unsupported; "
                "q, k and v must be floating point (float32, float16 or bfloat16) "
                f"(flex_attention {node_where(node)}).")


def _head_count(arg, node, what):
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else arg
    if not isinstance(val, torch.Tensor) or val.dim() != 4:
        raise FlexImportError(
            f"flex_attention {node_where(node)}: {what} must be a 4-d tensor "
            f"[B, H, S, D], got {val!r}."
        )
    return val.shape[1]


@dataclass
class FlexOperands:
    """What the forward and backward imports share: the modifier symbols,
    the captures, the scale operand and the trailing runtime operands."""

    call: FlexCall
    score_sym: str
    score_caps: List[Capture]
    mask_sym: Optional[str]
    mask_caps: List[Capture]
    scale: Any  # an ir.Value
    runtime_score: List[fx.Node]
    runtime_mask: List[fx.Node]


def submodule(node: fx.Node, get_attr: fx.Node) -> fx.GraphModule:
    root = node.graph.owning_module
    if root is None:
        raise FlexImportError(
            f"flex_attention {node_where(node)}: the graph has no owning "
            "GraphModule, so score_mod/mask_mod submodules cannot be found. "
            "Import the GraphModule (import_graph_module / import_stateless_graph "
            "on gm.graph) rather than a detached Graph."
        )
    gm = getattr(root, get_attr.target, None)
    if not isinstance(gm, fx.GraphModule):
        raise FlexImportError(
            f"flex_attention {node_where(node)}: '{get_attr.target}' is not a "
            f"GraphModule attribute of the owning module ({type(gm).__name__})."
        )
    return gm


def import_flex_operands(gni, loc: Location, node: fx.Node) -> FlexOperands:
    """Parses `node`, imports its modifiers and its scale."""
    imp = gni.fx_importer
    cc = gni._cc
    call = parse_flex_node(node)
    check_qkv_dtypes(call, node)
    resolve = imp.flex_constant_resolver()

    score_gm = submodule(node, call.score_mod)
    score_caps = classify_captures(call.score_bufs, SCORE, node, resolve)
    score_sym = imp.flex_modifiers.symbol_for(
        score_gm, call.score_mod.target, SCORE, score_caps, node
    )
    mask_sym, mask_caps = None, []
    if call.mask_mod is not None:
        mask_gm = submodule(node, call.mask_mod)
        if not is_noop_mask(mask_gm):
            mask_caps = classify_captures(call.mask_bufs, MASK, node, resolve)
            mask_sym = imp.flex_modifiers.symbol_for(
                mask_gm, call.mask_mod.target, MASK, mask_caps, node
            )
    with loc:
        if call.scale is None:
            scale = Operation.create("torch.constant.none", results=[cc.torch_none_type]).result
        elif isinstance(call.scale, fx.Node):
            scale = gni._import_argument(loc, call.scale, None)
        else:
            scale = _make_constant_op(
                "torch.constant.float",
                FloatAttr.get_f64(float(call.scale)),
                cc.torch_float_type,
            ).result
    return FlexOperands(call, score_sym, score_caps, mask_sym, mask_caps, scale,
                        [c.node for c in score_caps if isinstance(c, Runtime)],
                        [c.node for c in mask_caps if isinstance(c, Runtime)])


def modifier_attrs(gni, node: fx.Node, ops: FlexOperands) -> dict:
    """score_mod_fn / mask_mod_fn and, for GQA, enable_gqa."""
    attrs = {"score_mod_fn": FlatSymbolRefAttr.get(ops.score_sym, context=gni._c)}
    if ops.mask_sym is not None:
        attrs["mask_mod_fn"] = FlatSymbolRefAttr.get(ops.mask_sym, context=gni._c)
    hq = _head_count(ops.call.query, node, "query")
    hkv = _head_count(ops.call.key, node, "key")
    if str(hq) != str(hkv):
        attrs["enable_gqa"] = BoolAttr.get(True, context=gni._c)
    return attrs


def buffer_operands(gni, loc: Location, ops: FlexOperands, attrs: dict) -> list:
    """The runtime score buffers, mask buffers and kept block tensors, as
    operands; their counts (and the block sizes) go into `attrs`."""
    call = ops.call
    runtime = ops.runtime_score + ops.runtime_mask
    operands = [gni._import_argument(loc, r, None) for r in runtime]
    operands += [gni._import_argument(loc, t, None) for t in call.block_tensors]
    i64 = IntegerType.get_signless(64, context=gni._c)
    attrs["num_score_buffers"] = IntegerAttr.get(i64, len(ops.runtime_score))
    attrs["num_mask_buffers"] = IntegerAttr.get(i64, len(ops.runtime_mask))
    if call.block_tensors:
        attrs["num_block_tensors"] = IntegerAttr.get(i64, len(call.block_tensors))
        attrs["q_block_size"] = IntegerAttr.get(i64, call.block_sizes[0])
        attrs["kv_block_size"] = IntegerAttr.get(i64, call.block_sizes[1])
    return operands


def import_flex_attention(gni, loc: Location, node: fx.Node):
    """Emits the flex call for ``node`` into the GraphNodeImporter ``gni``."""
    cc = gni._cc
    ops = import_flex_operands(gni, loc, node)
    call = ops.call
    q = gni._import_argument(loc, call.query, None)
    k = gni._import_argument(loc, call.key, None)
    v = gni._import_argument(loc, call.value, None)
    with loc:
        flags = []
        for opt in ("OUTPUT_LOGSUMEXP", "OUTPUT_MAX"):
            flags.append(
                _make_constant_op(
                    "torch.constant.bool",
                    cc.integer_attr(bool(call.kernel_options.get(opt, False)), 1),
                    cc.torch_bool_type,
                ).result
            )

    vals = node.meta.get("val")
    if not (isinstance(vals, (tuple, list)) and len(vals) == 3):
        raise FlexImportError(
            f"flex_attention {node_where(node)}: expected 3 results (out, lse, "
            f"max_scores) in node metadata, got {vals!r} (torch version mismatch?)."
        )
    result_types = [cc.value_info_to_type(x) for x in vals]

    attrs = modifier_attrs(gni, node, ops)
    operands = [q, k, v, ops.scale] + flags
    if ops.runtime_score or ops.runtime_mask or call.block_tensors:
        operands += buffer_operands(gni, loc, ops, attrs)
        attrs["name"] = StringAttr.get(CAPTURE_OP, context=gni._c)
        op_name = "torch.operator"
    else:
        op_name = UPSTREAM_OP
    with loc:
        op = Operation.create(op_name, results=result_types, operands=operands, attributes=attrs)
    gni._multi_result_nodes.add(node)
    for i, r in enumerate(op.results):
        gni.bind_node_value(node, r, i)
