"""The arguments of a compiled call, checked at C speed when they are like
the last checked call's.

JitFunction._inputs checks each argument in Python (type, dtype, device,
static sizes, contiguity): about 1 us an argument, 30-60 us for a decode
step's graph with its 36 weights and caches, called every token. After a
call whose arguments it checked, JitFunction builds a `FastInputs` from
them: torch's `TensorGuards` (Dynamo's own tensor check, in C++) then
compares, in one call, each later tensor's dtype, device, dispatch keys,
requires_grad, the sizes the function's types fix and the strides that
follow from them (contiguity) with that call's. Only the strides that
depend on a dynamic size are left to `is_contiguous()` in Python. A call
that does not match (another dtype, a size the function does not take, a
view, a numpy array, a scalar given as a tensor) takes the checked path,
which converts or raises as before. Dynamic sizes are not compared here:
the function's shape checks (shapes.py) see them on both paths.
"""

import operator


class FastInputs:
    """`items(args)`: the call's items for PackedCall (the bound tensors,
    then `args`), or None when `args` need the checked path."""

    def __init__(self, bound, args, scalars, static_dims):
        """`args`: a call's arguments that JitFunction._inputs accepted as
        they are (contiguous tensors; Python ints or floats at the
        `scalars` positions); `static_dims[i]`: per dim of argument i its
        static size or None."""
        self._bound = list(bound)
        self._n = len(args)
        nb = len(self._bound)
        self._scalars = [i - nb for i in sorted(scalars)]
        self._scalar_types = [type(args[i]) for i in self._scalars]
        tensors = [i for i in range(self._n) if i not in self._scalars]
        sizes, strides, self._dynamic = [], [], []
        for i in tensors:
            dims = static_dims[nb + i]
            sizes.append(list(dims))
            # A stride is fixed when every dim after it is static.
            st, fixed = [], True
            for j in reversed(range(len(dims))):
                st.append(args[i].stride(j) if fixed else None)
                fixed = fixed and dims[j] is not None
            strides.append(st[::-1])
            if None in st:
                self._dynamic.append(i)
        self._guards = _tensor_guards()(*[args[i] for i in tensors], dynamic_dims_sizes=sizes,
                                    dynamic_dims_strides=strides)
        self._tensors = _getter(tensors)
        self._single = len(tensors) == 1

    @classmethod
    def build(cls, bound, args, scalars, static_dims):
        """A FastInputs for `args`, or None when they do not qualify (not
        every argument a contiguous plain tensor or, at a scalar position,
        an int or float; no TensorGuards)."""
        import torch

        if _tensor_guards() is None:
            return None
        nb = len(bound)
        for i, a in enumerate(args, start=nb):
            if i in scalars:
                if type(a) not in (int, float):
                    return None
            elif type(a) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) or not a.is_contiguous():
                return None
        try:
            return cls(bound, args, scalars, static_dims)
        except (TypeError, RuntimeError, ValueError):
            return None

    def items(self, args):
        if len(args) != self._n:
            return None
        for i, t in zip(self._scalars, self._scalar_types):
            if type(args[i]) is not t:
                return None
        tensors = self._tensors(args)
        if not (self._guards.check(tensors) if self._single else self._guards.check(*tensors)):
            return None
        for i in self._dynamic:
            if not args[i].is_contiguous():
                return None
        return self._bound + list(args)


def _tensor_guards():
    """torch's TensorGuards class, or None (a torch without it: every call
    takes the checked path)."""
    try:
        from torch._C._dynamo.guards import TensorGuards
    except ImportError:
        return None
    return TensorGuards


def _getter(indices):
    if not indices:
        return lambda args: ()
    return operator.itemgetter(*indices)
