"""transformers' continuous batching on its own paged attention (`sdpa`, the
"sdpa_paged" path: transformers' `PagedAttentionCache.update` writes the
step's K/V and gathers each request's cache) compiled by our backend
(dynamo/paged_cache_update.py): a request stream of ragged prompts
(chunked prefill, requests joining and leaving, padded steps) compiles at
most 3 graphs, with no graph break and none in eager, and gives the tokens
of per-request greedy `model.generate` (a Llama; a Qwen2 with a full and a
sliding-window layer). Outside our backend's frames
transformers' update runs unchanged: eager `generate_batch`, and Dynamo's
own "eager" backend still breaks at it. Imported before transformers'
continuous batching, torch_mlir_flex.dynamo replaces the update when it
is imported.

    PYTHONPATH=python pytest -q test/python/hf/test_sdpa_paged_compile.py
"""

import logging
import warnings

import pytest
import torch
from torch._dynamo.utils import counters

pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    CompileConfig, ContinuousBatchingConfig, GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config,
    Qwen2ForCausalLM)
from transformers.generation.continuous_batching import cache as cb_cache  # noqa: E402

from torch_mlir_flex import dynamo, log  # noqa: E402
from torch_mlir_flex.dynamo import paged_cache_update  # noqa: E402

warnings.filterwarnings("ignore")
dynamo.register()

LENGTHS = [5, 31, 12, 2, 20, 9]
NEW = 6


def _model(kind="llama"):
    """A Llama (full-attention layers) or a Qwen2 whose layer 1 has a
    12-token sliding window (a full and a sliding-window allocator over one
    cache storage)."""
    torch.manual_seed(0)
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128, max_position_embeddings=256)
    if kind == "qwen2":
        cfg, cls = Qwen2Config(**common, use_sliding_window=True, sliding_window=12, max_window_layers=1), \
            Qwen2ForCausalLM
    else:
        cfg, cls = LlamaConfig(**common), LlamaForCausalLM
    return cls._from_config(cfg, attn_implementation="sdpa", dtype=torch.float32).eval()


def _prompts():
    g = torch.Generator().manual_seed(2)
    return [torch.randint(3, 128, (n,), generator=g).tolist() for n in LENGTHS]


def _reference(model, prompts):
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = model.generate(torch.tensor([p]), max_new_tokens=NEW, min_new_tokens=NEW,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
            out.append(ids[0, len(p):].tolist())
    return out


def _generate_batch(model, prompts, backend=None, intervals=(0, 0)):
    """16 pages of 8 tokens for 103: requests wait for pages others free;
    32 tokens per batch: the 31-token prompt shares its step, chunked.
    Compiled, transformers pads each step's query tokens and cache read to
    multiples of `intervals` (0: to their maxima)."""
    model.set_attn_implementation("sdpa")
    compile_config = None if backend is None else CompileConfig(backend=backend)
    cb = ContinuousBatchingConfig(page_size=8, num_blocks=16, max_batch_tokens=32, max_requests_per_batch=4,
                                  varlen_compile_config=compile_config, allow_block_sharing=False,
                                  use_async_batching=False, q_padding_interval_size=intervals[0],
                                  kv_padding_interval_size=intervals[1])
    gen = GenerationConfig(max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        out = model.generate_batch(prompts, generation_config=gen, continuous_batching_config=cb)
    return [out[f"req_{i}"].generated_tokens for i in range(len(prompts))]


def _run(model, prompts, backend, intervals=(0, 0)):
    torch._dynamo.reset()
    counters.clear()
    before = dict(dynamo.stats)
    with log.capture(logging.WARNING) as warned:
        got = _generate_batch(model, prompts, backend, intervals)
    delta = {k: dynamo.stats[k] - before.get(k, 0) for k in dynamo.stats}
    delta["dynamo_graphs"] = counters["stats"]["unique_graphs"]
    delta["breaks"] = sum(counters["graph_break"].values())
    return got, delta, warned


@pytest.mark.parametrize("kind,intervals", [("llama", (0, 0)), ("llama", (8, 16)), ("qwen2", (0, 0))],
                         ids=["max-padding", "intervals", "sliding-window"])
def test_request_stream_compiles_at_most_3_graphs(kind, intervals):
    """Padded to the maxima every step has one shape: one graph. Padded to
    8 query / 16 KV tokens the steps take several sizes: the first graph
    static, the next for symbolic sizes (Dynamo's automatic dynamic). The
    Qwen2's sliding-window layer (its ring buffer read, then written) and
    its full layer write one cache tensor."""
    model, prompts = _model(kind), _prompts()
    want = _reference(model, prompts)
    got, delta, warned = _run(model, prompts, "torch_mlir_flex", intervals)
    print(intervals, delta)
    assert got == want
    assert delta.get("eager", 0) == 0 and delta.get("eager_calls", 0) == 0, warned
    assert delta["breaks"] == 0, delta
    assert 1 <= delta["dynamo_graphs"] <= 3 and delta["compiled"] == delta["dynamo_graphs"], delta


def test_transformers_update_outside_our_backend():
    """Eager PyTorch and Dynamo's own "eager" backend run transformers'
    disabled update: the same tokens, and Dynamo still breaks there."""
    # ours wraps transformers' function itself (torch.compiler.disable'd)
    assert getattr(paged_cache_update._original, "_torchdynamo_disable", False)
    assert cb_cache.PagedAttentionCache.update is not paged_cache_update._original
    model, prompts = _model(), _prompts()
    want = _reference(model, prompts)
    assert _generate_batch(model, prompts) == want
    got, delta, _ = _run(model, prompts, "eager")
    assert got == want
    assert delta["breaks"] > 0, delta  # one per layer and step: transformers' update
    assert delta.get("graphs", 0) == 0, delta  # nothing reached our backend


def test_installed_when_transformers_is_imported_later():
    """torch_mlir_flex.dynamo imported before transformers' continuous
    batching (a fresh process): the update is replaced at that import."""
    import os
    import subprocess
    import sys

    code = ("import sys, torch_mlir_flex.dynamo\n"
            "assert 'transformers.generation.continuous_batching.cache' not in sys.modules\n"
            "from transformers.generation.continuous_batching import cache\n"
            "from torch_mlir_flex.dynamo import paged_cache_update as p\n"
            "print(getattr(cache.PagedAttentionCache.update, '_flex_traceable_update', False),"
            " getattr(p._original, '_torchdynamo_disable', False))\n")
    python = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([python, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["True", "True"], out.stdout
