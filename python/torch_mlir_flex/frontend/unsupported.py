"""Torch IR ops the compiled code cannot run, rejected with a one-line cause.

Random number generation (``aten.rand_like``, ``aten.bernoulli``, dropout,
...) lowers through torch-mlir's global RNG state (``torch_c.get_next_seed``
-> ``ml_program.global``), which our JIT does not provide; without this check
the failure is a parse error about the ``ml_program`` dialect.
"""

import re

from torch_mlir import ir

from .errors import FlexFrontendError
from .outline import find_flex_calls

_RANDOM = re.compile(
    r"^torch\.aten\.(rand|randn|randint|randperm|rand_like|randn_like|randint_like|"
    r"bernoulli|bernoulli_|uniform|uniform_|normal|normal_functional|exponential|"
    r"geometric|cauchy|log_normal|multinomial|poisson|native_dropout|dropout|"
    r"feature_dropout|alpha_dropout|feature_alpha_dropout)(\.|$)")
_MODIFIER_ATTRS = (("score_mod_fn", "score_mod"), ("mask_mod_fn", "mask_mod"), ("joint_fn", "score_mod gradient"))


def modifier_kinds(module: ir.Module) -> dict:
    """func name -> 'score_mod' / 'mask_mod' for every flex call's modifiers."""
    kinds = {}
    for op in find_flex_calls(module):
        for attr, kind in _MODIFIER_ATTRS:
            if attr in op.attributes:
                kinds[ir.FlatSymbolRefAttr(op.attributes[attr]).value] = kind
    return kinds


def _where(func_name: str, kinds: dict) -> str:
    if func_name in kinds:
        return f"in {kinds[func_name]} @{func_name}"
    return f"in @{func_name}"


def check_random_ops(module: ir.Module):
    """Raises FlexFrontendError naming the first random op and its function."""
    kinds = modifier_kinds(module)
    for fn in module.body.operations:
        if fn.operation.name != "func.func":
            continue
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        found = []

        def visit(op):
            if _RANDOM.match(op.name):
                found.append(op.name[len("torch."):])
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        fn.operation.walk(visit)
        if found:
            raise FlexFrontendError(
                f"op '{found[0]}' (random number generation) {_where(name, kinds)} is not "
                "supported: compiled code has no RNG; draw random tensors outside the "
                "compiled model and pass them as inputs (use dropout only in training).")
