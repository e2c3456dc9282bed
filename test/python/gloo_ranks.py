"""Running a test's worker function on gloo ranks: spawned processes on
this machine, a file store, results left in files.

    def _worker(rank, store_path, out_dir):        # module level: spawn imports it
        with gloo_ranks.process_group(rank, WORLD, store_path):
            torch.save(..., os.path.join(out_dir, f"rank{rank}.pt"))
        gloo_ranks.leave()

    gloo_ranks.run(_worker, WORLD, tmp_path, meanwhile=eager_reference)
"""

import contextlib
import os
import sys

import torch.multiprocessing as mp


@contextlib.contextmanager
def process_group(rank: int, world: int, store_path: str):
    """torch.distributed's gloo group of `world` ranks on a file store,
    with a barrier at the end (every rank's results are saved before any
    leaves)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        yield
        dist.barrier()
    finally:
        dist.destroy_process_group()


def leave():
    """Ends a worker without running destructors. The DDP Reducer holds the
    last reference to the gloo group; its destructor (GIL held) waits for
    gloo's worker thread, which may wait for the GIL to finish an
    all-reduce (pytorch#56297: 1 run in 3 hung; docs/robustness.md). The
    results are saved by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run(worker, world: int, tmp_path, meanwhile=None, timeout: int = 600):
    """Runs `worker(rank, store_path, out_dir)` on `world` spawned ranks and
    `meanwhile()` here while they run; returns what `meanwhile` returns.
    Asserts every rank exited with 0; a hung rank is killed after
    `timeout` seconds, leaving no process behind."""
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r, str(tmp_path / "store"), str(tmp_path))) for r in range(world)]
    for p in procs:
        p.start()
    try:
        result = meanwhile() if meanwhile is not None else None
    finally:
        for p in procs:
            p.join(timeout=timeout)
        for p in procs:
            if p.exitcode is None:
                p.kill()
    assert [p.exitcode for p in procs] == [0] * world, f"worker exit codes (None: hung, killed after {timeout} s)"
    return result
