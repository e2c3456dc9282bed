"""Fewer vocabulary-sized buffers in a training step's backward graph.

A causal LM with a large vocabulary (Qwen2: 151936 tokens) has two kinds
of buffers the size of the vocabulary that AOTAutograd's backward graph
makes more of than eager autograd does (issue #42, "peak RSS <= eager's +
10 %"):

- **the tied embedding's gradient.** With `tie_word_embeddings`, the
  weight's two gradients (lm_head's product, the embedding's scatter-add)
  are summed in the graph: `add(g_head, index_put(zeros, idx, rows,
  accumulate=True))`, a weight-sized zero fill (519 MiB for Qwen2-0.5B's
  151936 x 896 in float32) and a third weight-sized buffer, where eager
  accumulates into the gradient it has. `fold_zeros_scatter_add`
  accumulates the rows into the head's gradient instead:
  `index_put(g_head, idx, rows, accumulate=True)`.
- **cross-entropy's one-hot.** `nll_loss_backward` is `scatter(zeros_like
  (logp), 1, target, -w)`: a logits-sized zero fill (297 MiB for 512 x
  151936 float32) and a scatter into it, which no elementwise loop fuses.
  `one_hot_as_compare` makes it `(arange(C) == target).float() * -w`, an
  elementwise expression the fused loops compute where they read it.

Both keep the values (the first adds the same rows to the same sums in
another order: float rounding only) and apply only where the pattern's
sizes, dtypes and uses match; `apply(gm)` runs them on a graph
(training.prepare_graph; `dynamo.stats["vocab_one_hot"]` and
`["vocab_scatter_add"]` count them). TORCH_MLIR_FLEX_VOCAB_BUFFERS=0
turns them off (part of the AOTAutograd cache's key, as every
TORCH_MLIR_FLEX_* variable: aot_cache.py).
"""

import os

import torch

aten = torch.ops.aten

# Producers of an all-zeros tensor (the scatter-add's base).
_ZEROS = (aten.new_zeros.default, aten.zeros.default, aten.zeros_like.default)
# Scatter-adds of rows into their first operand: op -> position of the accumulate flag (None: always).
_ACCUMULATE = {
    aten._unsafe_masked_index_put_accumulate.default: None,
    aten.index_put.default: 3,
    aten._unsafe_index_put.default: 3,
}


def _val(n):
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _is_zeros(n) -> bool:
    if not (isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in _ZEROS):
        return False
    return len(n.users) == 1


def _accumulates(n) -> bool:
    if not (isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in _ACCUMULATE):
        return False
    pos = _ACCUMULATE[n.target]
    if pos is not None:
        flag = n.args[pos] if len(n.args) > pos else n.kwargs.get("accumulate", False)
        if flag is not True:
            return False
    return _is_zeros(n.args[0]) and len(n.users) == 1


def fold_zeros_scatter_add(gm) -> int:
    """`add(x, scatter_add(zeros, ...))` (either order, alpha 1) ->
    `scatter_add(x, ...)` when x has the sum's size, strides and dtype and
    the zeros and the scatter-add have no other use. Returns the number of
    sums rewritten."""
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not aten.add.Tensor or n.kwargs.get("alpha", 1) != 1:
            continue
        if len(n.args) != 2:
            continue
        for base, acc in (n.args, n.args[::-1]):
            out, vb, va = _val(n), _val(base), _val(acc)
            if out is None or vb is None or va is None or not _accumulates(acc):
                continue
            if vb.shape != out.shape or vb.dtype != out.dtype or va.dtype != out.dtype:
                continue
            if vb.stride() != va.stride():
                continue
            zeros = acc.args[0]
            with gm.graph.inserting_before(n):
                new = gm.graph.call_function(acc.target, (base,) + tuple(acc.args[1:]), dict(acc.kwargs))
            new.meta.update(n.meta)
            n.replace_all_uses_with(new)
            gm.graph.erase_node(n)
            gm.graph.erase_node(acc)
            gm.graph.erase_node(zeros)
            count += 1
            break
    return count


def _one_hot_scatter(n):
    """(zeros_like node, target node, value) when `n` is `scatter.value(
    zeros_like(x), 1 or -1, target [N, 1] int64, value)` over a 2-D x; else None."""
    if n.op != "call_function" or n.target is not aten.scatter.value or len(n.args) != 4:
        return None
    base, dim, target, value = n.args
    if not (isinstance(base, torch.fx.Node) and base.target is aten.zeros_like.default and len(base.users) == 1):
        return None
    vx, vt = _val(n), _val(target)
    if vx is None or vt is None or vx.dim() != 2 or dim not in (1, -1) or not isinstance(value, (int, float)):
        return None
    if vt.dim() != 2 or vt.shape[1] != 1 or vt.dtype not in (torch.int64, torch.int32) or not vx.is_floating_point():
        return None
    return base, target, value


def one_hot_as_compare(gm) -> int:
    """`scatter(zeros_like(x), 1, target, v)` over x [N, C] with target
    [N, 1] -> `(arange(C) == target).to(x.dtype) * v`: the same values (one v per
    row at its target's column; a target outside [0, C) matches no column,
    where the scatter would have written out of bounds). Returns the number
    of scatters rewritten."""
    count = 0
    g = gm.graph
    for n in list(g.nodes):
        found = _one_hot_scatter(n)
        if found is None:
            continue
        base, target, value = found
        vx = _val(n)
        cols = vx.shape[1]
        with g.inserting_before(n):
            iota = g.call_function(aten.arange.start_step, (0, cols, 1),
                                   dict(dtype=_val(target).dtype, device=vx.device))
            hit = g.call_function(aten.eq.Tensor, (iota, target))
            as_float = g.call_function(aten._to_copy.default, (hit,), dict(dtype=vx.dtype))
            new = g.call_function(aten.mul.Tensor, (as_float, value))
        _set_vals(gm, [iota, hit, as_float, new])
        n.replace_all_uses_with(new)
        g.erase_node(n)
        g.erase_node(base)
        count += 1
    return count


def _set_vals(gm, nodes) -> None:
    """meta["val"] of new nodes, computed from their inputs' fake values."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode([n.meta.get("val") for n in gm.graph.nodes if _val(n) is not None])
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in sorted(nodes, key=order.get):
        args = torch.fx.node.map_arg(node.args, lambda a: a.meta["val"])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: a.meta["val"])
        if fake_mode is None:
            raise RuntimeError("vocab_buffers: the graph carries no fake values")
        with fake_mode:
            node.meta["val"] = node.target(*args, **kwargs)


def apply(gm) -> dict:
    """Both rewrites on `gm` (recompiled when one applied); the counts."""
    if os.environ.get("TORCH_MLIR_FLEX_VOCAB_BUFFERS", "1") == "0":
        return {}
    from . import stats

    done = {"one_hot": one_hot_as_compare(gm), "scatter_add": fold_zeros_scatter_add(gm)}
    stats.update({f"vocab_{k}": v for k, v in done.items() if v})
    if any(done.values()):
        gm.graph.lint()
        gm.recompile()
    return done


def decompositions() -> dict:
    """Decompositions for AOTAutograd's joint graph (training.backward_
    decompositions): `_log_softmax` as its primitives (max, subtract, exp,
    sum, log), so that the min-cut partitioner saves the logits the model
    returns anyway and two numbers per row for the backward, which
    recomputes the log-probabilities where it reads them, rather than a
    logits-sized float32 result (297 MiB per step at 512 x 151936)."""
    from torch._decomp import decomposition_table

    if os.environ.get("TORCH_MLIR_FLEX_VOCAB_BUFFERS", "1") == "0":
        return {}
    return {aten._log_softmax.default: decomposition_table[aten._log_softmax.default]}


# Ops a recomputed log-softmax input may be reached through (one tensor operand).
_PASS_THROUGH = (aten.view.default, aten._unsafe_view.default, aten._to_copy.default, aten.clone.default)


def _log_softmax_nodes(node):
    """The forward nodes of a decomposed log-softmax ending at `node`
    (`shifted - log(sum(exp(shifted)))`, `shifted = x - amax(x)`) that
    the backward can recompute from x and the two reductions: `shifted`,
    `node`, and the casts and views x comes through; None when `node` is
    not one."""
    def call(n, *targets):
        return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in targets

    if not call(node, aten.sub.Tensor) or len(node.args) != 2:
        return None
    shifted, lse = node.args
    if not (call(lse, aten.log.default) and call(lse.args[0], aten.sum.dim_IntList)
            and call(lse.args[0].args[0], aten.exp.default) and lse.args[0].args[0].args[0] is shifted):
        return None
    if not (call(shifted, aten.sub.Tensor) and call(shifted.args[1], aten.amax.default)
            and shifted.args[1].args[0] is shifted.args[0]):
        return None
    out = [shifted, node]
    x = shifted.args[0]
    while call(x, *_PASS_THROUGH) and isinstance(x.args[0], torch.fx.Node):
        out.append(x)
        x = x.args[0]
    return out


def recompute_log_softmax(joint, joint_inputs=None):
    """AOTAutograd's joint pass (`joint_pass`): the elementwise nodes of
    each decomposed log-softmax are tagged for recomputation, so the min-cut
    partitioner saves its input (a model's logits, which the forward
    returns anyway) and its two per-row reductions instead of the
    log-probabilities: for a 512 x 151936 float32 cross-entropy, 297 MiB
    less saved and not written by the forward. Returns the graph."""
    from torch.utils.checkpoint import CheckpointPolicy

    tagged = 0
    for n in list(joint.graph.nodes):
        found = _log_softmax_nodes(n)
        if found is None:
            continue
        for m in found:
            if m.meta.get("recompute") is None:
                m.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
        tagged += 1
    if tagged:
        from . import stats

        stats["vocab_log_softmax_recomputed"] += tagged
    return joint


def joint_pass():
    """A context in which AOTAutograd runs `recompute_log_softmax` on the
    joint graph before partitioning it (after any joint pass already set);
    a no-op context when TORCH_MLIR_FLEX_VOCAB_BUFFERS=0."""
    import contextlib

    import torch._functorch.config as functorch_config

    if os.environ.get("TORCH_MLIR_FLEX_VOCAB_BUFFERS", "1") == "0":
        return contextlib.nullcontext()
    before = functorch_config.joint_custom_pass

    def run(joint, joint_inputs):
        if callable(before):
            joint = before(joint, joint_inputs)
        return recompute_log_softmax(joint, joint_inputs)

    return functorch_config.patch(joint_custom_pass=run)


def with_joint_pass(fn):
    """`fn` run inside `joint_pass()` (training.aot_backend's `aot`)."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with joint_pass():
            return fn(*args, **kwargs)

    return run
