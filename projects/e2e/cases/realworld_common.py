"""Shared pieces of the real-world modifier suite (realworld_*.py).

`Mods` is one flex_attention call whose score_mod / mask_mod are plain
functions `fn(mod, score, b, h, q_idx, kv_idx, *extra)` /
`fn(mod, b, h, q_idx, kv_idx, *extra)`: `mod` is the module (its buffers,
parameters and plain tensor attributes are what the modifier captures),
`extra` the runtime tensors passed to `forward` after q, k, v.

`case(...)` registers one such model with small shapes (B=1, H=2, S=32,
E=16, 16-wide blocks unless told otherwise).
"""

import sys

import torch

from ..registry import TOL_BF16, TOL_F16, qkv, register_case
from .common import create_block_mask, flex_attention

# The two lowerings the suite compares (tiled-1t is tiled on one thread).
BACKENDS = ("reference", "tiled")

DTYPE_TOL = {torch.float16: TOL_F16, torch.bfloat16: TOL_BF16}



class Mods(torch.nn.Module):
    """flex_attention with modifiers reading this module's tensors.

    shape: (B, H, M, N) for the BlockMask (None for B/H: broadcast).
    in_forward: build the BlockMask inside forward (needed when mask_mod
    reads runtime inputs); else it is built here and its tensors are
    constants. buffers / params / consts: registered buffers, parameters and
    plain tensor attributes (lifted constants) set on the module.
    """

    def __init__(self, score=None, mask=None, *, shape, block=16, buffers=None, params=None, consts=None,
                 in_forward=False, lse=False, gqa=False, scale=None):
        super().__init__()
        for name, t in (buffers or {}).items():
            self.register_buffer(name, t)
        for name, t in (params or {}).items():
            setattr(self, name, torch.nn.Parameter(t, requires_grad=False))
        for name, t in (consts or {}).items():
            setattr(self, name, t)
        self._score, self._mask = score, mask
        self._shape, self._block, self._in_forward = shape, block, in_forward
        self._lse, self._gqa, self._scale = lse, gqa, scale
        self._bm = None
        if mask is not None and not in_forward:
            self._bm = self._block_mask(())

    def _block_mask(self, extra):
        B, H, M, N = self._shape
        fn = self._mask

        def mask_mod(b, h, q_idx, kv_idx):
            return fn(self, b, h, q_idx, kv_idx, *extra)

        return create_block_mask(mask_mod, B, H, M, N, device="cpu", BLOCK_SIZE=self._block)

    def forward(self, q, k, v, *extra):
        score_mod = None
        if self._score is not None:
            fn = self._score

            def score_mod(score, b, h, q_idx, kv_idx):
                return fn(self, score, b, h, q_idx, kv_idx, *extra)

        bm = self._block_mask(extra) if self._mask is not None and self._in_forward else self._bm
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, scale=self._scale,
                              enable_gqa=self._gqa, return_lse=self._lse)


def case(name, score=None, mask=None, *, B=1, H=2, M=32, N=None, E=16, Ev=None, Hkv=None, Bkv=None,
         dtype=None, extra=None, mask_bh=False, xfail=None, check=None, **kw):
    """Registers `name`: Mods(score, mask, ...) on qkv(B, H, M, E) inputs.

    extra: a function returning the runtime tensors passed after q, k, v (or
    a list of such tuples: several input sets). mask_bh: the mask depends on
    b / h (the BlockMask gets B and H instead of broadcasting). Other keyword
    arguments go to Mods (buffers=..., consts=..., in_forward=..., ...); a
    callable value is called when the model is built (seeded tables).
    """
    N = N or M
    shape = (B if mask_bh else None, H if mask_bh else None, M, N)
    if extra is not None:
        kw.setdefault("in_forward", True)

    def inputs():
        q = torch.randn(B, H, M, E, dtype=dtype)
        _, k, v = qkv(Bkv or B, Hkv or H, N, E, Ev=Ev, dtype=dtype)
        if extra is None:
            return (q, k, v)
        ex = extra()
        if isinstance(ex, list):
            return [(q, k, v, *e) for e in ex]
        return (q, k, v, *ex)

    def factory():
        # Tables are built here, under the runner's per-case seed.
        args = {key: (val() if callable(val) else val) for key, val in kw.items()}
        return Mods(score, mask, shape=shape, gqa=(Hkv or H) != H, **args)

    factory.__module__ = _caller_module()
    factory.__doc__ = name.replace("_", " ")
    tol = DTYPE_TOL.get(dtype)
    register_case(name, inputs=inputs, tol=tol, xfail=xfail, check=check, backends=BACKENDS)(factory)


def _caller_module():
    """The module that called `case` (its theme). sys._getframe, not
    inspect.stack(): that reads the source of every frame, about a minute of
    each pytest worker's collection for the 134 cases."""
    return sys._getframe(2).f_globals["__name__"]
