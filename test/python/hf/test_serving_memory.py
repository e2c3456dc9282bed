"""A compiled continuous-batching server does not grow with the requests it
has served (issue #43): 1,000 requests of ragged lengths through one
`ContinuousBatchingManager` (transformers' engine, as `transformers serve`
runs it) with the paged flex attention (`attn_implementation="flex_paged"`)
and every forward compiled by our backend. The resident memory after the
last request is within a few MiB of what it was after the first 200 (the
graphs compiled, the heap's kept blocks in place), every request gets its
tokens, and nothing ran in eager. The run is in a subprocess so that
pytest's own memory does not count.

    PYTHONPATH=python pytest -q test/python/hf/test_serving_memory.py
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

_PROGRAM = r"""
import gc, json, sys, warnings
import torch_mlir_flex
import torch
from transformers import CompileConfig, ContinuousBatchingConfig, GenerationConfig, LlamaConfig, LlamaForCausalLM
from torch_mlir_flex import dynamo
from torch_mlir_flex.hf import paged

warnings.filterwarnings("ignore")
dynamo.register()
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128, max_position_embeddings=256)
model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa", dtype=torch.float32).eval()
model.set_attn_implementation(paged.register_paged_flex())
cb = ContinuousBatchingConfig(page_size=8, num_blocks=32, max_batch_tokens=64, max_requests_per_batch=8,
                              varlen_compile_config=CompileConfig(backend="torch_mlir_flex"))
gen = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=-1, pad_token_id=0)
g = torch.Generator().manual_seed(1)
lengths = torch.randint(2, 24, (int(sys.argv[1]),), generator=g).tolist()
prompts = [torch.randint(3, 128, (n,), generator=g).tolist() for n in lengths]

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

def serve(manager, batch):
    ids = {manager.add_request(p, max_new_tokens=4): i for i, p in enumerate(batch)}
    done = 0
    while done < len(batch):
        r = manager.get_result(timeout=60)
        if r is None:
            raise RuntimeError("no result in 60 s")
        if r.is_finished() and r.request_id in ids:
            if r.error is not None or len(r.generated_tokens) != 4:
                raise RuntimeError(f"request {r.request_id}: {r.error} {r.generated_tokens}")
            done += 1

with torch.no_grad():
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    manager.start()
    try:
        rss = []
        for start in range(0, len(prompts), 200):
            serve(manager, prompts[start:start + 200])
            gc.collect()
            rss.append(rss_mib())
    finally:
        manager.stop(block=True, timeout=60)
print("RESULT", json.dumps(dict(rss=rss, stats=dict(dynamo.stats))))
"""


def test_memory_does_not_grow_over_1000_requests():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    import json

    r = subprocess.run([sys.executable, "-c", _PROGRAM, "1000"], capture_output=True, text=True, env=env,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    line = next(l for l in r.stdout.splitlines() if l.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    rss, stats = result["rss"], result["stats"]
    print(result)
    assert len(rss) == 5
    assert stats.get("eager", 0) == 0 and stats.get("eager_calls", 0) == 0, stats
    assert stats["compiled"] >= 1
    # after the first 200 requests (graphs compiled, heap warm): flat
    assert max(rss[1:]) - rss[0] < 24, rss
