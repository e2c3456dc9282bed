"""dynamo/vocab_buffers.py: the backward graph's vocabulary-sized buffers
(docs/training.md "The Qwen2-0.5B shape"). The two rewrites on small
traced graphs (values unchanged, the zero fills gone, patterns that do not
match left alone), then a tiny Qwen2 with tied embeddings and a vocabulary
of 4096 trained one step compiled: both rewrites applied to its backward,
its loss and gradients eager's, and the backward's heap peak a logits-sized
buffer below the unrewritten graph's.

    PYTHONPATH=python pytest -q test/python/dynamo/test_vocab_buffers.py
"""

import torch_mlir_flex  # noqa: F401  (before torch-mlir)

import copy

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torch_mlir_flex import dynamo
from torch_mlir_flex.dynamo import vocab_buffers

dynamo.register()
aten = torch.ops.aten


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _trace(fn, *args):
    return make_fx(fn, tracing_mode="fake")(*args)


def test_scatter_add_into_zeros_folds():
    def f(head, idx, rows):
        acc = torch.zeros_like(head).index_put((idx,), rows, accumulate=True)
        return head + acc

    head, rows = torch.randn(50, 8), torch.randn(12, 8)
    idx = torch.tensor([3, 7, 3, 0, 49, 7, 7, 1, 2, 3, 40, 0])
    gm = _trace(f, head, idx, rows)
    assert vocab_buffers.fold_zeros_scatter_add(gm) == 1
    gm.recompile()
    targets = _targets(gm)
    assert aten.zeros_like.default not in targets and aten.add.Tensor not in targets, targets
    torch.testing.assert_close(gm(head, idx, rows), f(head, idx, rows), rtol=1e-6, atol=1e-6)


def test_scatter_add_kept_when_zeros_used_elsewhere_or_dtypes_differ():
    def shared(head, idx, rows):
        z = torch.zeros_like(head)
        return head + z.index_put((idx,), rows, accumulate=True), z.sum()

    def widened(head, idx, rows):  # a bf16 head's sum is float32: no fold into it
        return head.float() * 2 + torch.zeros(50, 8).index_put((idx,), rows, accumulate=True)

    idx, rows = torch.tensor([1, 2]), torch.randn(2, 8)
    assert vocab_buffers.fold_zeros_scatter_add(_trace(shared, torch.randn(50, 8), idx, rows)) == 0
    gm = _trace(widened, torch.randn(50, 8, dtype=torch.bfloat16), idx, rows)
    assert vocab_buffers.fold_zeros_scatter_add(gm) == 1  # the product is float32: folds into it
    gm.recompile()
    head = torch.randn(50, 8, dtype=torch.bfloat16)
    torch.testing.assert_close(gm(head, idx, rows), widened(head, idx, rows))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nll_loss_one_hot_becomes_compare(dtype):
    def f(logp, target, grad):
        return aten.nll_loss_backward(grad, logp, target, None, 1, -100, torch.tensor(1.0, dtype=logp.dtype))

    from torch._decomp import decomposition_table

    logp = torch.randn(6, 33).log_softmax(-1).to(dtype)
    target = torch.tensor([0, 32, 5, -100, 5, 17])
    grad = torch.tensor(0.25, dtype=dtype)
    gm = make_fx(f, decomposition_table={aten.nll_loss_backward.default:
                                         decomposition_table[aten.nll_loss_backward.default]},
                 tracing_mode="fake")(logp, target, grad)
    assert aten.scatter.value in _targets(gm)
    want = f(logp, target, grad)
    assert vocab_buffers.one_hot_as_compare(gm) == 1
    gm.recompile()
    targets = _targets(gm)
    assert aten.scatter.value not in targets and aten.zeros_like.default not in targets, targets
    torch.testing.assert_close(gm(logp, target, grad), want, rtol=0, atol=0)


def test_log_softmax_recomputed_not_saved():
    """The joint pass tags a decomposed log-softmax's elementwise nodes:
    the min-cut partitioner saves the logits (returned anyway) and the two
    reductions, not the log-probabilities."""
    from torch._decomp import decomposition_table
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    saved = {}

    def fw(gm, _):
        outs = gm.graph.output_node().args[0]
        saved["shapes"] = [(tuple(o.meta["val"].shape), o.meta["val"].dtype) for o in outs[2:]]
        return gm

    def f(logits, target):
        return logits, torch.nn.functional.cross_entropy(logits.float(), target)

    logits = torch.randn(8, 1000, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, 1000, (8,))
    with vocab_buffers.joint_pass():
        g = aot_function(f, fw_compiler=fw, bw_compiler=lambda gm, _: gm,
                         partition_fn=min_cut_rematerialization_partition,
                         decompositions={**vocab_buffers.decompositions(),
                                         aten._log_softmax_backward_data.default:
                                         decomposition_table[aten._log_softmax_backward_data.default]})
        out, loss = g(logits, target)
    # Saved: the bf16 logits and per-row values, no float32 8 x 1000 tensor.
    assert ((8, 1000), torch.float32) not in saved["shapes"], saved
    loss.backward()
    ref = logits.detach().clone().requires_grad_()
    torch.nn.functional.cross_entropy(ref.float(), target).backward()
    torch.testing.assert_close(logits.grad, ref.grad)


def test_turned_off(monkeypatch):
    def f(head, idx, rows):
        return head + torch.zeros_like(head).index_put((idx,), rows, accumulate=True)

    monkeypatch.setenv("TORCH_MLIR_FLEX_VOCAB_BUFFERS", "0")
    gm = _trace(f, torch.randn(5, 2), torch.tensor([1]), torch.randn(1, 2))
    assert vocab_buffers.apply(gm) == {}
    assert aten.zeros_like.default in _targets(gm)


VOCAB, SEQ = 4096, 16


def _qwen2():
    import transformers

    torch.manual_seed(0)
    conf = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    tie_word_embeddings=True, use_cache=False)
    return transformers.Qwen2ForCausalLM._from_config(conf, attn_implementation="sdpa").train()


def test_tiny_qwen2_tied_large_vocab(fresh, monkeypatch):
    """One compiled step: both rewrites in its backward, loss and gradients
    eager's; the backward's heap peak lower than with the rewrites off
    (the same graphs compiled again, TORCH_MLIR_FLEX_VOCAB_BUFFERS=0)."""
    from torch_mlir_flex.backend import blas

    delta, warned = fresh
    model = _qwen2()
    ref = copy.deepcopy(model)
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=torch.Generator().manual_seed(1))
    ids[0, 3] = -100  # an ignored label

    # The backward's own heap: what its temporaries hold at once.
    compiled = torch.compile(model, backend="torch_mlir_flex", options={"opt_level": 0})
    loss = compiled(input_ids=ids.clamp(min=0), labels=ids).loss
    blas.live_peak_bytes(reset=True)
    loss.backward()
    peak_on = blas.live_peak_bytes()
    want = ref(input_ids=ids.clamp(min=0), labels=ids).loss
    want.backward()
    assert (delta("forward"), delta("backward"), delta("eager")) == (1, 1, 0), dict(dynamo.stats)
    assert (delta("vocab_one_hot"), delta("vocab_scatter_add"), delta("vocab_log_softmax_recomputed")) == (1, 1, 1), \
        dict(dynamo.stats)
    assert not warned
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        err = (p.grad - q.grad).abs().max().item() / (q.grad.abs().max().item() + 1e-12)
        assert err <= 2e-5, (name, err)

    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_MLIR_FLEX_VOCAB_BUFFERS", "0")
    model.zero_grad(set_to_none=True)
    loss = torch.compile(model, backend="torch_mlir_flex", options={"opt_level": 0})(
        input_ids=ids.clamp(min=0), labels=ids).loss
    blas.live_peak_bytes(reset=True)
    loss.backward()
    peak_off = blas.live_peak_bytes()
    assert delta("vocab_log_softmax_recomputed") == 1  # unchanged: off
    # Off: the zero-filled one-hot, SEQ x VOCAB floats, on top.
    assert peak_on + SEQ * VOCAB * 4 <= peak_off, (peak_on, peak_off)
