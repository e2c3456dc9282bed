"""No graph breaks for a transformers flex_attention Llama compiled with
`torch.compile(model, backend="torch_mlir_flex")` (dynamo/traceable_block_mask.py,
docs/training.md "Graph breaks"): a training step is one forward and one
backward graph, inference one graph, none run in eager, with the loss,
gradients and logits of eager PyTorch (SDPA attention: eager flex_attention
has no backward on CPU). Other backends keep torch's behaviour (the
deprecation warning of `create_block_mask(_compile=True)` still breaks the
graph under backend="eager")."""

import torch_mlir_flex  # noqa: F401  (before torch-mlir)

import copy

import pytest
import torch
from torch._dynamo.utils import counters

from torch_mlir_flex import dynamo

dynamo.register()

SEQ, BATCH, VOCAB = 32, 2, 128


def _llama(attn="flex_attention"):
    import transformers

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                    max_position_embeddings=64)
    conf._attn_implementation = attn
    return transformers.LlamaForCausalLM(conf)


def _as_sdpa(model):
    ref = copy.deepcopy(model)
    ref.config._attn_implementation = "sdpa"
    return ref


def _breaks():
    return sum(counters["graph_break"].values())


def test_training_step_is_one_forward_and_one_backward_graph(fresh):
    delta, warned = fresh
    model = _llama().train()
    ref = _as_sdpa(model)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend="torch_mlir_flex")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)

    for step in range(2):
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        ref_loss = ref(input_ids=ids, labels=ids).loss
        ref_loss.backward()
        assert abs(loss.item() - ref_loss.item()) < 1e-4, step
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-4, msg=lambda m: f"{name}: {m}")
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()

    # The second step reuses the first step's graphs.
    assert (delta("graphs"), delta("forward"), delta("backward")) == (1, 1, 1)
    assert delta("eager") == 0 and delta("compiled") == 0
    assert _breaks() == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1
    assert not warned


def test_forward_with_padding_is_one_graph(fresh):
    """A training forward with an attention_mask with padding (transformers'
    flex mask builder checks it with a data-dependent `fast_all`): still one
    graph, and the logits of the unpadded positions equal eager's. (Under
    no_grad transformers' own mask path is kept: traceable_block_mask._applies.)"""
    delta, warned = fresh
    model = _llama().eval()
    ref = _as_sdpa(model)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, :5] = 0
    compiled = torch.compile(model, backend="torch_mlir_flex")
    got = compiled(input_ids=ids, attention_mask=mask).logits.detach()
    again = compiled(input_ids=ids, attention_mask=torch.ones_like(mask)).logits.detach()
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        want_again = ref(input_ids=ids, attention_mask=torch.ones_like(mask)).logits
    keep = mask.bool()
    torch.testing.assert_close(got[keep], want[keep], rtol=0, atol=1e-4)
    torch.testing.assert_close(again, want_again, rtol=0, atol=1e-4)
    assert (delta("graphs"), delta("forward"), delta("eager")) == (1, 1, 0)
    assert _breaks() == 0, dict(counters["graph_break"])
    assert not warned


def test_other_backends_keep_torch_behaviour(fresh):
    """Only our backend's tracing is changed: under backend="eager" Dynamo
    still meets torch's deprecation warning in create_block_mask(_compile=True)
    (a graph break, an error with fullgraph=True)."""
    from torch.nn.attention.flex_attention import create_block_mask

    def causal(b, h, q, kv):
        return q >= kv

    def f(x):
        return x + create_block_mask(causal, 1, 1, 16, 16, device="cpu", _compile=True).kv_num_blocks.sum()

    with pytest.raises(torch._dynamo.exc.Unsupported, match="warn"):
        torch.compile(f, backend="eager", fullgraph=True)(torch.zeros(()))
