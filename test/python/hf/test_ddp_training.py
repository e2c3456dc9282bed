"""Data-parallel training of a whole transformers model (docs/training.md
"Data-parallel training"): a tiny random LlamaForCausalLM, with
`attn_implementation` "flex_attention" and "sdpa", wrapped in
DistributedDataParallel over 2 gloo processes on this machine and compiled
as torch documents it, `torch.compile(DDP(model), backend="torch_mlir_flex")`,
2 AdamW steps, each rank on its half of the batch.

- Dynamo's DDPOptimizer splits the model's graph at DDP's bucket boundaries
  (`bucket_cap_mb=1`, the model is 1.6 MB: 2 pieces) and hands each piece
  to the backend: every piece compiles (forward and backward), none runs
  in eager, and Dynamo captures the model in one graph (the breaks in
  `DistributedDataParallel.forward` itself are torch's, under any backend);
- each rank's losses equal eager PyTorch's (SDPA, one process) on that
  rank's half, and the final parameters, the same on both ranks, equal
  those of one eager process stepping on the whole batch, within 1e-4.

    python -m pytest -q -p no:cacheprovider test/python/hf/test_ddp_training.py
"""

import os

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

import gloo_ranks

pytest.importorskip("transformers")

WORLD, ROWS, SEQ, VOCAB, STEPS, LR = 2, 2, 16, 1024, 2, 1e-3
ATTNS = ("flex_attention", "sdpa")


def _llama(attn):
    """One decoder layer, GQA; 1.6 MB of parameters: more than DDP's first
    bucket (1 MB), so that DDPOptimizer splits the graph."""
    import transformers

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                    max_position_embeddings=64, use_cache=False)
    conf._attn_implementation = attn
    return transformers.LlamaForCausalLM(conf).train()


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, VOCAB, (WORLD * ROWS, SEQ), generator=g)


def _shard(ids, rank):
    return ids[rank * ROWS:(rank + 1) * ROWS]


def _train_ddp(attn, rank):
    from torch._dynamo.utils import counters
    from torch.nn.parallel import DistributedDataParallel as DDP

    from torch_mlir_flex import dynamo

    torch._dynamo.reset()
    counters.clear()
    before = dict(dynamo.stats)
    model = _llama(attn)
    compiled = torch.compile(DDP(model, bucket_cap_mb=1), backend=dynamo.NAME, options={"opt_level": 0})
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    ids = _shard(_batch(), rank)
    losses = []
    for _ in range(STEPS):
        loss = compiled(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    stats = {k: v - before.get(k, 0) for k, v in dynamo.stats.items()}
    return {"losses": losses, "stats": stats, "unique_graphs": counters["stats"]["unique_graphs"],
            "params": {n: p.detach().clone() for n, p in model.named_parameters()}}


def _worker(rank, store_path, out_dir):
    from torch_mlir_flex import dynamo

    torch.set_num_threads(1)
    dynamo.register()
    with gloo_ranks.process_group(rank, WORLD, store_path):
        results = {attn: _train_ddp(attn, rank) for attn in ATTNS}
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    gloo_ranks.leave()


def _eager_reference():
    """One eager process (SDPA) on the whole batch: each step's loss on
    each rank's half (the loss DDP's rank reports) and the final
    parameters. The halves have the same number of labels, so the whole
    batch's mean loss is the mean of the halves', and its gradient the
    average DDP's all-reduce makes."""
    model = _llama("sdpa")
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    ids = _batch()
    losses = []
    for _ in range(STEPS):
        with torch.no_grad():
            losses.append([model(input_ids=_shard(ids, r), labels=_shard(ids, r)).loss.item()
                           for r in range(WORLD)])
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses, {n: p.detach() for n, p in model.named_parameters()}


def test_ddp_whole_model_equals_one_process(tmp_path):
    want_losses, want_params = gloo_ranks.run(_worker, WORLD, tmp_path, meanwhile=_eager_reference)

    initial = dict(_llama("sdpa").named_parameters())
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    for attn in ATTNS:
        for rank in range(WORLD):
            res = got[rank][attn]
            stats = res["stats"]
            assert stats.get("eager", 0) == 0 and stats.get("eager_calls", 0) == 0, (attn, stats)
            # DDPOptimizer's pieces: 2 or more, each one forward and one backward graph
            assert stats["graphs"] >= 2, (attn, stats)
            assert stats["forward"] == stats["backward"] == stats["graphs"], (attn, stats)
            assert res["unique_graphs"] == 1, (attn, res["unique_graphs"])
            if attn == "sdpa":
                assert stats.get("sdpa_as_flex", 0) >= 1, stats
            for step in range(STEPS):
                want = want_losses[step][rank]
                assert abs(res["losses"][step] - want) <= 1e-4 * abs(want), (attn, rank, step, res["losses"], want)
            for name, want in want_params.items():
                p = res["params"][name]
                assert torch.equal(p, got[0][attn]["params"][name]), (attn, name, "ranks differ")
                err = (p - want).abs().max().item()
                assert err <= 1e-4, (attn, rank, name, err)
                assert not torch.equal(p, initial[name].detach()), (attn, name, "did not move")
