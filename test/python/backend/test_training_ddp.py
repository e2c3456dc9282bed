"""The compiled training step under torch.distributed: DistributedDataParallel
(gloo, 2 processes on this machine, a file store) around the model of
test_training_loop, compiled with torch.compile(backend="torch_mlir_flex"):
the averaged gradients equal those of one process on the whole batch."""

import os
import sys

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
import torch.multiprocessing as mp

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
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from torch_mlir_flex import dynamo

    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    dynamo.register()
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        model, ids, targets = _model_and_data()
        shard = slice(2 * rank, 2 * rank + 2)
        ddp = DDP(model)
        compiled = torch.compile(ddp, backend=dynamo.NAME)
        loss = compiled(ids[shard], targets[shard], _block_mask())
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        torch.save({"grads": grads, "stats": dict(dynamo.stats)}, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # The DDP Reducer holds the last reference to the gloo process group;
    # its destructor (run with the GIL held) waits for the gloo worker
    # thread, which may itself wait for the GIL to release a finished
    # all-reduce (torch's pytorch/pytorch#56297 deadlock: 1 run in 3 hung
    # here). The results are saved: leave without running destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def test_ddp_gradients_equal_one_process(tmp_path):
    from torch_mlir_flex import dynamo

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(r, str(tmp_path / "store"), str(tmp_path))) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    for p in procs:
        if p.exitcode is None:
            p.kill()  # hung: leave no process behind
    assert [p.exitcode for p in procs] == [0] * WORLD, "worker exit codes (None: hung, killed after 600 s)"

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
