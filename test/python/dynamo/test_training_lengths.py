"""Training a transformers flex_attention model at sequences of several
lengths compiles one graph pair per range of block counts, never eager
(dynamo/graph_inputs.py `_small`, specialize.fix_small_sizes).

At a second length Dynamo makes the sequence dynamic; the BlockMask's
tensors then have `(s0 + 127) // 128` blocks, 1 for any sequence up to
128. torch.export fixes such a dim ("0/1 specialized") and refused the
whole graph when it was marked dynamic, so the forward and backward ran in
eager. Now those dims are static for the export with a Dynamo guard: the
lengths 24 and 40 share one compilation, 200 (two blocks) has another."""

import torch_mlir_flex  # noqa: F401  (before torch-mlir)

import copy

import pytest
import torch

from torch_mlir_flex import dynamo

dynamo.register()

VOCAB = 64


def _model(arch):
    import transformers

    torch.manual_seed(0)
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
              num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256)
    conf = transformers.MistralConfig(sliding_window=20, **kw) if arch == "mistral" else transformers.LlamaConfig(**kw)
    conf._attn_implementation = "flex_attention"
    model = transformers.AutoModelForCausalLM.from_config(conf).train()
    ref = copy.deepcopy(model)
    ref.config._attn_implementation = "sdpa"
    return model, ref


@pytest.mark.parametrize("arch", ["llama", pytest.param("mistral", marks=pytest.mark.extended)])
def test_lengths_compile_per_block_count(fresh, arch):
    delta, warned = fresh
    model, ref = _model(arch)
    compiled = torch.compile(model, backend="torch_mlir_flex")
    gen = torch.Generator().manual_seed(1)
    for length in (16, 24, 200, 40):
        ids = torch.randint(0, VOCAB, (2, length), generator=gen)
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        ref_loss = ref(input_ids=ids, labels=ids).loss
        ref_loss.backward()
        assert abs(loss.item() - ref_loss.item()) < 1e-4 * abs(ref_loss.item()), length
        for p, q in zip(model.parameters(), ref.parameters()):
            scale = q.grad.abs().max().item()
            assert (p.grad - q.grad).abs().max().item() <= 1e-4 * scale, (length, p.shape)
        model.zero_grad()
        ref.zero_grad()
    assert delta("eager") == 0, warned
    # 16 static; 24 and 40 (one block) dynamic; 200 (two blocks) dynamic
    assert delta("forward") == 3 and delta("backward") == 3
    assert delta("dynamic") == 4
