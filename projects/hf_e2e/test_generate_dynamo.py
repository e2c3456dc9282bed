"""`model.generate()` with `model.forward = torch.compile(model.forward,
backend="torch_mlir_flex")`, as transformers documents torch.compile: the
tokens equal the uncompiled model's (greedy), no captured graph runs in
eager PyTorch, and a second generate() compiles nothing.

The reference is HF eager attention for the DynamicCache; for the static
cache it is the same flex model uncompiled: transformers' flex path with
a StaticCache differs from its eager attention from the first decode step
on (logits by ~0.2 here, transformers 5.25), and the compiled model must
reproduce the program it was given.

    PYTHONPATH=python pytest -q projects/hf_e2e/test_generate_dynamo.py
"""

import logging

import pytest
import torch

pytest.importorskip("transformers")

from torch_mlir_flex import dynamo, log  # noqa: E402

from .families import BY_NAME  # noqa: E402
from .harness import build_models  # noqa: E402

dynamo.register()
NEW_TOKENS = 24


def _generate(model, ids, mask, cache):
    kw = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, **kw)


def _prompt(batch):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 128, (batch, 9), generator=g)
    mask = torch.ones_like(ids)
    if batch > 1:  # left padding
        mask[1, :3] = 0
        ids[1, :3] = 0
    return ids, mask


# Both caches and a padded batch in CI; the other families with FLEX_TESTS_FULL=1.
@pytest.mark.parametrize("name,batch,cache", [
    pytest.param("llama", 1, "dynamic", marks=pytest.mark.extended), ("llama", 1, "static"),
    pytest.param("mistral", 1, "dynamic", marks=pytest.mark.extended), ("qwen2", 2, "dynamic"),
    pytest.param("gemma2", 1, "dynamic", marks=pytest.mark.extended), pytest.param("phi3", 2, "dynamic", marks=pytest.mark.extended),
])
def test_generate_compiled_matches_eager(name, batch, cache):
    flex, eager = build_models(BY_NAME[name])
    ids, mask = _prompt(batch)
    want = _generate(flex if cache == "static" else eager, ids, mask, cache)
    torch._dynamo.reset()
    flex.forward = torch.compile(flex.forward, backend="torch_mlir_flex")
    before = dict(dynamo.stats)
    with log.capture(logging.WARNING) as warned:
        got = _generate(flex, ids, mask, cache)
        after_first = dict(dynamo.stats)
        again = _generate(flex, ids, mask, cache)
    delta = {k: dynamo.stats[k] - before.get(k, 0) for k in dynamo.stats}
    assert torch.equal(got, want), f"{name}: tokens differ from HF eager\n{got}\n{want}"
    assert torch.equal(again, want)
    assert delta.get("eager", 0) == 0, warned
    assert warned == []
    # A second generate() of the same lengths compiles nothing new.
    assert dynamo.stats["graphs"] == after_first["graphs"]


@pytest.mark.parametrize("cache,most", [("dynamic", None), pytest.param("static", 2, marks=pytest.mark.extended)])
def test_compilations_do_not_grow_with_tokens(cache, most):
    """Decode compiles at most twice per captured graph (the length first
    seen, then one dynamic graph after Dynamo's automatic dynamic): 64 new
    tokens compile exactly what 4 do; the static cache compiles 2 graphs."""
    flex, _ = build_models(BY_NAME["llama"])
    flex.forward = torch.compile(flex.forward, backend="torch_mlir_flex")
    ids, mask = _prompt(1)
    counts = []
    for n in (4, 64):
        torch._dynamo.reset()
        before = dynamo.stats["graphs"]
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False)
        if cache == "static":
            kw["cache_implementation"] = "static"
        with torch.no_grad():
            flex.generate(ids, attention_mask=mask, **kw)
        counts.append(dynamo.stats["graphs"] - before)
    assert counts[0] == counts[1], counts
    if most is not None:
        assert counts[1] <= most, counts


def test_static_cache_after_a_shorter_generate():
    """generate(1) then generate(32) with a static cache in one process (the
    serving benchmark's order and model: a new cache, a recompilation):
    tokens equal the uncompiled model's. A scatter lowering that updated
    temporaries in place gave other tokens from the second on."""
    from benchmarks.serve.child import _generate as serve_generate
    from benchmarks.serve.configs import ServeConfig, build

    model, ids, mask = build(ServeConfig("tiny", "f32", 1, 128))
    want = serve_generate(model, ids, mask, 32, False)
    torch._dynamo.reset()
    model.forward = torch.compile(model.forward, backend="torch_mlir_flex")
    serve_generate(model, ids, mask, 1, True)
    assert torch.equal(serve_generate(model, ids, mask, 32, True), want)
