"""`torch_mlir_flex.hf.generator(...).generate(...)`: compiled prefill and
decode over a static KV cache. Tokens equal transformers' `model.generate`
with eager attention (greedy; batch 2 left-padded; sliding window;
softcap), EOS stopping and sampling follow it too, one decode function
serves every position, prompts of one length bucket share a prefill, the
weights are the model's own tensors (runtime arguments), and the cache is
updated in place.

    PYTHONPATH=python:. pytest -q projects/hf_e2e/test_generate_api.py
"""

import pytest
import torch

pytest.importorskip("transformers")

import torch_mlir_flex.hf as flex_hf  # noqa: E402

from .families import BY_NAME  # noqa: E402
from .harness import build_models  # noqa: E402

NEW_TOKENS = 20
CACHE = 64


def _prompt(batch, length=9, seed=3):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 128, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    if batch > 1:  # left padding
        mask[1, :3] = 0
        ids[1, :3] = 0
    return ids, mask


def _hf(model, ids, mask, **kw):
    kw = {"max_new_tokens": NEW_TOKENS, "do_sample": False, **kw}
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, **kw)


EXTENDED = pytest.mark.extended  # other families: FLEX_TESTS_FULL=1 only


@pytest.mark.parametrize("name,batch", [
    ("llama", 1), ("qwen2", 2), pytest.param("mistral", 1, marks=EXTENDED),
    pytest.param("gemma2", 1, marks=EXTENDED), pytest.param("phi3", 2, marks=EXTENDED),
])
def test_greedy_tokens_equal_model_generate(name, batch):
    flex, eager = build_models(BY_NAME[name])
    ids, mask = _prompt(batch)
    gen = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=batch)
    got = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)
    assert torch.equal(got, _hf(eager, ids, mask, min_new_tokens=NEW_TOKENS))


def test_one_decode_function_and_shared_weights():
    flex, eager = build_models(BY_NAME["llama"])
    gen = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=1)
    for length in (5, 9, 30):  # buckets of 32: one prefill for all three
        ids, mask = _prompt(1, length, seed=length)
        got = gen.generate(ids, max_new_tokens=8, min_new_tokens=8)
        assert torch.equal(got, _hf(eager, ids, mask, max_new_tokens=8, min_new_tokens=8))
    assert list(gen._prefill) == [32]
    params = {p.data_ptr() for p in flex.parameters()}
    buffers = {b.data_ptr() for b in flex.buffers()}
    for fn in (gen.decode_fn, gen.prefill_fn(32)):
        # The weights are bound runtime arguments: the model's own tensors
        # (and its buffers, e.g. rotary frequencies).
        bound = {t.data_ptr() for t in fn.state}
        assert params <= bound <= params | buffers
        assert "dense_resource" not in fn.flex_ir and fn.flex_ir.count("arith.constant dense<") < 50
        # The cache tensors are written in place by the compiled code.
        assert len(fn.jit_function.in_place) == 2 * flex.config.num_hidden_layers


def test_eos_stops_each_sequence_and_pads():
    flex, eager = build_models(BY_NAME["qwen2"])
    ids, mask = _prompt(2)
    free = _hf(eager, ids, mask)
    eos = int(free[0, ids.shape[1] + 3])  # a token the first row produces early
    want = _hf(eager, ids, mask, eos_token_id=eos, pad_token_id=0)
    gen = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=2)
    got = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, eos_token_id=eos, pad_token_id=0)
    assert torch.equal(got, want)


def test_sampling_follows_model_generate():
    flex, eager = build_models(BY_NAME["llama"])
    ids, mask = _prompt(1)
    kw = dict(do_sample=True, temperature=0.7, top_k=20, top_p=0.9, min_new_tokens=NEW_TOKENS)
    torch.manual_seed(11)
    want = _hf(eager, ids, mask, **kw)
    gen = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=1)
    torch.manual_seed(11)
    got = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, **kw)
    assert torch.equal(got, want)


def test_the_models_mode_is_left_as_it_was():
    flex, _ = build_models(BY_NAME["llama"])
    flex.train()
    gen = flex_hf.generator(flex, max_cache_len=32, batch_size=1)
    gen.generate(torch.ones(1, 4, dtype=torch.long), max_new_tokens=2)
    assert flex.training and all(m.training for m in flex.modules())


def test_bad_requests_raise_clear_errors():
    flex, _ = build_models(BY_NAME["llama"])
    gen = flex_hf.generator(flex, max_cache_len=16, batch_size=1)
    with pytest.raises(flex_hf.FlexHFError, match="batch size 1"):
        gen.generate(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(flex_hf.FlexHFError, match="does not fit the cache of 16"):
        gen.generate(torch.ones(1, 10, dtype=torch.long), max_new_tokens=10)
    with pytest.raises(flex_hf.FlexHFError, match="left padding"):
        gen.generate(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 0, 0]]))


def test_decode_past_the_cache_raises_index_error_as_eager():
    """A cache position outside the cache: IndexError from the compiled
    decode step, as eager's index_copy_ raises, and the cache tensors keep
    their size and every slot (nothing written outside them)."""
    from torch_mlir_flex.hf.static_step import StaticStep

    flex, _ = build_models(BY_NAME["llama"])
    gen = flex_hf.generator(flex, max_cache_len=16, batch_size=1)
    args = (torch.ones(1, 1, dtype=torch.long), torch.ones(1, 16, dtype=torch.long), torch.tensor([[16]]),
            torch.tensor([16]))
    before = [t.clone() for t in gen.cache]
    with pytest.raises(IndexError):
        gen.decode_fn(*args, *gen.cache)
    assert all(torch.equal(a, b) for a, b in zip(before, gen.cache))
    with pytest.raises(IndexError), torch.no_grad():
        StaticStep(flex)(*args, *[torch.zeros_like(t) for t in gen.cache])
