"""A warm restart of a compiled training step (docs/training.md, "Warm
restarts"): two processes train the same tiny transformers Llama
(attn_implementation="flex_attention", hidden 64, 2 layers, AdamW) through
`torch.compile(model, backend="torch_mlir_flex")` with one cache
directory. The second compiles its forward and backward graphs without
torch.export, import, lowering or LLVM (every stage from the caches:
pre_export_cache.py keys Dynamo's graphs, module_key.py), and its losses
equal the first's bit for bit.

    PYTHONPATH=python pytest -q test/python/dynamo/test_warm_training.py
"""

import json
import os
import subprocess
import sys
import textwrap

TRAIN = textwrap.dedent("""
    import json, warnings
    warnings.filterwarnings("ignore")
    import torch_mlir_flex, torch, transformers
    from torch_mlir_flex import dynamo
    from torch_mlir_flex.backend import cache

    dynamo.register()
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                    use_cache=False)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="flex_attention")
    model.train()
    compiled = torch.compile(model, backend="torch_mlir_flex")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(3):
        ids = torch.randint(0, 128, (2, 16), generator=g)
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    print(json.dumps(dict(losses=losses, dynamo=dict(dynamo.stats), cache=dict(cache.stats))))
""")


def _train(cache_dir):
    # LLVM in this process (no code generation child to start: seconds less).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TORCH_MLIR_FLEX_CACHE_DIR=str(cache_dir),
               TORCH_MLIR_FLEX_CODEGEN_CHILD="0")
    for name in ("TORCH_MLIR_FLEX_CACHE", "TORCH_MLIR_FLEX_STAGE_CACHE"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", TRAIN], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_second_process_compiles_from_the_caches(tmp_path):
    cold, warm = _train(tmp_path), _train(tmp_path)
    for run in (cold, warm):
        assert run["dynamo"].get("eager", 0) == 0, run
        assert run["dynamo"]["forward"] >= 1 and run["dynamo"]["backward"] >= 1, run
    graphs = sum(warm["dynamo"].get(k, 0) for k in ("forward", "backward", "compiled"))
    assert cold["cache"].get("export_skipped", 0) == 0 and cold["cache"]["stage_stored"] >= 3 * graphs, cold
    # No torch.export, import, lowering or code generation in the second.
    assert warm["cache"].get("export_skipped", 0) == graphs, warm
    for k in ("stage_stored", "misses", "stored"):
        assert warm["cache"].get(k, 0) == 0, (k, warm)
    assert warm["cache"]["hits"] == graphs, warm
    assert warm["losses"] == cold["losses"]
    assert cold["losses"][2] < cold["losses"][0]  # it trains
