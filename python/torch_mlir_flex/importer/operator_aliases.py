"""Python operator overloads of aten retargeted to the ops they stand for.

``torch.export`` records ``a & b`` on tensors as ``aten.__and__.Tensor``
(likewise ``|`` and ``^``, and their Scalar forms). Those overloads have only
a CompositeImplicitAutograd kernel, which calls ``aten.bitwise_and`` (or
``bitwise_or`` / ``bitwise_xor``) with the same arguments, so
``run_decompositions`` re-traces the whole program just to rename them: about
0.1-0.2 s per import of a mask written ``(q_idx >= kv_idx) & ...``, as most
mask_mods are (attention-gym's ``and_masks`` too).

``retarget_operator_aliases`` renames them in place, in the graph and in the
flex_attention modifier subgraphs, exactly as that kernel would, so the
decision of decomposition_check.py sees the final ops.
test_decomposition_skip.py checks that the imported IR is the same as after
the re-trace.
"""

import torch
from torch import fx

from .graph_walk import rewrite_calls

aten = torch.ops.aten

ALIASES = {
    aten.__and__.Tensor: aten.bitwise_and.Tensor,
    aten.__and__.Scalar: aten.bitwise_and.Scalar,
    aten.__or__.Tensor: aten.bitwise_or.Tensor,
    aten.__or__.Scalar: aten.bitwise_or.Scalar,
    aten.__xor__.Tensor: aten.bitwise_xor.Tensor,
    aten.__xor__.Scalar: aten.bitwise_xor.Scalar,
}


def _retarget(_gm: fx.GraphModule, n: fx.Node) -> bool:
    if n.target not in ALIASES:
        return False
    n.target = ALIASES[n.target]
    return True


def retarget_operator_aliases(gm: fx.GraphModule) -> int:
    """Retargets the ALIASES calls of ``gm`` and of its submodules; returns
    how many were renamed (their graph modules are recompiled)."""
    return rewrite_calls(gm, _retarget)
