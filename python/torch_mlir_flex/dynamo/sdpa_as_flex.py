"""SDPA through our flash attention: a pass over Dynamo's graphs that
rewrites `F.scaled_dot_product_attention` calls into flex_attention calls.

torch-mlir decomposes `scaled_dot_product_attention` into the whole
B*H*L*S score matrix (58 GB at transformers' continuous-batching warmup),
and AOTAutograd's backward of it
(`aten._scaled_dot_product_flash_attention_for_cpu_backward`) is not known
to torch-mlir at all: an SDPA model could neither serve nor train
compiled. `rewrite(gm)` runs on every graph `flex_backend` receives,
before torch.export and AOTAutograd, and replaces each SDPA call
(Dynamo records `torch._C._nn.scaled_dot_product_attention`, which
`F.scaled_dot_product_attention` is) by a call of `sdpa_flex`, which calls
torch's flex_attention higher-order op. The pipeline then takes it as any
flex_attention: the flash-style kernels, no score matrix, masked blocks
skipped; with grad on, AOTAutograd's backward holds
`flex_attention_backward` (training.py).

Semantics, as SDPA's:
- `is_causal=True`: mask_mod `q_idx >= kv_idx` (top-left aligned, as SDPA:
  `tril(ones(L, S))`, also when L != S). The lowering classifies key
  blocks from this mask_mod (interval arithmetic): blocks above the
  diagonal are skipped, those below it computed without the mask.
- a float `attn_mask` broadcastable to [B, H, L, S] ([L, S], [B, 1, L, S],
  [B, 1, 1, S], ...): a score_mod adding `mask[b, h, q_idx, kv_idx]`, the
  size-1 dims dropped outside (the mask is never expanded);
- a bool `attn_mask`: a score_mod `where(mask[...], score, -inf)`;
- with a mask, the BlockMask is computed from it where the call runs
  (sdpa_mask_blocks.py): key blocks whose entries all mask (False, -inf,
  finfo.min) for a block of queries are skipped, the others computed with
  the score_mod (continuous batching's padded key reads);
- `scale` (default 1/sqrt(E)), `enable_gqa` (Hq a multiple of Hkv), L != S,
  head dims of q and v that differ. A scale that Dynamo made a dynamic
  Python float is compiled at the example's value, with a guard
  (specialize.py's `pin_input_items`, as before the rewrite).
- Dynamic sizes: batch and sequence lengths stay dynamic; head counts and
  head dims are fixed to the example's with Dynamo guards (flex_attention
  marks them static when Dynamo traces it; the lowering derives the GQA
  group and its kernels from them).

Left as SDPA (DEBUG record on `torch_mlir_flex.dynamo` naming why):
`dropout_p` other than 0 (or not a Python number), both `is_causal` and
`attn_mask` (SDPA raises), q/k/v not 4-D or of a dtype other than
float32/bfloat16/float16, different head counts without `enable_gqa`, a
mask that requires grad, of a dtype other than bool and q's, or not
broadcastable, `dropout_p`, `is_causal` or `enable_gqa` that are not
Python constants.

Fully masked rows (every key masked for a query): flex_attention gives 0
(lse -inf) and zero gradients. Eager SDPA on CPU in torch 2.13 gives 0
too, for a float mask of -inf and for a bool mask, with the math and the
flash kernel and in its backward (checked; older torch versions gave NaN),
so the compiled results agree there as well.

A graph that runs in eager PyTorch after all (our pipeline refused it, or
a call's sizes are too large for it: `_EagerWhenTooLarge`) calls torch's
SDPA again: `sdpa_flex` on real tensors is SDPA, whose CPU kernels tile.

Setting `TORCH_MLIR_FLEX_SDPA=decompose` turns the rewrite off (SDPA goes
to torch-mlir's decomposition, as before).
"""

import math
import os

from ..log import get_logger
from . import sdpa_mask_blocks

log = get_logger("dynamo")

ENV = "TORCH_MLIR_FLEX_SDPA"
DTYPES = ("float32", "bfloat16", "float16")
_SDPA_PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}


def enabled() -> bool:
    """False when TORCH_MLIR_FLEX_SDPA=decompose (any other value: on)."""
    return os.environ.get(ENV, "").strip().lower() != "decompose"


def sdpa_targets() -> tuple:
    import torch
    import torch.nn.functional as F

    return tuple({torch._C._nn.scaled_dot_product_attention, F.scaled_dot_product_attention})


def rewrite(gm) -> int:
    """Replaces the SDPA calls of Dynamo's `gm` that flex_attention can
    express by `sdpa_flex` calls, in place; returns how many (also counted
    in `dynamo.stats["sdpa_as_flex"]`)."""
    if not enabled():
        return 0
    targets = sdpa_targets()
    done = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in targets:
            continue
        args = _bind(node)
        why = "unexpected arguments" if args is None else _refusal(args)
        if why is not None:
            log.debug("torch_mlir_flex: %s left as scaled_dot_product_attention: %s", node.name, why)
            continue
        try:
            _static_heads(args)
        except Exception as e:  # sizes Dynamo cannot guard: SDPA as before
            log.debug("torch_mlir_flex: %s left as scaled_dot_product_attention: head sizes cannot be "
                      "fixed: %s: %s", node.name, type(e).__name__, e)
            continue
        node.target = sdpa_flex
        node.args = (args["query"], args["key"], args["value"], args["attn_mask"])
        node.kwargs = {"is_causal": bool(args["is_causal"]), "scale": args["scale"],
                       "enable_gqa": bool(args["enable_gqa"])}
        done += 1
    if done:
        from . import stats

        stats["sdpa_as_flex"] += done
        gm.recompile()
        log.debug("torch_mlir_flex: %d scaled_dot_product_attention call(s) rewritten to flex_attention", done)
    return done


def _static_heads(args) -> None:
    """Head counts and head dims fixed to the example's (Dynamo guards, so
    other values recompile), as flex_attention marks them static when Dynamo
    traces it: the lowering derives the GQA group and picks its kernels
    from them. Sequence lengths and batch stay dynamic."""
    q, k, v = (_val(args[n]) for n in ("query", "key", "value"))
    for size in (q.shape[1], k.shape[1], q.shape[3], v.shape[3]):
        int(size)


def _bind(node):
    """SDPA's arguments of `node` by name, defaults filled; None if they do
    not bind."""
    if len(node.args) > len(_SDPA_PARAMS):
        return None
    args = dict(_SDPA_DEFAULTS)
    args.update(zip(_SDPA_PARAMS, node.args))
    for k, v in node.kwargs.items():
        if k not in _SDPA_PARAMS or (k in _SDPA_PARAMS[:len(node.args)]):
            return None
        args[k] = v
    return args if all(p in args for p in _SDPA_PARAMS[:3]) else None


def _val(v):
    """The example value Dynamo recorded for a graph value (or `v`)."""
    import torch

    if isinstance(v, torch.fx.Node):
        return v.meta.get("example_value", v.meta.get("val"))
    return v


def _refusal(args):
    """Why flex_attention cannot express this SDPA call, or None."""
    import torch

    for name in ("dropout_p", "is_causal", "enable_gqa"):
        if isinstance(args[name], torch.fx.Node):
            return f"{name} is not a Python constant"
    if args["dropout_p"] != 0:
        return f"dropout_p={args['dropout_p']!r} (flex_attention has no dropout)"
    scale = _val(args["scale"])
    if scale is not None and not isinstance(scale, (int, float, torch.SymFloat)):
        return f"scale is a {type(scale).__name__}"
    q, k, v = (_val(args[n]) for n in ("query", "key", "value"))
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return "query, key or value has no recorded tensor value"
    if any(t.dim() != 4 for t in (q, k, v)):
        return f"query/key/value of ranks {q.dim()}/{k.dim()}/{v.dim()} (flex_attention needs 4-D)"
    if any(t.is_nested or t.layout != torch.strided for t in (q, k, v)):
        return "nested or non-strided query/key/value"
    if any(str(t.dtype).replace("torch.", "") not in DTYPES or t.dtype != q.dtype for t in (q, k, v)):
        return f"query/key/value dtypes {q.dtype}/{k.dtype}/{v.dtype}"
    if any(t.device.type != "cpu" for t in (q, k, v)):
        return f"device {q.device}"
    hq, hkv = q.shape[1], k.shape[1]
    if k.shape[1] != v.shape[1]:
        return "key and value have different head counts"
    if not args["enable_gqa"] and hq != hkv:
        return f"{hq} query heads and {hkv} key/value heads without enable_gqa"
    if hq % hkv != 0:
        return f"{hq} query heads not a multiple of {hkv} key/value heads"
    mask = args["attn_mask"]
    if mask is not None:
        if args["is_causal"]:
            return "both attn_mask and is_causal (SDPA refuses them)"
        m = _val(mask)
        if not isinstance(m, torch.Tensor):
            return f"attn_mask is a {type(m).__name__}"
        if m.requires_grad:
            return "attn_mask requires grad"
        if m.dtype != torch.bool and m.dtype != q.dtype:
            return f"attn_mask of dtype {m.dtype} with query of {q.dtype}"
        if m.dim() > 4 or not _broadcasts(m.shape, (q.shape[0], hq, q.shape[2], k.shape[2])):
            return f"attn_mask of shape {tuple(m.shape)} does not broadcast to {(q.shape[0], hq, q.shape[2], k.shape[2])}"
    return None


def _broadcasts(shape, target) -> bool:
    shape = (1,) * (len(target) - len(shape)) + tuple(shape)
    return all(_static_eq(s, 1) or _static_eq(s, t) for s, t in zip(shape, target))


def _static_eq(a, b) -> bool:
    """a == b, also for symbolic sizes (no guard: unknown counts as unequal)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(a == b))


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _mask_buffer(mask):
    """(buffer, keep): the mask with its size-1 dims dropped (a view, never
    expanded) and which of (b, h, q_idx, kv_idx) index it, broadcasting as
    SDPA does."""
    missing = 4 - mask.dim()
    shape = (1,) * missing + tuple(mask.shape)
    keep = tuple(d for d in range(4) if not _static_eq(shape[d], 1))
    for d in reversed(range(missing, 4)):
        if d not in keep:
            mask = mask.select(d - missing, 0)
    return mask, keep


def _read(m, keep, b, h, q_idx, kv_idx):
    idx = (b, h, q_idx, kv_idx)
    return m[tuple(idx[d] for d in keep)] if keep else m


def sdpa_flex(query, key, value, attn_mask=None, *, is_causal=False, scale=None, enable_gqa=False):
    """`scaled_dot_product_attention(query, key, value, attn_mask,
    is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)` through
    torch's flex_attention higher-order op while torch.export or
    AOTAutograd trace it (fake tensors). Called on real tensors (the graph
    run in eager PyTorch: a graph our pipeline refused, a call too large
    for it), it is torch's SDPA itself, whose CPU kernels tile the scores."""
    import torch
    from torch._guards import detect_fake_mode
    from torch._higher_order_ops.flex_attention import flex_attention as flex_hop
    from torch.nn.attention.flex_attention import _apply_kernel_options, _create_empty_block_mask

    if detect_fake_mode((query, key, value)) is None and not torch.compiler.is_compiling():
        return torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    score_mod, buffers = _identity, ()
    if attn_mask is not None:
        buf, keep = _mask_buffer(attn_mask)
        buffers = (buf,)
        if attn_mask.dtype == torch.bool:
            def score_mod(score, b, h, q_idx, kv_idx, m):
                return torch.where(_read(m, keep, b, h, q_idx, kv_idx), score, -float("inf"))
        else:
            def score_mod(score, b, h, q_idx, kv_idx, m):
                return score + _read(m, keep, b, h, q_idx, kv_idx)
    uniform = None
    if attn_mask is not None:
        block_mask, uniform = sdpa_mask_blocks.block_mask(attn_mask, query, key)
    else:
        block_mask = _create_empty_block_mask(query, key).as_tuple()
    if is_causal:
        block_mask = block_mask[:-1] + (_causal,)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    elif isinstance(scale, torch.SymFloat):
        # A Python float Dynamo made dynamic (`.item()` of an input): the
        # guard fails torch.export on a data-dependent value, and the
        # backend compiles again with the example's value (specialize.py).
        scale = float(scale)
    kernel_options = _apply_kernel_options(query, key, value, False, None)
    with _no_fake_cache(query):
        out, _, _ = flex_hop(query, key, value, score_mod, block_mask, scale, kernel_options, buffers, ())
    return sdpa_mask_blocks.fix_uniform_rows(out, uniform, value)


class _no_fake_cache:
    """The fake tensor mode tracing us (torch.export, AOTAutograd) without
    its dispatch cache while the modifiers are traced: in torch 2.13 a cache
    hit on the view `aten.index` makes of a captured mask with symbolic
    sizes rebuilds its storage size as an expression the modifier's tracer
    cannot proxy ("mul expected 2 arguments, got 3"), and the export fails."""

    def __init__(self, tensor):
        from torch._guards import detect_fake_mode

        self.mode = detect_fake_mode((tensor,))

    def __enter__(self):
        if self.mode is not None:
            self.saved, self.mode.cache_enabled = self.mode.cache_enabled, False
        return self

    def __exit__(self, *exc):
        if self.mode is not None:
            self.mode.cache_enabled = self.saved
        return False


def _identity(score, b, h, q_idx, kv_idx):
    return score
