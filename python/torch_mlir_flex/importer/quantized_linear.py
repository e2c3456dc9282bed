"""FX rewrite: torchao's weight-only quantized linears -> ``quant_matmul``.

Two patterns (torchao 0.18, torch 2.13), each replaced by one call of
``torch.ops.torch_mlir_flex.quant_matmul`` (quant_op.py), so that the weight
stays quantized through the compiler (no float copy of it):

* Int8WeightOnly (``Int8Tensor``)::

      mul(mm(X, to(t(Q), X.dtype)), S)  ->  quant_matmul(X, Q, S, "int8", 0, 0)

  X a 2-D f32/bf16 tensor, Q int8 [N, K], S a [N] vector in X's dtype (the
  subclass's scale after flatten / to / view, which stay). ``to`` is
  ``aten.to.dtype``, ``aten._to_copy`` or ``prims.convert_element_type``; ``t``
  is ``aten.t``, ``aten.transpose`` or ``aten.permute`` of the two dims. The mm
  and its converted weight must have no other use (``_assert_tensor_metadata``
  checks of the removed nodes aside, which go with them).
* Int4 on CPU (``Int4OpaqueTensor``)::

      aten._weight_int4pack_mm_for_cpu(X, Wp, g, SZ)
          ->  quant_matmul(X, Wp, SZ, "int4_cpu", g, layout)

  with ``layout`` the packing of this process (``int4_cpu_layout``); the slice
  and reshape after it stay. torch-mlir does not know the aten op, so an int4
  call that cannot be rewritten (unknown packing, N not a static multiple of
  16) is a FlexImportError here rather than an unknown op later.

Anything else is left as it is (still correct, just dequantized). Works on
torch.export's graphs (weights read through ``access_subclass_inner_tensor``)
and on the post-dispatch graphs of ``run_decompositions`` or AOTAutograd
(inner tensors as plain inputs): only node targets and ``meta["val"]`` are
read.
"""

from typing import List, Optional

import torch
from torch import fx

from .errors import FlexImportError
from .quant_op import INT4_N_MULTIPLE, LAYOUT_NAMES, QuantMatmulError, int4_cpu_layout

aten = torch.ops.aten
prims = torch.ops.prims
QUANT_MATMUL = torch.ops.torch_mlir_flex.quant_matmul.default
ASSERT_METADATA = aten._assert_tensor_metadata.default
INT4_MM = aten._weight_int4pack_mm_for_cpu.default
FLOAT_DTYPES = (torch.float32, torch.bfloat16)


def _val(n) -> Optional[torch.Tensor]:
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _is_call(n, *targets) -> bool:
    return isinstance(n, fx.Node) and n.op == "call_function" and n.target in targets


def _real_users(n: fx.Node) -> List[fx.Node]:
    """Users of ``n`` other than ``_assert_tensor_metadata`` checks."""
    return [u for u in n.users if u.target != ASSERT_METADATA]


def _conversion_source(n: fx.Node, dtype) -> Optional[fx.Node]:
    """X if ``n`` only converts X to ``dtype`` (a copy, same layout), else None."""
    if _is_call(n, aten.to.dtype):
        extra = dict(zip(("non_blocking", "copy", "memory_format"), n.args[2:]), **n.kwargs)
        ok = len(n.args) >= 2 and n.args[1] == dtype and not extra.get("non_blocking") and \
            extra.get("memory_format") in (None, torch.preserve_format)
        return n.args[0] if ok else None
    if _is_call(n, aten._to_copy.default):
        kw = dict(n.kwargs)
        ok = len(n.args) == 1 and kw.pop("dtype", None) == dtype and \
            kw.pop("memory_format", None) in (None, torch.preserve_format) and \
            not kw.pop("non_blocking", False) and \
            all(k in ("layout", "device") for k in kw)
        return n.args[0] if ok else None
    if _is_call(n, prims.convert_element_type.default):
        return n.args[0] if n.args[1] == dtype else None
    return None


def _transpose_source(n: fx.Node) -> Optional[fx.Node]:
    """W if ``n`` is the transpose of the 2-D W, else None."""
    if _is_call(n, aten.t.default):
        return n.args[0]
    if _is_call(n, aten.transpose.int):
        return n.args[0] if {d % 2 for d in n.args[1:3]} == {0, 1} else None
    if _is_call(n, aten.permute.default):
        return n.args[0] if [d % 2 for d in n.args[1]] == [1, 0] else None
    return None


def _match_int8(mm: fx.Node):
    """(mul, x, q, s, removed nodes) for Int8WeightOnly's pattern at ``mm``, or None."""
    x, b = mm.args[0], mm.args[1]
    xv, bv, mv = _val(x), _val(b), _val(mm)
    if xv is None or bv is None or mv is None or xv.dim() != 2 or xv.dtype not in FLOAT_DTYPES:
        return None
    t = _conversion_source(b, xv.dtype)
    q = _transpose_source(t) if isinstance(t, fx.Node) else None
    qv = _val(q)
    if qv is None or qv.dtype != torch.int8 or qv.dim() != 2 or mv.dtype != xv.dtype:
        return None
    if _real_users(b) != [mm] or _real_users(t) != [b]:
        return None
    users = _real_users(mm)
    if len(users) != 1 or not _is_call(users[0], aten.mul.Tensor):
        return None
    mul = users[0]
    if len(mul.args) != 2 or mul.kwargs or mul.args[0] is mul.args[1]:
        return None
    s = mul.args[1] if mul.args[0] is mm else mul.args[0]
    sv, yv = _val(s), _val(mul)
    n = qv.shape[0]
    if sv is None or yv is None or sv.dim() != 1 or sv.shape[0] != n or sv.dtype != xv.dtype \
            or yv.dtype != xv.dtype or tuple(yv.shape) != tuple(mv.shape):
        return None
    return mul, x, q, s, [mul, mm, b, t]


def _int4_layout(node: fx.Node) -> int:
    """This process's int4 packing, checked against the call's N."""
    try:
        layout = int4_cpu_layout()
    except QuantMatmulError as e:
        raise FlexImportError(f"{node.name} (aten._weight_int4pack_mm_for_cpu): {e}") from e
    n = _val(node).shape[1]
    if not isinstance(n, int) or n % INT4_N_MULTIPLE:
        raise FlexImportError(
            f"{node.name} (aten._weight_int4pack_mm_for_cpu): N={n} output columns; torch's "
            f"{LAYOUT_NAMES[layout]} int4 packing (layout {layout}) needs a static N, a multiple "
            f"of {INT4_N_MULTIPLE}")
    return layout


def _match_int4(node: fx.Node):
    """(x, packed, scale_and_zero, group_size) of an int4 CPU matmul, or None."""
    if len(node.args) != 4 or node.kwargs:
        return None
    x, w, g, sz = node.args
    xv, wv, szv, yv = _val(x), _val(w), _val(sz), _val(node)
    if None in (xv, wv, szv, yv) or not isinstance(g, int) or g <= 0:
        return None
    if xv.dim() != 2 or xv.dtype not in FLOAT_DTYPES or wv.dtype != torch.uint8 or wv.dim() != 2:
        return None
    if szv.dim() != 3 or szv.shape[2] != 2 or szv.dtype not in (xv.dtype, torch.float32):
        return None
    if yv.dtype != xv.dtype or yv.dim() != 2:
        return None
    return x, w, sz, g


def _erase(graph: fx.Graph, removed: List[fx.Node]) -> None:
    """Erases ``removed`` (users first) and the metadata checks on them."""
    for n in removed:
        for u in list(n.users):
            if u.target == ASSERT_METADATA and not u.users:
                graph.erase_node(u)
        graph.erase_node(n)


def _replace(graph: fx.Graph, old: fx.Node, args) -> fx.Node:
    with graph.inserting_before(old):
        new = graph.call_function(QUANT_MATMUL, args)
    new.meta = dict(old.meta)
    old.replace_all_uses_with(new)
    return new


def rewrite_quantized_linears(gm: fx.GraphModule) -> int:
    """Rewrites the patterns above in ``gm`` (its top-level graph) in place;
    returns how many it replaced (the module is recompiled if any)."""
    graph = gm.graph
    count = 0
    for node in list(graph.nodes):
        if getattr(node, "_erased", False):  # removed with an earlier match
            continue
        if _is_call(node, aten.mm.default):
            m = _match_int8(node)
            if m is None:
                continue
            mul, x, q, s, removed = m
            _replace(graph, mul, (x, q, s, "int8", 0, 0))
            _erase(graph, removed)
            count += 1
        elif _is_call(node, INT4_MM):
            m = _match_int4(node)
            if m is None:
                continue
            x, w, sz, g = m
            _replace(graph, node, (x, w, sz, "int4_cpu", g, _int4_layout(node)))
            _erase(graph, [node])
            count += 1
    if count:
        graph.lint()
        gm.recompile()
    return count
