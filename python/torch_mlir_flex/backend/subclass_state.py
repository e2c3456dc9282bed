"""Tensor-subclass parameters (torchao's quantized weights) as their inner tensors.

A torchao-quantized model holds weights such as `Int8Tensor` (inner
tensors `qdata`, `scale`) or `Int4OpaqueTensor` (`qdata`,
`scale_and_zero`): traceable wrapper subclasses that describe themselves
with `__tensor_flatten__`. torch.export's `run_decompositions` (which our
importer runs) unwraps them with torch's `UnwrapTensorSubclass`
parametrization: the program's state then names each inner tensor
``<module>.parametrizations.<name>.original<i>``, `i` counting the plain
tensors of the subclass depth first in `__tensor_flatten__` order.

This module maps such a name back to the model's own inner tensor (the
`qdata` object the subclass holds, never a copy or a dequantized float
tensor), so that the compiled function's state arguments are bound to the
quantized bytes the model keeps, and lists a subclass's inner tensors for
the compile caches' keys (module_key.py).
"""

import re

_PARAMETRIZED = re.compile(r"^(?:(.*)\.)?parametrizations\.([^.]+)\.original(\d+)$")


class SubclassError(TypeError):
    """A subclass whose flattened attributes are not all tensors (an opaque object)."""


def is_subclass(t) -> bool:
    """A traceable wrapper subclass (has `__tensor_flatten__`)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return is_traceable_wrapper_subclass(t)


def inner_tensors(t, prefix: str = ""):
    """[(attribute path, plain tensor)] of subclass `t`, depth first in
    `__tensor_flatten__` order (the order of torch's parametrization), or
    [("", t)] for a plain tensor."""
    import torch

    if not is_subclass(t):
        return [(prefix, t)]
    names, _ = t.__tensor_flatten__()
    out = []
    for name in names:
        v = getattr(t, name)
        if not isinstance(v, torch.Tensor):
            raise SubclassError(f"{type(t).__name__}.{name} is a {type(v).__name__}, not a tensor")
        out.extend(inner_tensors(v, f"{prefix}.{name}" if prefix else name))
    return out


def flatten_context(t):
    """The non-tensor half of `__tensor_flatten__` of `t` and of its nested
    subclasses: [(path, type, context)]."""
    if not is_subclass(t):
        return []
    names, ctx = t.__tensor_flatten__()
    out = [("", type(t), ctx)]
    for name in names:
        out.extend((f"{name}.{p}" if p else name, c, x) for p, c, x in flatten_context(getattr(t, name)))
    return out


def resolve(tensors: dict, target: str):
    """The tensor a state target names: `tensors[target]`, or for a
    parametrized name the matching inner tensor of the subclass in
    `tensors` (model attribute name -> tensor); None when there is none."""
    t = tensors.get(target)
    if t is not None:
        return t
    name = outer_name(target)
    outer = tensors.get(name) if name else None
    if outer is None or not is_subclass(outer):
        return None
    leaves, index = inner_tensors(outer), int(_PARAMETRIZED.match(target).group(3))
    return leaves[index][1] if index < len(leaves) else None


def outer_name(target: str):
    """The subclass attribute a parametrized target unwraps, or None."""
    m = _PARAMETRIZED.match(target)
    if m is None:
        return None
    return f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2)


def state_tensor(ep, target: str):
    """The tensor of a parameter or buffer of `ep` (non-persistent buffers
    are in `constants`): the model's own object, so that a later in-place
    update or `.data` assignment is what the next call reads; of a
    subclass, the inner tensor the model's subclass holds."""
    from .errors import FlexCompileError

    t = resolve(ep.state_dict, target)
    if t is None and (t := resolve(ep.constants, target)) is None:
        raise FlexCompileError("import", f"the program's state argument {target!r} is not a tensor of the model")
    return t
