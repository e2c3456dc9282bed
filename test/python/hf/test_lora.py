"""LoRA fine-tuning with peft through `torch.compile(peft_model,
backend="torch_mlir_flex")`, as users write it: a tiny random
LlamaForCausalLM, `get_peft_model` with LoRA on q_proj and v_proj, AdamW
over the trainable parameters, 3 steps.

- each step's loss equals eager PyTorch's (SDPA attention; torch refuses
  flex_attention's backward on CPU, so the flex_attention model is checked
  against eager SDPA too) within 1e-4, and the adapters end where eager's do;
- only the LoRA parameters get a .grad; the frozen base weights keep
  .grad None and their values;
- one forward and one backward graph are compiled, at the first step; the
  second and third steps compile nothing; no graph runs in eager;
- the frozen base weights are runtime arguments read from the model's own
  tensors, not constants of the compiled code: changing one in place
  changes the compiled loss as it changes eager's, with no recompile; and
  the compiled graphs keep no tensor of a weight's size of their own (their
  export's examples are freed: dynamo/training.py).
Skips only when peft (requirements-train.txt) is absent.

    python -m pytest -q -p no:cacheprovider test/python/hf/test_lora.py
"""

import gc

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from torch_mlir_flex import dynamo  # noqa: E402

dynamo.register()

VOCAB, BATCH, SEQ, STEPS = 128, 2, 16, 3


def _lora_model(attn: str):
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64)
    base = LlamaForCausalLM._from_config(cfg, attn_implementation=attn, dtype=torch.float32)
    torch.manual_seed(1)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    return peft.get_peft_model(base, config)


def _batches():
    g = torch.Generator().manual_seed(2)
    return [torch.randint(0, VOCAB, (BATCH, SEQ), generator=g) for _ in range(STEPS)]


def _train(model, fn, batches, delta=None):
    """AdamW steps over the trainable parameters: [(loss, {stat: change})]."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    out = []
    for ids in batches:
        before = {k: delta(k) for k in ("graphs", "forward", "backward", "eager")} if delta else {}
        loss = fn(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss.item(), {k: delta(k) - v for k, v in before.items()}))
    return out


def _weight_sized(shapes):
    """The plain tensors alive in the process with one of these shapes and a storage."""
    gc.collect()
    return [t for t in gc.get_objects() if type(t) in (torch.Tensor, torch.nn.Parameter)
            and tuple(t.shape) in shapes and t.untyped_storage().nbytes() > 0]


@pytest.mark.parametrize("attn", ["sdpa", "flex_attention"])
def test_lora_training_matches_eager(attn, fresh):
    delta, warned = fresh
    vocab_sized = {(VOCAB, 64), (64, VOCAB)}
    # Tensors of that size other tests left alive in this process (CI runs
    # many tests in one) are not this test's graphs' copies.
    earlier = {id(t) for t in _weight_sized(vocab_sized)}
    ref = _lora_model("sdpa")
    ours = _lora_model(attn)
    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in ref.named_parameters()]
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        assert torch.equal(p, q), n
    frozen = {n: p.detach().clone() for n, p in ours.named_parameters() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in ours.named_parameters() if p.requires_grad}
    assert lora and all(".lora_A." in n or ".lora_B." in n for n in lora)
    assert len(frozen) + len(lora) == len(names)

    batches = _batches()
    want = _train(ref, ref, batches)
    compiled = torch.compile(ours, backend=dynamo.NAME)
    got = _train(ours, compiled, batches, delta)

    for step, ((a, counts), (b, _)) in enumerate(zip(got, want)):
        assert abs(a - b) <= 1e-4, f"step {step}: loss {a} vs eager {b}"
        expect = {"graphs": 1, "forward": 1, "backward": 1} if step == 0 else {"graphs": 0, "forward": 0,
                                                                               "backward": 0}
        assert counts == {**expect, "eager": 0}, f"step {step}: {counts}"
    assert want[-1][0] != want[0][0]
    assert delta("eager") == 0 and delta("eager_calls") == 0, list(warned)

    ref_params = dict(ref.named_parameters())
    for n, p in ours.named_parameters():
        if n in frozen:
            assert p.grad is None, f"frozen {n} has a grad"
            assert torch.equal(p, frozen[n]), f"frozen {n} changed"
        else:
            assert p.grad is not None and p.grad.abs().sum() > 0, f"adapter {n} has no grad"
            torch.testing.assert_close(p, ref_params[n], rtol=1e-3, atol=1e-5, msg=n)
            assert not torch.equal(p, lora[n]), f"adapter {n} did not move"

    # The base weights are read from the model's tensors at each call: an
    # in-place change moves the compiled loss as it moves eager's, and the
    # call compiles nothing (same grad mode as training: no new guard).
    ids = batches[0]
    graphs, fw = delta("graphs"), delta("forward")
    before = compiled(input_ids=ids, labels=ids).loss.item()
    layer = "base_model.model.model.layers.{}."
    changed = [layer.format(0) + "self_attn.q_proj.base_layer.weight",  # wrapped by LoRA
               layer.format(1) + "mlp.down_proj.weight",  # plain frozen Linear
               "base_model.model.model.norm.weight"]
    with torch.no_grad():
        for model in (ours, ref):
            params = dict(model.named_parameters())
            for i, n in enumerate(changed):
                params[n].mul_(1.5 + i * 0.25)
    after = compiled(input_ids=ids, labels=ids).loss.item()
    eager_after = ref(input_ids=ids, labels=ids).loss.item()
    assert abs(after - before) > 1e-3, (before, after)
    assert abs(after - eager_after) <= 1e-4, (after, eager_after)
    assert (delta("graphs"), delta("forward")) == (graphs, fw), "an in-place weight change recompiled"
    assert delta("eager") == 0 and delta("eager_calls") == 0, list(warned)

    # No copy of a frozen weight is kept alive by the compiled graphs: the
    # export's zero-filled examples of the embedding (forward) and of the
    # LM head (backward) are freed once compiled.
    weights = {p.untyped_storage().data_ptr() for m in (ours, ref) for p in m.parameters()}
    weights |= {p.untyped_storage().data_ptr() for p in frozen.values()}  # the test's own copies
    kept = [tuple(t.shape) for t in _weight_sized(vocab_sized)
            if id(t) not in earlier and t.untyped_storage().data_ptr() not in weights]
    assert not kept, f"compiled graphs keep {len(kept)} weight-sized tensors: {kept}"
