"""Whether ``ExportedProgram.run_decompositions`` would leave a program as is.

``torch.export.export`` (torch 2.13) returns the *training* IR: pre-dispatch
ATen that may still hold CompositeImplicitAutograd ops (``linear``,
``reshape``; ``__and__`` is renamed before, operator_aliases.py), in-place
ops, functorch calls (``vmap`` from a ``create_block_mask`` in forward),
autograd-state calls and other HOPs.
``run_decompositions(table)`` turns that into the post-dispatch IR the
importer needs: it re-traces the whole graph (HOP subgraphs such as the
flex_attention score_mod / mask_mod included) through AOTAutograd, which
functionalizes, runs the CompositeImplicitAutograd kernels of ops the table
does not preserve and applies the table.  Its fixed cost (patching every
CompositeImplicitAutograd op of torch, then the re-trace) is ~0.1-0.2 s, most
of the import stage of a flex_attention module.

``decompositions_change_nothing`` says when that re-trace has nothing to
change: every op of every graph is a functional aten/prims op with no
CompositeImplicitAutograd kernel, not in the table, of static output shape
(``aten.index.Tensor`` with integer indices counts, although it is tagged
dynamic_output_shape for boolean masks) and not one the re-trace rejects
inside a modifier (``UNSUPPORTED_IN_MODIFIER``:
those keep the explained error of ``cleanups.run_decompositions``); the program has
static shapes, no mutation, no dead node (unused ``getitem`` outputs aside) and
no HOP but flex_attention.  Anything else, or anything unknown, answers False:
a program that needs decomposing always takes ``run_decompositions``.
test_decomposition_skip.py checks that the imported IR is the same either way.
"""

import operator

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from .hop_layout import FLEX_BACKWARD_HOP, FLEX_HOP
from .modifier_ops import UNSUPPORTED_IN_MODIFIER

PLAIN_INPUTS = (InputKind.USER_INPUT, InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
OWN_NAMESPACES = ("aten", "prims")
# Tags of ops whose re-trace may differ (shape or value decided at run time,
# random ops).
UNSTABLE_TAGS = ("dynamic_output_shape", "data_dependent_output", "nondeterministic_seeded")
CIA = "CompositeImplicitAutograd"


def decompositions_change_nothing(prog: ExportedProgram, table) -> bool:
    """True if ``prog.run_decompositions(table)`` would import to the same IR."""
    return (_plain_signature(prog)
            and not prog.range_constraints
            and all(_graph_is_final(gm, table) for gm in prog.graph_module.modules()
                    if isinstance(gm, fx.GraphModule)))


def _plain_signature(prog: ExportedProgram) -> bool:
    sig = prog.graph_signature
    return (sig.backward_signature is None
            and all(s.kind in PLAIN_INPUTS for s in sig.input_specs)
            and all(s.kind == OutputKind.USER_OUTPUT for s in sig.output_specs))


def _graph_is_final(gm: fx.GraphModule, table) -> bool:
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output"):
            ok = _static(n.meta.get("val"))
        elif not n.users and n.target is not operator.getitem:
            ok = False  # dead code: the re-trace would drop it
        elif n.op == "get_attr":
            ok = isinstance(getattr(gm, n.target, None), fx.GraphModule)
        elif n.op == "call_function":
            ok = ((_final_call(n.target, table) or _integer_index(n, table))
                  and _static(n.meta.get("val")))
        else:
            ok = False
        if not ok:
            return False
    return True


def _final_call(target, table) -> bool:
    if target is operator.getitem or target is FLEX_HOP or target is FLEX_BACKWARD_HOP:
        return True
    if not isinstance(target, torch._ops.OpOverload) or target.namespace not in OWN_NAMESPACES:
        return False
    return not (target in table or target.overloadpacket in table
                or target._schema.is_mutable
                or target.overloadpacket.__name__ in UNSUPPORTED_IN_MODIFIER
                or any(getattr(torch.Tag, t) in target.tags for t in UNSTABLE_TAGS)
                or _has_cia_kernel(target))


def _integer_index(n: fx.Node, table) -> bool:
    """``aten.index.Tensor`` with integer index tensors (a captured tensor read
    in a modifier): tagged dynamic_output_shape for boolean masks only."""
    op = torch.ops.aten.index.Tensor
    if n.target is not op or op in table or op.overloadpacket in table or len(n.args) != 2:
        return False
    indices = [i for i in n.args[1] if i is not None]
    vals = [i.meta.get("val") if isinstance(i, fx.Node) else None for i in indices]
    return bool(vals) and all(isinstance(v, torch.Tensor) and not v.dtype.is_floating_point
                              and v.dtype not in (torch.bool, torch.uint8) for v in vals)


def _has_cia_kernel(op: torch._ops.OpOverload) -> bool:
    return (torch._C.DispatchKey.CompositeImplicitAutograd in op.py_kernels
            or torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), CIA))


def _static(val) -> bool:
    """No symbolic size or value in a node's meta value (None counts as static)."""
    if isinstance(val, (list, tuple)):
        return all(_static(v) for v in val)
    if isinstance(val, torch.Tensor):
        return all(isinstance(d, int) for d in val.shape)
    return not isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool))
