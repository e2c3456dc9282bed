"""BlockMask arguments of `compile`: flattened to tensors for torch.export,
checked against the compiled BlockMask at call time.

torch.export takes tensors only (BlockMask is not a registered pytree node in
torch 2.13). `ArgLayout` splits every BlockMask argument with torch's own
``BlockMask._flatten``: its block tensors (``kv_num_blocks``, ``kv_indices``,
``full_kv_*``, ``q_*``, ``full_q_*``, whichever are set) and the tensors its
``mask_mod`` closes over become runtime inputs of the exported program; its
metadata (``seq_lengths``, ``BLOCK_SIZE``, the ``mask_mod`` code, the values
of non-tensor closure cells) is fixed at compile time. `wrap` turns the model
into a module over that flat list that rebuilds the BlockMask
(``BlockMask._unflatten``) before calling the model, so export traces the
``mask_mod`` into the modifier as usual, reading the captured tensors from
inputs. `flatten_call` does the same split for a call after checking that the
BlockMask matches the compiled one. See docs/runtime.md.
"""

import inspect
from typing import Any, List, Optional, Sequence, Tuple

from .errors import FlexCompileError

# Indices into the context tuple of BlockMask._flatten (torch 2.13):
# (seq_lengths, BLOCK_SIZE, mask_mod wrapper, dq_kv_order_spt, absent tensor attrs).
_SEQ_LENGTHS, _BLOCK_SIZE, _MASK_MOD, _ABSENT = 0, 1, 2, -1


def _block_mask_type():
    from torch.nn.attention.flex_attention import BlockMask

    return BlockMask


def _flatten(bm, what: str):
    """(leaves, context) of a BlockMask, as torch's pytree protocol gives them."""
    try:
        leaves, context = bm._flatten()
    except AttributeError as e:  # another torch version
        raise FlexCompileError(what, f"this torch's BlockMask has no _flatten ({e}); BlockMask arguments "
                                     "need torch 2.13") from e
    return list(leaves), context


def _tensor_attrs(context) -> List[str]:
    absent = set(context[_ABSENT])
    return [a for a in _block_mask_type()._TENSOR_ATTRS if a not in absent]


def _mask_mod_name(context) -> str:
    fn = getattr(context[_MASK_MOD], "fn", None)
    fn = getattr(fn, "fn", fn)  # _PlainFunction wraps the function
    for attr in ("__qualname__", "qualname"):  # a function; torch's _StrippedClosure
        if isinstance(getattr(fn, attr, None), str):
            return getattr(fn, attr)
    return f"<{type(fn).__name__}>"


class _MaskSlot:
    """One BlockMask argument: its compile-time leaves and context."""

    def __init__(self, index: int, name: str, bm):
        import torch

        self.index, self.name = index, name
        leaves, self.context = _flatten(bm, "export")
        self.attrs = _tensor_attrs(self.context)
        self.is_tensor = [isinstance(x, torch.Tensor) for x in leaves]
        self.leaf_names = [self._leaf_name(i) for i in range(len(leaves))]
        # Non-tensor leaves (closure values) are kept; tensors are inputs.
        self.leaves = [None if t else x for x, t in zip(leaves, self.is_tensor)]

    def _leaf_name(self, i: int) -> str:
        if i < len(self.attrs):
            return f"{self.name}_{self.attrs[i]}"
        return f"{self.name}_mask_mod_capture{i - len(self.attrs)}"

    @property
    def label(self) -> str:
        return f"argument {self.index} ({self.name})"

    def tensors(self, leaves) -> List[Any]:
        return [x for x, t in zip(leaves, self.is_tensor) if t]

    def rebuild(self, tensors: Sequence[Any]):
        """The BlockMask with our tensor leaves replaced by `tensors`."""
        it = iter(tensors)
        leaves = [next(it) if t else x for x, t in zip(self.leaves, self.is_tensor)]
        return _block_mask_type()._unflatten(tuple(leaves), self.context)

    def check(self, bm) -> List[Any]:
        """The runtime tensors of `bm`, after checking it matches the compiled one."""
        if not isinstance(bm, _block_mask_type()):
            self._fail(f"expected a BlockMask, got {type(bm).__name__}")
        leaves, context = _flatten(bm, "call")
        for what, k in (("seq_lengths", _SEQ_LENGTHS), ("BLOCK_SIZE", _BLOCK_SIZE)):
            if tuple(context[k]) != tuple(self.context[k]):
                self._fail(f"{what} {tuple(context[k])} differs from the compiled {tuple(self.context[k])}")
        self._check_tensor_attrs(_tensor_attrs(context))
        if not context[_MASK_MOD] == self.context[_MASK_MOD] or len(leaves) != len(self.leaves):
            self._fail(f"mask_mod {_mask_mod_name(context)} is not the compiled mask_mod "
                       f"{_mask_mod_name(self.context)} (another function, or a closure over values of "
                       "other types); compile again for it")
        self._check_captured_values(leaves)
        return self.tensors(leaves)

    def _check_tensor_attrs(self, attrs):
        for a in _block_mask_type()._TENSOR_ATTRS:
            if (a in attrs) != (a in self.attrs):
                given, compiled = ("is set", "was None") if a in attrs else ("is None", "was set")
                self._fail(f"{a} {given}, but in the compiled BlockMask it {compiled}")

    def _check_captured_values(self, leaves):
        import torch

        for i, (x, old) in enumerate(zip(leaves[len(self.attrs):], self.leaves[len(self.attrs):])):
            compiled_tensor = self.is_tensor[len(self.attrs) + i]
            if isinstance(x, torch.Tensor) != compiled_tensor:
                self._fail(f"mask_mod capture {i} is a {type(x).__name__}, compiled with "
                           f"{'a Tensor' if compiled_tensor else repr(old)}")
            if not compiled_tensor and not _same_value(x, old):
                self._fail(f"mask_mod capture {i} is {x!r}, compiled with {old!r} (non-tensor values the "
                           "mask_mod closes over are compile-time constants)")

    def _fail(self, message: str):
        raise FlexCompileError("call", f"{self.label}: {message}")


def _same_value(a, b) -> bool:
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # values without a usable ==
        return a is b


class ArgLayout:
    """Where the BlockMask arguments of a model are and how they flatten."""

    def __init__(self, example_args: Sequence[Any], names: Sequence[str]):
        bm_type = _block_mask_type()
        self.num_args = len(example_args)
        self.names = list(names)
        self.slots = {i: _MaskSlot(i, self.names[i], a) for i, a in enumerate(example_args)
                      if isinstance(a, bm_type)}

    def _split(self, args, tensors_of) -> Tuple[Any, ...]:
        flat = []
        for i, a in enumerate(args):
            slot = self.slots.get(i)
            flat.extend(tensors_of(slot, a) if slot else [a])
        return tuple(flat)

    @property
    def flat_names(self) -> List[str]:
        names = []
        for i, n in enumerate(self.names):
            slot = self.slots.get(i)
            names.extend([m for m, t in zip(slot.leaf_names, slot.is_tensor) if t] if slot else [n])
        return _unique(names)

    def flatten_example(self, args) -> Tuple[Any, ...]:
        return self._split(args, lambda slot, bm: slot.tensors(_flatten(bm, "export")[0]))

    def flatten_call(self, args) -> Tuple[Any, ...]:
        if len(args) != self.num_args:
            raise FlexCompileError("call", f"the compiled model takes {self.num_args} argument(s), got {len(args)}")
        return self._split(args, lambda slot, bm: slot.check(bm))

    def unflatten(self, flat) -> List[Any]:
        args, pos = [], 0
        for i in range(self.num_args):
            slot = self.slots.get(i)
            n = sum(slot.is_tensor) if slot else 1
            args.append(slot.rebuild(flat[pos:pos + n]) if slot else flat[pos])
            pos += n
        return args

    def wrap(self, model):
        """A module whose forward takes the flat tensors and calls `model`."""
        import torch

        layout = self

        class BlockMaskArgs(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = model

            def forward(self, *flat):
                return self.inner(*layout.unflatten(flat))

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        BlockMaskArgs.forward.__signature__ = inspect.Signature(
            [inspect.Parameter(n, kind) for n in ["self"] + self.flat_names])
        return BlockMaskArgs()

    def dynamic_shapes(self, spec):
        """`spec` (for the model's arguments) for the flat arguments."""
        if spec is None:
            return None
        if isinstance(spec, dict) and set(spec) == {"args"} and "args" not in self.names:
            spec = spec["args"]  # the form for callables (compile wraps them in forward(*args))
        if isinstance(spec, dict):
            unknown = set(spec) - set(self.names)
            if unknown:
                raise FlexCompileError("export", f"dynamic_shapes names {sorted(unknown)}, which are not "
                                                 f"arguments of the model ({', '.join(self.names)})")
            spec = [spec.get(n) for n in self.names]
        if not isinstance(spec, (list, tuple)):
            raise FlexCompileError("export", f"dynamic_shapes is a {type(spec).__name__}; expected a dict by "
                                             "argument name or a tuple by position")
        if len(spec) != self.num_args:
            raise FlexCompileError("export", f"dynamic_shapes has {len(spec)} entries for {self.num_args} arguments")
        flat = []
        for i, s in enumerate(spec):
            slot = self.slots.get(i)
            if slot and s is not None:
                raise FlexCompileError("export", f"dynamic_shapes for {slot.label}: a BlockMask has static "
                                                 "shapes (give None)")
            flat.extend([None] * sum(slot.is_tensor) if slot else [s])
        return dict(zip(self.flat_names, flat))


def flatten_block_masks(model, example_args: Sequence[Any], dynamic_shapes=None):
    """(model, example args, dynamic_shapes, layout) for torch.export: with
    every BlockMask argument flattened, or unchanged with layout None when
    there is none (or `model` is not callable: export reports that)."""
    bm_type = _block_mask_type()
    if not callable(model) or not any(isinstance(a, bm_type) for a in example_args):
        return model, tuple(example_args), dynamic_shapes, None
    layout = ArgLayout(example_args, argument_names(model, len(example_args)))
    return (layout.wrap(model), layout.flatten_example(example_args), layout.dynamic_shapes(dynamic_shapes),
            layout)


def argument_names(model, n: int) -> List[str]:
    """Names of the first `n` positional parameters of the model's forward
    (``arg<i>`` where it has none, e.g. ``*args``)."""
    import torch

    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return _unique([positional[i] if i < len(positional) else f"arg{i}" for i in range(n)])


def _unique(names: List[str]) -> List[str]:
    seen, out = set(), []
    for n in names:
        m, k = n, 1
        while m in seen:
            m, k = f"{n}_{k}", k + 1
        seen.add(m)
        out.append(m)
    return out
