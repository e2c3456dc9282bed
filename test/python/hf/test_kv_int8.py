"""`hf.generator(model, ..., kv_cache_dtype=torch.int8)`: the int8 KV cache
(one f32 scale per token and kv head) against eager PyTorch.

- logits of the compiled prefill and decode steps against the same model
  run eagerly with its keys and values quantized and dequantized per token
  as the cache does (written here, independently of static_step), within
  a small tolerance, and against the float-cache generator within the
  looser one of docs/quantization.md (the quantization error itself);
- greedy tokens equal to the float-cache generator's over 16 tokens
  (the top-2 margin of every step is checked to exceed the logits'
  difference, so the equality is not luck);
- the cache stays int8 and is updated in place by the compiled code.

Tiny models: a Llama with 4 heads (MHA) and a Qwen2 with 4 query heads on
2 kv heads (GQA, QKV bias).
"""

import pytest
import torch

pytest.importorskip("transformers")

import torch_mlir_flex.hf as flex_hf  # noqa: E402

CACHE = 32
NEW = 16
VOCAB = 128
# Compiled int8 cache vs eager with the same quantize-dequantize: only the
# order of sums differs (measured 1.2e-7); the margin covers a key whose
# rounding lands on the other side of .5 in the two (one int8 step).
TOL_SAME_QUANT = 1e-4
# Against the float cache: the quantization error itself (measured 1.3e-3
# and 2.2e-3 on logits of magnitude 0.6; docs/quantization.md).
TOL_FLOAT = 1e-2


def _models(config_name, kv_heads):
    import transformers

    cfg = getattr(transformers, config_name)(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv_heads, max_position_embeddings=256)
    torch.manual_seed(0)
    flex = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="flex_attention").eval()
    eager = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    eager.load_state_dict(flex.state_dict())
    return flex, eager


def _fake_quant(x):
    """x quantized to int8 per row of its last dim (symmetric, absmax / 127)
    and dequantized."""
    scale = x.abs().amax(-1, keepdim=True) / 127
    q = torch.where(scale > 0, torch.round(x / torch.where(scale > 0, scale, 1)), 0).clamp(-127, 127)
    return q * scale


def _eager_cache(n_layers):
    from transformers.cache_utils import Cache, DynamicLayer

    class FakeQuantLayer(DynamicLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            return super().update(_fake_quant(key_states), _fake_quant(value_states), *args, **kwargs)

    return Cache(layers=[FakeQuantLayer() for _ in range(n_layers)])


def _compiled_logits(gen, ids, tokens):
    """Logits of the prefill of `ids` and of decode steps feeding `tokens`
    (one per step; None: the argmax of the step before), called as
    CompiledGenerator.generate calls them. Returns (logits list, tokens)."""
    B, P = ids.shape
    mask = torch.zeros(B, gen.max_cache_len, dtype=torch.long)
    mask[:, :P] = 1
    pos = torch.arange(P).expand(B, P).contiguous()
    logits = [gen.prefill_fn(P)(ids, mask, pos, torch.arange(P), *gen.cache)]
    fed = []
    for step in range(NEW):
        tok = logits[-1].argmax(-1) if tokens is None else tokens[step]
        fed.append(tok)
        mask[:, P + step] = 1
        logits.append(gen.decode_fn(tok[:, None], mask, torch.full((B, 1), P + step),
                                    torch.tensor([P + step]), *gen.cache))
    return logits, fed


def _eager_logits(eager, ids, tokens):
    cache = _eager_cache(eager.config.num_hidden_layers)
    out = []
    with torch.no_grad():
        x = ids
        for step in range(NEW + 1):
            r = eager(input_ids=x, past_key_values=cache, use_cache=True)
            out.append(r.logits[:, -1])
            if step < NEW:
                x = tokens[step][:, None]
    return out


def _prompt(batch, length=7):
    return torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("config_name,kv_heads,batch", [("LlamaConfig", 4, 1), ("Qwen2Config", 2, 2)])
def test_logits_against_eager_quantized_and_float(config_name, kv_heads, batch):
    flex, eager = _models(config_name, kv_heads)
    ids = _prompt(batch)
    gen8 = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=batch, kv_cache_dtype=torch.int8,
                             prefill_bucket=ids.shape[1])
    got, tokens = _compiled_logits(gen8, ids, None)
    want = _eager_logits(eager, ids, tokens)
    diff = max((a - b).abs().max().item() for a, b in zip(got, want))
    assert diff < TOL_SAME_QUANT, diff
    genf = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=batch, prefill_bucket=ids.shape[1])
    floats, _ = _compiled_logits(genf, ids, tokens)
    diff_float = max((a - b).abs().max().item() for a, b in zip(got, floats))
    assert diff_float < TOL_FLOAT, diff_float
    assert diff_float > diff  # the quantization is there, and is what the eager reference does


def test_greedy_tokens_and_cache_in_place():
    flex, _ = _models("Qwen2Config", 2)
    ids = _prompt(2, 8)
    gen8 = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=2, kv_cache_dtype=torch.int8, prefill_bucket=8)
    genf = flex_hf.generator(flex, max_cache_len=CACHE, batch_size=2, prefill_bucket=8)
    ptrs = [t.data_ptr() for t in gen8.cache]
    got = gen8.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW)
    want = genf.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW)
    assert torch.equal(got, want)
    # The cache: int8 values and f32 scales, the caller's tensors, written
    # by the compiled functions (prefill: 8 slots, decode: NEW - 1 more).
    assert [t.data_ptr() for t in gen8.cache] == ptrs
    assert [t.dtype for t in gen8.cache[:4]] == [torch.int8, torch.int8, torch.float32, torch.float32]
    assert [t.shape for t in gen8.cache[:4]] == [(2, 2, CACHE, 16)] * 2 + [(2, 2, CACHE)] * 2
    end = 8 + NEW - 1
    for t in gen8.cache:
        written = t[:, :, :end]
        assert bool((written != 0).any(-1).all() if t.dim() == 4 else (written > 0).all())
        assert not t[:, :, end:].any()
    assert gen8.cache[0].abs().max() == 127  # the absmax of each row
    assert len(gen8.decode_fn.jit_function.in_place) == 4 * flex.config.num_hidden_layers
    # The equality is meaningful: every step's top-2 margin (float cache)
    # exceeds twice the largest logit difference the int8 cache makes.
    tokens = list(want[:, ids.shape[1]:].T)
    floats, _ = _compiled_logits(genf, ids, tokens)
    ints, _ = _compiled_logits(gen8, ids, tokens)
    diff = max((a - b).abs().max().item() for a, b in zip(floats, ints))
    margin = min((lg.topk(2).values[:, 0] - lg.topk(2).values[:, 1]).min().item() for lg in floats[:NEW])
    assert margin > 2 * diff, (margin, diff)


def test_kv_cache_dtype_refused():
    flex, _ = _models("LlamaConfig", 4)
    with pytest.raises(flex_hf.FlexHFError, match="kv_cache_dtype"):
        flex_hf.generator(flex, max_cache_len=CACHE, kv_cache_dtype=torch.float16)
