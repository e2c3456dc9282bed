"""Explains why torch.export's decomposition of a flex_attention modifier failed.

``ExportedProgram.run_decompositions`` re-traces each flex_attention
score_mod / mask_mod.  Some ops there (sorting, top-k, data-dependent shapes
such as nonzero / unique / masked_select) make it fail with an internal
``Attempting to use FunctionalTensor on its own`` error that names neither the
op nor the modifier.  ``explain_decomposition_failure`` finds the op in the
modifier graphs and returns a one-line cause naming it (or None).
"""

from typing import Iterator, List, Optional, Tuple

from torch import fx

from .block_mask import flex_nodes
from .hop_layout import layout_of
from .modifiers import _packet

# Ops torch.export cannot decompose inside a modifier (seen with torch 2.13),
# or that need a whole-tensor result of data-dependent size.
UNSUPPORTED_IN_MODIFIER = (
    "sort", "argsort", "msort", "topk", "kthvalue", "median", "mode", "nonzero",
    "nonzero_static", "unique", "_unique", "_unique2", "unique_consecutive",
    "unique_dim", "masked_select", "searchsorted", "bucketize", "histc", "bincount",
)
FUNCTIONAL_TENSOR_ERROR = "FunctionalTensor on its own"


def modifier_submodules(graph: fx.Graph) -> Iterator[Tuple[str, str, fx.GraphModule]]:
    """(kind, attribute name, submodule) of every flex modifier in ``graph``."""
    root = graph.owning_module
    for n in flex_nodes(graph):
        lay = layout_of(n)
        bm = n.args[lay.block_mask] if len(n.args) > lay.block_mask and \
            isinstance(n.args[lay.block_mask], tuple) else ()
        refs = [("score_mod", n.args[lay.score_mod]), ("mask_mod", bm[-1] if bm else None)]
        if lay.joint is not None:
            refs.append(("score_mod gradient", n.args[lay.joint]))
        for kind, a in refs:
            if isinstance(a, fx.Node) and a.op == "get_attr":
                gm = getattr(root, a.target, None)
                if isinstance(gm, fx.GraphModule):
                    yield kind, a.target, gm


def _called_ops(gm: fx.GraphModule) -> List[str]:
    return [_packet(n) for n in gm.graph.nodes if n.op == "call_function"]


def explain_decomposition_failure(graph: fx.Graph, exc: BaseException) -> Optional[str]:
    """A one-line cause for ``exc`` raised by run_decompositions, or None."""
    if FUNCTIONAL_TENSOR_ERROR not in str(exc):
        return None
    mods = list(modifier_submodules(graph))
    for kind, name, gm in mods:
        for op in _called_ops(gm):
            if op in UNSUPPORTED_IN_MODIFIER:
                return (
                    f"{kind} '{name}' calls torch.{op.lstrip('_')} (aten.{op}), which is not "
                    "supported inside a flex_attention modifier (torch.export cannot "
                    "decompose it there); compute it outside the modifier, in forward(), "
                    "and index the result in the modifier.")
    if not mods:
        return None
    used = sorted({op for _, _, gm in mods for op in _called_ops(gm)})
    return (
        "torch.export could not decompose a flex_attention modifier (internal "
        f"FunctionalTensor error); the modifiers call: {', '.join(used)}; move "
        "whole-tensor ops out of the modifier into forward().")
