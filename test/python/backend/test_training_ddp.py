"""The compiled training step under torch.distributed: DistributedDataParallel
(gloo, 2 processes on this machine, a file store) around the model of
test_training_loop, compiled with torch.compile(backend="torch_mlir_flex"):
the averaged gradients equal those of one process on the whole batch."""

import os
import sys

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

import gloo_ranks

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # test_training_loop, here and in the spawned workers
WORLD = 2


def _model_and_data():
    from test_training_loop import SEQ, VOCAB, TinyLM

    torch.manual_seed(0)
    model = TinyLM(use_flex=True)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (2 * WORLD, SEQ), generator=g)
    targets = torch.randint(0, VOCAB, (2 * WORLD, SEQ), generator=g)
    return model, ids, targets


def _block_mask():
    from torch.nn.attention.flex_attention import create_block_mask

    from test_training_loop import SEQ, _mask

    return create_block_mask(_mask, None, None, SEQ, SEQ, device="cpu", BLOCK_SIZE=8)


def _worker(rank, store_path, out_dir):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from torch_mlir_flex import dynamo

    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    dynamo.register()
    with gloo_ranks.process_group(rank, WORLD, store_path):
        model, ids, targets = _model_and_data()
        shard = slice(2 * rank, 2 * rank + 2)
        ddp = DDP(model)
        compiled = torch.compile(ddp, backend=dynamo.NAME)
        loss = compiled(ids[shard], targets[shard], _block_mask())
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        torch.save({"grads": grads, "stats": dict(dynamo.stats)}, os.path.join(out_dir, f"rank{rank}.pt"))
    gloo_ranks.leave()


def test_ddp_gradients_equal_one_process(tmp_path):
    from torch_mlir_flex import dynamo

    gloo_ranks.run(_worker, WORLD, tmp_path)

    dynamo.register()
    torch._dynamo.reset()
    model, ids, targets = _model_and_data()
    loss = torch.compile(model, backend=dynamo.NAME)(ids, targets, _block_mask())
    loss.backward()
    for r in range(WORLD):
        got = torch.load(tmp_path / f"rank{r}.pt")
        assert got["stats"].get("eager", 0) == 0, got["stats"]
        assert got["stats"].get("backward", 0) >= 1, got["stats"]
        for n, p in model.named_parameters():
            torch.testing.assert_close(got["grads"][n], p.grad, rtol=1e-4, atol=1e-6, msg=n)
