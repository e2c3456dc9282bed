"""Import of flex_attention score_mod / mask_mod submodules as private func.func.

A modifier submodule has 5 (score) or 4 (mask) leading scalar placeholders
followed by one placeholder per captured tensor.  Each captured tensor is bound
either to a constant (parameter, buffer, lifted constant, tensor attribute):
materialized as a ``torch.vtensor.literal`` inside the function body, or to a
runtime graph value: becomes a trailing function argument (and an extra operand
of the flex call, in the same order).
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import fx

from torch_mlir.ir import Block, FunctionType, InsertionPoint, Location
from torch_mlir.dialects import func as func_dialect

from .errors import FlexImportError, node_where

SCORE = "score"
MASK = "mask"
JOINT = "joint"  # the backward's joint graph, outputs flattened by joint.py
NUM_LEADING = {SCORE: 5, MASK: 4, JOINT: 6}


@dataclass(frozen=True)
class Runtime:
    """A captured tensor produced at run time by the node ``node``."""

    node: fx.Node


Capture = Union[torch.Tensor, Runtime]


def _val(node: fx.Node):
    return node.meta.get("val", node.meta.get("example_value"))


def _placeholders(gm: fx.GraphModule) -> List[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _output_node(gm: fx.GraphModule, kind: str, where: str) -> fx.Node:
    out = [n for n in gm.graph.nodes if n.op == "output"][0]
    ret = out.args[0]
    if isinstance(ret, (tuple, list)):
        if len(ret) != 1:
            raise FlexImportError(
                f"{kind}_mod of flex_attention {where} returns {len(ret)} values; "
                "it must return exactly one 0-d tensor."
            )
        ret = ret[0]
    if not isinstance(ret, fx.Node) or not isinstance(_val(ret), torch.Tensor):
        raise FlexImportError(
            f"{kind}_mod of flex_attention {where} must return a tensor computed "
            f"from its arguments, got {ret!r}."
        )
    val = _val(ret)
    if val.dim() != 0:
        raise FlexImportError(
            f"{kind}_mod returns a tensor of shape {tuple(val.shape)}; it must "
            "return a 0-d (scalar) tensor per (b, h, q_idx, kv_idx); index "
            f"captured tensors down to a scalar (flex_attention {where})."
        )
    if kind == MASK and val.dtype != torch.bool:
        raise FlexImportError(
            f"mask_mod returns dtype {val.dtype}; it must return a bool scalar "
            f"(flex_attention {where})."
        )
    if kind == SCORE and not val.dtype.is_floating_point:
        raise FlexImportError(
            f"score_mod returns dtype {val.dtype}; it must return a floating-point "
            f"scalar (flex_attention {where})."
        )
    return ret


def _outputs(gm: fx.GraphModule, kind: str, where: str) -> List[fx.Node]:
    """The values the modifier function returns (one, or the joint's list)."""
    if kind != JOINT:
        return [_output_node(gm, kind, where)]
    out = [n for n in gm.graph.nodes if n.op == "output"][0]
    return list(out.args[0])


_FILL_TARGETS = {"new_ones", "ones", "full", "scalar_tensor", "ones_like", "full_like", "new_full"}
# Ops whose tensor arguments only provide metadata (shape/dtype/device).
_META_ONLY = {"new_ones", "ones_like", "full_like", "new_full", "empty_like", "new_empty",
              "empty", "empty_strided", "empty.memory_format"}


def _packet(n: fx.Node) -> str:
    t = n.target
    packet = getattr(getattr(t, "overloadpacket", None), "__name__", None)
    return packet or getattr(t, "__name__", str(t))


def is_noop_mask(gm: fx.GraphModule) -> bool:
    """True if the mask_mod returns a constant True that does not depend on
    (b, h, q_idx, kv_idx) or captures: the mask ``block_mask=None`` produces
    (``new_ones``; ``full_like(empty_strided(..), True)`` after decomposition)."""
    out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    if isinstance(out, (tuple, list)):
        if len(out) != 1:
            return False
        out = out[0]
    if not isinstance(out, fx.Node) or out.op != "call_function":
        return False
    packet = _packet(out)
    if packet not in _FILL_TARGETS:
        return False
    if packet in ("new_ones", "ones", "ones_like"):
        fill = True
    elif packet in ("full", "full_like", "new_full") and len(out.args) >= 2:
        fill = out.args[1]
    elif packet == "scalar_tensor" and out.args:
        fill = out.args[0]
    else:
        return False
    if isinstance(fill, fx.Node) or not bool(fill):
        return False
    # Every data dependency must be placeholder-free (metadata uses allowed).
    work = [out]
    seen = set()
    while work:
        n = work.pop()
        if n in seen:
            continue
        seen.add(n)
        for a in n.all_input_nodes:
            if a.op == "placeholder":
                if _packet(n) not in _META_ONLY:
                    return False
            elif a.op == "call_function":
                work.append(a)
            else:
                return False
    return True


def _binding_key(c: Capture, ph: fx.Node) -> Tuple:
    if isinstance(c, Runtime):
        v = _val(c.node)
        return ("r", str(v.dtype), tuple(str(s) for s in v.shape))
    return ("c", id(c))


class ModifierCache:
    """Creates and uniques modifier functions for one FxImporter module."""

    def __init__(self, fx_importer):
        self._imp = fx_importer
        self._by_key: Dict[Tuple, str] = {}

    def symbol_for(
        self,
        gm: fx.GraphModule,
        attr_name: str,
        kind: str,
        captures: Sequence[Capture],
        flex_node: fx.Node,
    ) -> str:
        phs = _placeholders(gm)
        lead = NUM_LEADING[kind]
        where = node_where(flex_node)
        if len(phs) != lead + len(captures):
            raise FlexImportError(
                f"{kind}_mod '{attr_name}' of flex_attention {where} takes "
                f"{len(phs)} arguments but the HOP passes {lead} indices/score plus "
                f"{len(captures)} captured tensors; unexpected HOP layout "
                "(torch version mismatch?)."
            )
        for ph in phs[:lead]:
            v = _val(ph)
            if not isinstance(v, torch.Tensor) or v.dim() != 0:
                raise FlexImportError(
                    f"{kind}_mod '{attr_name}' of flex_attention {where}: argument "
                    f"'{ph.name}' is {v!r}, expected a 0-d tensor (score/b/h/q_idx/kv_idx)."
                )
        _outputs(gm, kind, where)  # validates the result early
        key = (
            gm.code,
            kind,
            tuple(_binding_key(c, ph) for c, ph in zip(captures, phs[lead:])),
        )
        if key in self._by_key:
            return self._by_key[key]
        name = self._unique_name(attr_name)
        self._emit(gm, name, kind, captures, where)
        self._by_key[key] = name
        return name

    def _unique_name(self, base: str) -> str:
        table = self._imp.symbol_table
        taken = set(self._by_key.values())
        name, i = base, 0
        while name in taken or name in table:
            i += 1
            name = f"{base}_{i}"
        return name

    def _emit(self, gm, name: str, kind: str, captures, where: str):
        imp = self._imp
        cc = imp._cc
        phs = _placeholders(gm)
        lead = NUM_LEADING[kind]
        arg_phs = phs[:lead] + [
            ph for ph, c in zip(phs[lead:], captures) if isinstance(c, Runtime)
        ]
        outs = _outputs(gm, kind, where)
        with imp._c:
            in_types = [cc.node_val_to_type(ph) for ph in arg_phs]
            ftype = FunctionType.get(in_types, [cc.node_val_to_type(o) for o in outs])
            loc = cc.get_node_location(outs[0]) or Location.unknown()
            with loc:
                fn = func_dialect.FuncOp(name, ftype, ip=imp._m_ip, visibility="private")
                block = Block.create_at_start(fn.body, ftype.inputs)
        gni = imp._graph_node_importer_cls(imp, imp._c, cc, block)
        for ph, arg in zip(arg_phs, block.arguments):
            gni.bind_node_value(ph, arg)
        for ph, c in zip(phs[lead:], captures):
            if not isinstance(c, Runtime):
                gni.import_constant(loc, ph, c)
        body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
        gni.import_nodes(body, skip_placeholders_outputs=True)
        gni.return_node_values(loc, outs, {})
        imp.symbol_table.insert(fn)
        imp._graph_module_to_func_name.setdefault(id(gm), name)
