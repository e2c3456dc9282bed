"""AOTAutograd's cache for our backend (dynamo/aot_cache.py): a second
process that trains the same tiny transformers Llama with the same cache
directory loads its forward and backward from AOTAutograd's cache (no
joint trace, no partition), compiles them from our stage caches (no
export, lowering or code generation) and gets the first process's losses
bit for bit; a changed model, or a changed partitioner setting, misses
and is compiled; nothing runs in eager PyTorch.

    PYTHONPATH=python pytest -q test/python/dynamo/test_aot_cache.py
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

TRAIN = textwrap.dedent("""
    import json, sys, warnings
    warnings.filterwarnings("ignore")
    import torch_mlir_flex, torch, transformers
    from torch._dynamo.utils import counters
    from torch_mlir_flex import dynamo
    from torch_mlir_flex.backend import cache

    attn, inter, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    dynamo.register()
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=inter,
                                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                    use_cache=False)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation=attn)
    model.train()
    compiled = torch.compile(model, backend="torch_mlir_flex")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(2):
        ids = torch.randint(0, 128, (batch, 16), generator=g)
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    print(json.dumps(dict(losses=losses, dynamo=dict(dynamo.stats), cache=dict(cache.stats),
                          aot=dict(counters["aot_autograd"]))))
""")


def _train(cache_dir, attn="flex_attention", inter=128, batch=2, **env_extra):
    # LLVM in this process (no code generation child to start: seconds less).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TORCH_MLIR_FLEX_CACHE_DIR=str(cache_dir),
               TORCH_MLIR_FLEX_CODEGEN_CHILD="0", **env_extra)
    for name in ("TORCH_MLIR_FLEX_CACHE", "TORCH_MLIR_FLEX_STAGE_CACHE", "TORCH_MLIR_FLEX_AOT_CACHE",
                 "TORCHINDUCTOR_AUTOGRAD_CACHE", "TORCHINDUCTOR_FX_GRAPH_CACHE", "FLEX_PARTITIONER"):
        if name not in env_extra:
            env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", TRAIN, attn, str(inter), str(batch)], env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _compiled_all(run):
    assert run["dynamo"].get("eager", 0) == 0, run
    assert run["dynamo"]["forward"] == 1 and run["dynamo"]["backward"] == 1, run


@pytest.mark.parametrize("attn,batch", [("flex_attention", 2), pytest.param("sdpa", 1, marks=pytest.mark.extended)])
def test_second_process_loads_aotautograd_from_the_cache(tmp_path, attn, batch):
    """flex_attention models, and SDPA models whose calls sdpa_as_flex
    rewrote (their block mask's `noop_mask` carries string annotations
    torch could not pickle: aot_cache.drop_string_types). Batch 1: the
    backward reads the shifted labels as a view at storage offset 1
    (`labels[..., 1:].contiguous()` of a [1, S] tensor), which was not
    stored."""
    cold = _train(tmp_path, attn, batch=batch)
    _compiled_all(cold)
    assert cold["aot"].get("autograd_cache_miss") == 1 and cold["aot"].get("autograd_cache_saved") == 1, cold
    assert not cold["aot"].get("autograd_cache_bypass"), cold
    assert any((tmp_path / "aotautograd").iterdir())
    warm = _train(tmp_path, attn, batch=batch)
    _compiled_all(warm)
    assert warm["aot"].get("autograd_cache_hit") == 1 and not warm["aot"].get("autograd_cache_miss"), warm
    assert warm["cache"]["aot_loaded"] == 2 and not warm["aot"].get("autograd_cache_saved"), warm
    # Our stages from our caches: no export, lowering or code generation.
    assert warm["cache"]["export_skipped"] == 2 and warm["cache"]["hits"] == 2, warm
    for k in ("stage_stored", "misses", "stored"):
        assert warm["cache"].get(k, 0) == 0, (k, warm)
    assert warm["losses"] == cold["losses"]
    assert cold["losses"][1] < cold["losses"][0]  # it trains
    if attn == "sdpa":
        assert warm["dynamo"]["sdpa_as_flex"] == 2, warm


def test_changed_model_or_setting_misses(tmp_path):
    cold = _train(tmp_path)
    # Another MLP width: another Dynamo graph, another key.
    other = _train(tmp_path, inter=96)
    _compiled_all(other)
    assert other["aot"].get("autograd_cache_miss") == 1 and not other["aot"].get("autograd_cache_hit"), other
    assert not other["cache"].get("aot_loaded"), other
    # The same model with AOTAutograd's default partitioner: other graphs
    # for our compiler, so the key (its tag) differs too.
    default = _train(tmp_path, FLEX_PARTITIONER="default")
    _compiled_all(default)
    assert default["aot"].get("autograd_cache_miss") == 1 and not default["aot"].get("autograd_cache_hit"), default
    assert default["losses"][0] == pytest.approx(cold["losses"][0], rel=1e-5)
    # Off: neither looked up nor stored; the same losses.
    off = _train(tmp_path, TORCH_MLIR_FLEX_AOT_CACHE="0")
    _compiled_all(off)
    assert not off["aot"].get("autograd_cache_hit") and not off["aot"].get("autograd_cache_miss"), off
    assert off["losses"] == cold["losses"], off
    # Off again: AOTAutograd traces again, but our stages come from our
    # caches (pre_export_cache.py keys the forward and backward graphs it
    # makes; with the cache on, a graph is compiled as a loaded copy, whose
    # key differs): no torch.export, import, lowering or code generation.
    again = _train(tmp_path, TORCH_MLIR_FLEX_AOT_CACHE="0")
    assert again["cache"].get("export_skipped") == 2 and again["cache"].get("hits") == 2, again
    for k in ("stage_stored", "misses", "stored"):
        assert again["cache"].get(k, 0) == 0, (k, again)
    assert again["losses"] == cold["losses"], again
