"""Pre-lowering cleanup of imported Torch IR.

The upstream FX importer drops the BlockMask operands of the flex HOP but
leaves the graph that built them (``aten.sort.stable``, ``index_put``, ...),
plus ``aten._assert_tensor_metadata`` checks on those values.  That dead code
makes torch-mlir's backend pipeline fail, so we delete it first.

Only value-semantic torch ops are deleted: an op goes if it has results, no
regions, all results are unused and none of them is a non-value
``!torch.tensor`` (which may alias).  Ops without results (asserts, prints,
``torch.overwrite.tensor.contents``) are kept, except
``torch.aten._assert_tensor_metadata`` which only restates static types.
"""

from torch_mlir import ir

_DROPPED_ASSERTS = ("torch.aten._assert_tensor_metadata",)


def _is_torch_op(op) -> bool:
    return op.name.startswith("torch.") and not op.name.startswith("torch_c.")


def _is_value_type(t: ir.Type) -> bool:
    s = str(t)
    return not (s.startswith("!torch.tensor") or s.startswith("!torch.list<tensor"))


def _all_ops(module: ir.Module):
    ops = []

    def visit(op):
        ops.append(op.operation if hasattr(op, "operation") else op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.POST_ORDER)
    return ops


def _is_dead(op) -> bool:
    if not _is_torch_op(op) or len(op.regions) != 0:
        return False
    if op.name in _DROPPED_ASSERTS:
        return True
    if len(op.results) == 0:
        return False
    for r in op.results:
        if not _is_value_type(r.type):
            return False
        if any(True for _ in r.uses):
            return False
    return True


def prune_dead_torch_ops(module: ir.Module) -> int:
    """Erases dead value-semantic torch ops in place; returns how many."""
    erased = 0
    changed = True
    while changed:
        changed = False
        # Post-order walk, reversed: users are visited before producers
        # within a block, so one sweep removes whole dead chains.
        for op in reversed(_all_ops(module)):
            if _is_dead(op):
                op.erase()
                erased += 1
                changed = True
    return erased
