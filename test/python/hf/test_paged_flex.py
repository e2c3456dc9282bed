"""Paged flex attention (`torch_mlir_flex.hf.paged`) under transformers'
continuous batching: `generate_batch` of ragged prompts through a small
paged cache (chunked prefill, requests waiting for pages, pages freed and
reused) gives the tokens of per-request greedy `generate` (SDPA; eager for
the softcap model), in eager PyTorch and compiled by our torch.compile
backend (no graph run in eager), for a Llama (full layers), a Mistral with
a sliding window (every layer reads its ring buffer in place) and a
Gemma2-like model (a sliding and a full layer, softcap); each layer's output
equals transformers' own path (gathered K/V, its varlen mask) on the same
step. Compiled, a request stream is one Dynamo graph with no graph break
(the cache writes are traced, the step's BlockMasks are graph inputs), also
with CompileConfig(dynamic=True); with padding intervals (steps of several
token counts) at most 3 compilations.

    PYTHONPATH=python pytest -q test/python/hf/test_paged_flex.py
"""

import logging
import warnings

import pytest
import torch
from torch._dynamo.utils import counters

pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    CompileConfig, ContinuousBatchingConfig, Gemma2Config, Gemma2ForCausalLM, GenerationConfig,
    LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
from transformers.generation.continuous_batching.utils import build_attention_mask  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402
from transformers.models.gemma2.modeling_gemma2 import (  # noqa: E402
    eager_attention_forward as gemma2_eager_attention)

from torch_mlir_flex import dynamo, log  # noqa: E402
from torch_mlir_flex.hf import paged, paged_mask  # noqa: E402

warnings.filterwarnings("ignore")
dynamo.register()
paged.register_paged_flex()

LENGTHS = [3, 17, 40, 9, 25]
NEW = 8


GEMMA2 = "gemma2"  # _model's Gemma2-like model: sliding and full layers, softcap
QWEN2 = "qwen2"  # _model's Qwen2: a full layer, then a sliding one


def _model(sliding_window=None):
    """Llama (full layers), Mistral with a window (all layers sliding), for
    QWEN2 a Qwen2 (layer 0 full, layer 1 sliding with a 12-token window) or,
    for GEMMA2, a Gemma2 (layer 0 sliding with a 12-token window, layer 1
    full; attention softcap 2.0 on scores of scale 1, so it changes them)."""
    torch.manual_seed(0)
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128, max_position_embeddings=256)
    if sliding_window is None:
        cfg, cls = LlamaConfig(**common), LlamaForCausalLM
    elif sliding_window == GEMMA2:
        cfg = Gemma2Config(**common, head_dim=16, sliding_window=12, attn_logit_softcapping=2.0,
                           final_logit_softcapping=None, query_pre_attn_scalar=1)
        cls = Gemma2ForCausalLM
    elif sliding_window == QWEN2:
        cfg = Qwen2Config(**common, use_sliding_window=True, sliding_window=12, max_window_layers=1)
        cls = Qwen2ForCausalLM
    else:
        cfg, cls = MistralConfig(**common, head_dim=16, sliding_window=sliding_window), MistralForCausalLM
    return cls._from_config(cfg, attn_implementation=_reference_attention(cfg), dtype=torch.float32).eval()


def _reference_attention(config):
    # transformers' SDPA path ignores softcap (Gemma2 refuses it): eager.
    return "eager" if getattr(config, "attn_logit_softcapping", None) else "sdpa"


def _prompts():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(3, 128, (n,), generator=g).tolist() for n in LENGTHS]


def _config():
    return GenerationConfig(max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0)


def _reference(model, prompts):
    model.set_attn_implementation(_reference_attention(model.config))
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = model.generate(torch.tensor([p]), max_new_tokens=NEW, min_new_tokens=NEW,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
            out.append(ids[0, len(p):].tolist())
    return out


def _generate_batch(model, prompts, page_size, compile_config=None, **cb_options):
    """16 pages for 134 tokens: requests wait for pages that others free;
    32 tokens per batch: the 40-token prompt is prefilled in chunks."""
    model.set_attn_implementation(paged.NAME)
    cb = ContinuousBatchingConfig(page_size=page_size, num_blocks=128 // page_size, max_batch_tokens=32,
                                  max_requests_per_batch=4, varlen_compile_config=compile_config,
                                  **cb_options)
    with torch.no_grad():
        out = model.generate_batch(prompts, generation_config=_config(), continuous_batching_config=cb)
    return [out[f"req_{i}"].generated_tokens for i in range(len(prompts))]


@pytest.mark.parametrize("page_size", [4, 8])
def test_generate_batch_eager(page_size):
    model, prompts = _model(), _prompts()
    want = _reference(model, prompts)
    assert _generate_batch(model, prompts, page_size) == want


@pytest.mark.parametrize("window,page_size", [(12, 8), (12, 4), (GEMMA2, 8), (QWEN2, 4)])
def test_generate_batch_sliding_window_eager(window, page_size):
    """Sliding-window layers read their ring buffer in place (12 slots per
    request: 2 pages of 8, the second half used, or 3 pages of 4), alone or
    beside full layers."""
    model, prompts = _model(window), _prompts()
    want = _reference(model, prompts)
    assert _generate_batch(model, prompts, page_size) == want


def _graph_breaks():
    return sum(counters["graph_break"].values())


@pytest.mark.parametrize("window", [None, 12, GEMMA2])
def test_generate_batch_without_step_masks(window, monkeypatch):
    """A model run without the runner's step masks (the keyword absent)
    builds each BlockMask in the attention call: same tokens."""
    built = []

    def no_masks(batch_data):
        built.append(batch_data["input_ids"].shape[1])
        return [None] * len(batch_data["cache"].cache_allocators)

    monkeypatch.setattr(paged_mask, "step_masks", no_masks)
    model, prompts = _model(window), _prompts()
    want = _reference(model, prompts)
    assert _generate_batch(model, prompts, 8) == want
    assert built  # the runner's wrapper ran, the layers built their own masks


def _compiled(model, prompts, page_size, dynamic=None, **cb_options):
    torch._dynamo.reset()
    before, breaks = dict(dynamo.stats), _graph_breaks()
    with log.capture(logging.WARNING) as warned:
        got = _generate_batch(model, prompts, page_size,
                              CompileConfig(backend="torch_mlir_flex", fullgraph=False, dynamic=dynamic),
                              **cb_options)
    delta = {k: dynamo.stats[k] - before.get(k, 0) for k in dynamo.stats}
    delta["breaks"] = _graph_breaks() - breaks
    return got, delta, warned


@pytest.mark.parametrize("page_size", [4, 8])
def test_generate_batch_compiled(page_size):
    """Every captured graph runs compiled; compile-time padding (transformers
    pads each batch to max_batch_tokens) keeps the shapes fixed: the whole
    request stream is one graph, compiled once, with no graph break (the
    cache write is traced, transformers' disabled update is not called)."""
    model, prompts = _model(), _prompts()
    want = _reference(model, prompts)
    got, delta, warned = _compiled(model, prompts, page_size)
    print(f"page_size={page_size}: {delta}")
    assert got == want
    assert delta.get("eager", 0) == 0, warned
    assert delta["graphs"] == 1 and delta["compiled"] == 1 and delta["breaks"] == 0, delta


RAGGED = [5, 31, 12, 2, 20, 9]


@pytest.mark.parametrize("intervals", [(0, 0), (8, 16)], ids=["max-padding", "intervals"])
def test_request_stream_compilations(intervals):
    """A stream of 6 ragged prompts (chunked prefill, requests joining and
    leaving): tokens equal per-request greedy `generate`, nothing in eager,
    no graph break in the step. Padded to max_batch_tokens it is one
    compilation; padded to intervals of 8 query / 16 KV tokens the steps
    take 3 query sizes (8, 16, 32) and share at most 3 compilations (the
    first size static, the second makes the token count symbolic, a
    third when the query-block count leaves 1, which Dynamo specializes)."""
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 128, (n,), generator=g).tolist() for n in RAGGED]
    model = _model()
    want = _reference(model, prompts)
    q_int, kv_int = intervals
    got, delta, warned = _compiled(model, prompts, 8, q_padding_interval_size=q_int,
                                   kv_padding_interval_size=kv_int)
    print(f"intervals={intervals}: {delta}")
    assert got == want
    assert delta.get("eager", 0) == 0, warned
    assert delta["breaks"] == 0, delta
    assert 1 <= delta["compiled"] <= (1 if intervals == (0, 0) else 3), delta


@pytest.mark.parametrize("window", [12, GEMMA2])
def test_generate_batch_sliding_window_compiled(window):
    model, prompts = _model(window), _prompts()
    want = _reference(model, prompts)
    got, delta, warned = _compiled(model, prompts, 8)
    print(f"sliding window {window}: {delta}")
    assert got == want
    assert delta.get("eager", 0) == 0, warned
    # The ring buffer's in-place read and its write are traced too: one graph.
    assert delta["graphs"] == 1 and delta["compiled"] == 1 and delta["breaks"] == 0, delta


@pytest.mark.parametrize("window", [None, pytest.param(GEMMA2, marks=pytest.mark.extended)])
def test_dynamic_true(window):
    """CompileConfig(dynamic=True): every size, int and float Dynamo reads
    from the inputs is symbolic from the first graph; the BlockMask's block
    sizes, the scale, the softcap and the window still reach the backend as
    constants, so the step compiles (once: steps padded to
    max_batch_tokens), nothing runs in eager, tokens equal per-request
    greedy `generate`. (The default, dynamic=None, is every other compiled
    test here; with padding intervals: test_request_stream_compilations.)"""
    model, prompts = _model(window), _prompts()
    want = _reference(model, prompts)
    got, delta, warned = _compiled(model, prompts, 8, dynamic=True)
    print(f"window={window} dynamic=True: {delta}")
    assert got == want
    assert delta.get("eager", 0) == 0 and delta.get("eager_calls", 0) == 0, warned
    assert delta["graphs"] == 1 and delta["compiled"] == 1 and delta["breaks"] == 0, delta
    assert delta.get("dynamic", 0) == 1, delta  # compiled for symbolic sizes


def _paged_reference(module, query, key, value, scaling, softcap, kwargs):
    """transformers' own path for this step (SDPA, or eager with a softcap):
    each request's cache gathered by read_index (a full-attention layer's
    cache is already written; a sliding layer's ring buffer is read before
    the write, the new K/V at the sentinel slots, as its allocator does),
    the varlen mask of `build_attention_mask`."""
    cache = kwargs[paged._CACHE_KWARG]
    allocator = cache.layer_to_allocator[module.layer_idx]
    read_index = kwargs["read_index"][allocator.index]
    window = getattr(allocator, "sliding_window", None)
    if read_index.numel():
        k_rows, v_rows = allocator._kv_token_views[module.layer_idx]
        new = (read_index == allocator.sentinel_index)[:, None, None]

        def gather(rows, states):
            out = rows.index_select(0, read_index)
            if window is not None:
                out.masked_scatter_(new, states[0].transpose(0, 1))
            return out.transpose(0, 1).unsqueeze(0)

        key, value = gather(k_rows, key), gather(v_rows, value)
    cu_q = kwargs["cu_seq_lens_q"].tolist()
    cu_k = kwargs["cu_seq_lens_k"].tolist()
    mask = torch.full((1, 1, query.shape[2], key.shape[2]), torch.finfo(query.dtype).min)
    build_attention_mask(mask, cu_q, cu_k, sliding_window=window or 1)
    if softcap is None:
        out, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=scaling, is_causal=False)
    else:
        out, _ = gemma2_eager_attention(module, query, key, value, mask, scaling=scaling, softcap=softcap)
    return out[:, : cu_q[-1]]


def _listed(num, indices):
    nq, nk = indices.shape[-2:]
    out = torch.zeros(nq, nk, dtype=torch.bool)
    for i in range(nq):
        out[i, indices[0, 0, i, : num[0, 0, i]].long()] = True
    return out


def _check_block_mask(block_mask):
    """Eager flex_attention reads mask_mod only; the compiled kernel skips
    unlisted blocks and does not call mask_mod on full ones. So: every
    element mask_mod allows lies in a listed block, full blocks are allowed
    whole, no block is both."""
    T, N = block_mask.seq_lengths
    qb, kb = block_mask.BLOCK_SIZE
    allowed = block_mask.mask_mod(0, 0, torch.arange(T)[:, None], torch.arange(N)[None, :])
    partial = _listed(block_mask.kv_num_blocks, block_mask.kv_indices)
    full = _listed(block_mask.full_kv_num_blocks, block_mask.full_kv_indices)
    assert not (partial & full).any()

    def expand(blocks):
        return blocks.repeat_interleave(qb, 0).repeat_interleave(kb, 1)[:T, :N]

    assert not (allowed & ~expand(partial | full)).any(), "an allowed element in a skipped block"
    assert allowed[expand(full)].all(), "a full block with masked elements"
    return int(partial.sum()), int(full.sum()), partial.numel()


@pytest.mark.parametrize("page_size,window", [(4, None), (8, None), (8, 12), (4, 12), (8, GEMMA2)])
def test_layer_outputs_equal_transformers_paged(page_size, window, monkeypatch):
    """Every layer call of every step: our output for the real tokens equals
    transformers' computation on the same cache state (gathered K/V), and
    the step's BlockMasks cover what their mask_mod allows."""
    from transformers import AttentionInterface

    checked, blocks = [], {}

    def checking(module, query, key, value, attention_mask, scaling=None, softcap=None, **kwargs):
        want = _paged_reference(module, query, key, value, scaling, softcap, kwargs)
        out, _ = paged.paged_flex_attention_forward(module, query, key, value, attention_mask,
                                                    scaling=scaling, softcap=softcap, **kwargs)
        torch.testing.assert_close(out[:, : want.shape[1]], want, rtol=1e-5, atol=1e-5)
        allocator = kwargs[paged._CACHE_KWARG].layer_to_allocator[module.layer_idx]
        kinds = ["full"] if allocator.layer_type == "full_attention" else ["new"]
        if kinds == ["new"] and kwargs["read_index"][allocator.index].numel():
            kinds.append("old")
        for kind in kinds:
            blocks.setdefault(kind, []).append(_check_block_mask(paged_mask._step_cache[kind][1]))
        checked.append(kwargs["cu_seq_lens_q"].numel() - 1)
        return out, None

    monkeypatch.setitem(AttentionInterface._global_mapping, paged.NAME, checking)
    model, prompts = _model(window), _prompts()
    _generate_batch(model, prompts, page_size)
    # Steps with several requests and the chunked prefill were all checked.
    assert len(checked) >= 2 * 10 and max(checked) >= 3
    for kind, listed in blocks.items():
        partial, full, total = (sum(b[i] for b in listed) for i in range(3))
        print(f"page_size={page_size} window={window} {kind}: {partial} partial + {full} full "
              f"of {total} blocks")
        if kind == "new":  # the step's keys (16-key blocks): other requests' skipped
            assert partial + full < total
        else:
            # In place: most of the grid is other requests' pages, other
            # layers' rows (and pages out of the window), all skipped; whole
            # pages of the past are full (a window's pages seldom are).
            assert partial + full < total / 4 and (full > 0 or kind == "old")
    assert ("full" in blocks) == (window in (None, GEMMA2))
    assert ("old" in blocks) == (window is not None)


def test_outside_continuous_batching_is_refused():
    model = _model()
    model.set_attn_implementation(paged.NAME)
    with pytest.raises(ValueError, match="continuous batching"):
        model(torch.tensor([[5, 6, 7]]))
