"""transformers models with attn_implementation="flex_attention" trained one
step through torch.compile(model, backend="torch_mlir_flex"): the loss and
every parameter's gradient equal the same model with HF eager attention,
and no graph runs in eager PyTorch (docs/training.md)."""

import logging

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch

from torch_mlir_flex import dynamo, log

from .families import BY_NAME
from .harness import build_models, make_inputs

dynamo.register()


@pytest.mark.parametrize("name", ["llama", pytest.param("qwen2", marks=pytest.mark.extended), pytest.param("mistral", marks=pytest.mark.extended), "gemma2"])
def test_one_training_step_matches_eager_attention(name):
    family = BY_NAME[name]
    flex, eager = build_models(family)
    flex.train()
    eager.train()
    inputs = make_inputs(family, 1)
    labels = inputs["input_ids"].clone()
    torch._dynamo.reset()
    before = dict(dynamo.stats)
    with log.capture(logging.WARNING) as warned:
        loss = torch.compile(flex, backend=dynamo.NAME)(**inputs, labels=labels).loss
        loss.backward()
    ref = eager(**inputs, labels=labels).loss
    ref.backward()
    assert abs(loss.item() - ref.item()) <= 1e-5 * abs(ref.item())
    for (n, p), (_, r) in zip(flex.named_parameters(), eager.named_parameters()):
        assert p.grad is not None, n
        scale = r.grad.abs().max().item() + 1e-12
        assert (p.grad - r.grad).abs().max().item() <= 1e-4 * scale, n
    delta = {k: dynamo.stats[k] - before.get(k, 0) for k in ("eager", "backward")}
    assert delta["eager"] == 0, warned
    assert delta["backward"] >= 1
