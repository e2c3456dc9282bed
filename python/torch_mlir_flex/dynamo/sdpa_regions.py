"""SDPA calls that `sdpa_as_flex.rewrite` does not reach on its own:
those inside activation-checkpoint bodies and those under autocast.

`flex_backend` rewrites the SDPA calls of Dynamo's top-level graph. Two
kinds of training graphs hide SDPA calls from it, and AOTAutograd then
hands us `_scaled_dot_product_flash_attention_for_cpu` and its backward,
which torch-mlir cannot lower (the graph ran in eager PyTorch):

- `torch.utils.checkpoint.checkpoint(fn, ...)` (transformers'
  `gradient_checkpointing_enable()`): Dynamo records
  `torch.ops.higher_order.tag_activation_checkpoint(body, ...)`, with the
  layer's SDPA call in the nested graph `body`, which is rewritten too (its
  flex_attention calls are traced by AOTAutograd inside the checkpoint and
  recomputed in the backward). Bodies of other higher-order ops are left
  alone. Left as SDPA, the flash kernel is also a seeded random op to
  AOTAutograd's checkpointing (`run_and_save_rng_state`, which torch-mlir
  cannot import).
- `torch.autocast(device_type="cpu", dtype=torch.bfloat16)`: autocast casts
  SDPA's floating-point arguments to bfloat16 when it is dispatched, but
  Dynamo's graph records the call with the dtypes before the cast (a Llama:
  rotary-embedded q and k in float32, v from a bfloat16 linear), which
  sdpa_as_flex refuses (q, k, v of different dtypes). `add_autocast_casts`
  writes autocast's cast into the graph (`.to(dtype)` of each float32 /
  float16 / bfloat16 argument; float64 ones stay, as autocast leaves them)
  for calls where autocast is on for the CPU: the state when Dynamo called
  us, changed by the `torch.amp._enter_autocast` / `_exit_autocast` nodes
  of the graph and inherited by nested bodies.

`prepare(gm)` does both (then rewrites the top-level graph again: calls
refused for their dtypes before the casts).
"""

from typing import List, Optional, Tuple

from ..log import get_logger

log = get_logger("dynamo")

# (enabled, dtype) of CPU autocast.
_State = Tuple[bool, Optional[object]]


def prepare(gm) -> int:
    """Autocast casts for SDPA calls (this graph and its checkpoint
    bodies), then `sdpa_as_flex.rewrite` on each checkpoint body and on
    `gm` again; returns how many calls were rewritten here."""
    import torch

    from .sdpa_as_flex import enabled, rewrite

    if not enabled():
        return 0
    state = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    add_autocast_casts(gm, state)
    return _rewrite_bodies(gm) + rewrite(gm)


def _rewrite_bodies(gm) -> int:
    """`sdpa_as_flex.rewrite` on the checkpoint bodies of `gm`, nested ones
    included. Other higher-order ops' bodies (cond, while_loop, the
    modifiers of flex_attention) are left as they are."""
    from .sdpa_as_flex import rewrite

    done = 0
    for _, body in checkpoint_bodies(gm):
        done += _rewrite_bodies(body) + rewrite(body)
    return done


def checkpoint_bodies(gm):
    """(node, body graph module) of each `tag_activation_checkpoint` call
    of `gm` (Dynamo's record of torch.utils.checkpoint.checkpoint)."""
    import torch

    hop = getattr(torch.ops.higher_order, "tag_activation_checkpoint", None)
    for node in gm.graph.nodes:
        if node.op == "call_function" and hop is not None and node.target is hop and node.args:
            body = node.args[0]
            if isinstance(body, torch.fx.Node) and body.op == "get_attr":
                sub = getattr(gm, body.target, None)
                if isinstance(sub, torch.fx.GraphModule):
                    yield node, sub


def add_autocast_casts(gm, state: _State) -> int:
    """Inserts autocast's casts of SDPA's arguments where CPU autocast is on
    (see the module docstring); returns how many casts were inserted."""
    import torch

    from .sdpa_as_flex import sdpa_targets

    targets = sdpa_targets()
    bodies = dict(checkpoint_bodies(gm))
    stack: List[_State] = [state]
    added = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch.amp._enter_autocast:
            stack.append(_entered(node.args, stack[-1]))
        elif node.target is torch.amp._exit_autocast:
            if len(stack) > 1:
                stack.pop()
        elif node.target in targets:
            on, dtype = stack[-1]
            if on and dtype in (torch.bfloat16, torch.float16):
                added += _cast_arguments(gm, node, dtype)
        elif node in bodies:
            # A checkpointed function runs in the state of its call.
            added += add_autocast_casts(bodies[node], stack[-1])
    if added:
        gm.recompile()
    return added


def _entered(args, outer: _State) -> _State:
    """The state inside `torch.amp._enter_autocast(device_type, dtype,
    enabled, cache_enabled)`: another device's leaves the CPU's as it was."""
    import torch

    device, dtype, on = (list(args) + [None, None, True])[:3]
    if device != "cpu":
        return outer
    return bool(on), dtype if dtype is not None else torch.get_autocast_dtype("cpu")


def _cast_arguments(gm, node, dtype) -> int:
    """`arg.to(dtype)` before `node` for each of its tensor arguments of a
    dtype autocast casts (example values from Dynamo's fake mode)."""
    import torch

    added = 0

    def cast(a):
        nonlocal added
        if not isinstance(a, torch.fx.Node):
            return a
        val = a.meta.get("example_value", a.meta.get("val"))
        if not isinstance(val, torch.Tensor) or val.dtype not in (torch.float32, torch.float16, torch.bfloat16) \
                or val.dtype == dtype:
            return a
        with gm.graph.inserting_before(node):
            new = gm.graph.call_method("to", (a, dtype))
        new.meta["example_value"] = _cast_value(val, dtype)
        added += 1
        return new

    node.args = tuple(cast(a) for a in node.args)
    node.kwargs = {k: cast(v) for k, v in node.kwargs.items()}
    if added:
        log.debug("torch_mlir_flex: %s: %d argument(s) cast to %s as autocast does", node.name, added, dtype)
    return added


def _cast_value(val, dtype):
    """`val.to(dtype)` in the fake mode `val` belongs to (grad kept as the
    cast keeps it)."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return val.to(dtype)
    with mode:
        return val.to(dtype)
