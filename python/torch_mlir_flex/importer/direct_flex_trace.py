"""torch.export of flex_attention without Dynamo, captured tensors kept.

In eager mode and under non-strict ``torch.export`` (torch 2.13),
``flex_attention`` wraps its higher-order op in
``torch.compile(..., fullgraph=True)``: Dynamo traces the call so that
tensors the modifiers capture (closures, module buffers, forward inputs)
become the op's ``score_mod_other_buffers`` / ``mask_mod_other_buffers``.
Dynamo costs about 0.2 s per flex_attention call of a model (its frame
cannot be reused: every call has a new backend and new modifiers), most
of a small model's export.

torch's own switch around Dynamo (``_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG``)
calls the op directly, but then the op's tracing (``trace_flex_attention``)
traces each modifier with ``make_fx``, which records a tensor it does not
know as a constant (``get_attr _tensor_constant0``): a forward input read
by a mask_mod would be frozen to its example value.

``direct_flex_tracing()`` uses that switch and wraps the op's tracing:
each modifier is traced once, every tensor constant of its graph that the
modifier captured (an input, a parameter, a buffer, a value computed from
them, or a real tensor from its closure or globals) becomes a new
trailing placeholder of the graph and the tensor itself a new trailing
entry of the modifier's buffers, as Dynamo lifts them; the rewritten
graphs then go through torch's tracing as before.  Tensors the modifier
makes itself (``torch.tensor(...)`` in its body) stay constants, as with
Dynamo. SymInts a modifier's closures hold (a dynamic offset) become
placeholders and buffers too (`_with_lifted_symints`).  The graphs and buffers
that reach the exported program have the form Dynamo's path gives
(test_direct_flex_trace.py compares the imported IR of both).

The switch and the wrapper are module globals of torch: they are set for
the extent of the ``with`` block only, which is meant to hold one
``torch.export.export`` call. Blocks of several threads take turns (a
lock), so each restores what it found. Another thread's flex_attention
call made while a block is open takes the same path: eager calls run the
op directly (torch's debug path, same results), exports lift captures as
above.
"""

import contextlib
import os
import threading

import torch
from torch import fx

ENV = "TORCH_MLIR_FLEX_DIRECT_FLEX_TRACE"  # "0": trace with Dynamo, as torch does
# Held for the extent of a block: blocks of several threads run one after
# another, so that each restores what it found (not another's settings).
_LOCK = threading.RLock()


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _made_in_modifier(n: fx.Node) -> bool:
    """A constant the modifier made (torch.tensor(...) in its body):
    make_fx reads it through aten.lift_fresh_copy."""
    return bool(n.users) and all(u.op == "call_function" and u.target is torch.ops.aten.lift_fresh_copy.default
                                 for u in n.users)


def _lift_traced_constants(gm: fx.GraphModule, buffers: tuple) -> tuple:
    """Tensor constants of `gm` that the modifier captured (not made) ->
    trailing placeholders of `gm` (in place) and trailing buffers; returns
    the buffers."""
    # A modifier graph has its (b, h, q, kv) placeholders at least.
    last = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    lifted, by_tensor, targets = [], {}, set()
    for n in list(gm.graph.nodes):
        if n.op != "get_attr":
            continue
        t = getattr(gm, n.target, None)
        if not isinstance(t, torch.Tensor) or _made_in_modifier(n):
            continue
        ph = by_tensor.get(id(t))
        if ph is None:
            with gm.graph.inserting_after(last):
                ph = last = gm.graph.placeholder(f"capture_{len(lifted)}")
            ph.meta.update(n.meta)
            by_tensor[id(t)] = ph
            lifted.append(t)
        n.replace_all_uses_with(ph)
        gm.graph.erase_node(n)
        targets.add(n.target)
    still_read = {m.target for m in gm.graph.nodes if m.op == "get_attr"}
    for target in targets - still_read:
        delattr(gm, target)
    if lifted:
        gm.recompile()
    return tuple(buffers) + tuple(lifted)


def _symint_cells(fn, seen=None):
    """Closure cells holding a SymInt, of `fn` and of the functions its
    closure holds (transformers composes masks: `and_masks(causal, pad)`)."""
    seen = set() if seen is None else seen
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        if id(cell) in seen:
            continue
        seen.add(id(cell))
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(v, torch.SymInt):
            cells.append(cell)
        elif callable(v):
            cells += _symint_cells(v, seen)
    return cells


def _with_lifted_symints(fn, n_args):
    """(fn', symints): fn' takes the SymInts `fn`'s closures hold as extra
    trailing arguments (after its `n_args`), so that make_fx traces them as
    placeholders (as Dynamo lifts them) instead of failing on a SymInt of
    the outer trace it does not track."""
    cells = _symint_cells(fn)
    if not cells:
        return fn, ()
    values = tuple(c.cell_contents for c in cells)

    def lifted(*args):
        saved = [c.cell_contents for c in cells]
        for c, v in zip(cells, args[n_args:]):
            c.cell_contents = v
        try:
            return fn(*args[:n_args])
        finally:
            for c, v in zip(cells, saved):
                c.cell_contents = v

    return lifted, values


def _tracing_with_lifted_captures(trace):
    """A stand-in for torch's trace_flex_attention (same signature) that
    lifts the modifiers' traced constants to buffers first."""

    def wrapped(proxy_mode, query, key, value, score_mod, block_mask, scale, kernel_options,
                score_mod_other_buffers=(), mask_mod_other_buffers=()):
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
        from torch._higher_order_ops.utils import reenter_make_fx

        score_vals = [query.new_zeros((), requires_grad=query.requires_grad)] + [
            query.new_zeros((), dtype=torch.int) for _ in range(4)]
        mask_vals = [query.new_zeros((), dtype=torch.int) for _ in range(4)]
        score_fn, score_syms = _with_lifted_symints(score_mod, 5 + len(score_mod_other_buffers))
        mask_fn, mask_syms = _with_lifted_symints(block_mask[-1], 4 + len(mask_mod_other_buffers))
        with TransformGetItemToIndex():
            score_graph = reenter_make_fx(score_fn)(*score_vals, *score_mod_other_buffers, *score_syms)
            mask_graph = reenter_make_fx(mask_fn)(*mask_vals, *mask_mod_other_buffers, *mask_syms)
        score_bufs = _lift_traced_constants(score_graph, tuple(score_mod_other_buffers) + score_syms)
        mask_bufs = _lift_traced_constants(mask_graph, tuple(mask_mod_other_buffers) + mask_syms)
        return trace(proxy_mode, query, key, value, score_graph, block_mask[:-1] + (mask_graph,),
                     scale, kernel_options, score_bufs, mask_bufs)

    wrapped.__wrapped__ = trace
    return wrapped


@contextlib.contextmanager
def direct_flex_tracing(active: bool = True):
    """flex_attention calls trace without Dynamo inside the block (see the
    module docstring); a no-op when `active` is false or the environment
    sets TORCH_MLIR_FLEX_DIRECT_FLEX_TRACE=0."""
    if not (active and enabled()):
        yield
        return
    import importlib

    # (`import torch._higher_order_ops.flex_attention as hop` would give the
    # op: the package exports it under the module's name)
    hop = importlib.import_module("torch._higher_order_ops.flex_attention")
    fa = importlib.import_module("torch.nn.attention.flex_attention")

    with _LOCK:
        flag, trace = fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG, hop.trace_flex_attention
        fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
        hop.trace_flex_attention = _tracing_with_lifted_captures(trace)
        try:
            yield
        finally:
            fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = flag
            hop.trace_flex_attention = trace
