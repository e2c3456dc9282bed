"""The compiled code's heap (lib/Runtime/FlexAlloc.c) and resident memory:
its large blocks are mappings of their own, so a block it does not keep
(past $FLEX_ALLOC_CACHE_MB) goes back to the kernel when freed, and what it
keeps never exceeds the bound. From glibc's heap, the blocks stayed
resident after their free once glibc's mmap threshold had risen (any free
of a large block raises it), under a live small block: 80 MiB here.

Each case runs in a child process: the bound is read once per process, and
glibc's threshold is process state.

    PYTHONPATH=python pytest -q test/python/backend/test_runtime_heap_bound.py
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

CHILD = r"""
import ctypes
import torch_mlir_flex
from torch_mlir_flex.backend import blas

def rss():
    with open("/proc/self/status") as f:
        return [int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:")][0]

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
# glibc's dynamic mmap threshold rises to a freed mapped block's size: later
# blocks below 30 MiB come from its heap.
libc.free(libc.malloc(30 << 20))
alloc, free = blas.heap_functions()
before = rss()
blocks = [alloc(64, 4 << 20) for _ in range(20)]
for b in blocks:
    ctypes.memset(b, 1, 4 << 20)
pin = libc.malloc(1 << 20)  # a live block after them (from the top of the heap)
touched = rss() - before
for b in blocks:
    free(b)
print("RESULT", touched, rss() - before, blas.kept_bytes() / 2**20)
blas.release_memory()
print("RELEASED", rss() - before, blas.kept_bytes())
"""


def _run(bound_mb):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), ROOT]),
               FLEX_ALLOC_CACHE_MB=str(bound_mb))
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {l.split()[0]: [float(v) for v in l.split()[1:]] for l in proc.stdout.splitlines()
             if l.startswith(("RESULT", "RELEASED"))}
    return lines["RESULT"], lines["RELEASED"]


def test_blocks_past_the_bound_go_back_to_the_kernel():
    (touched, after_free, kept), (released, kept_after) = _run(0)
    assert touched >= 76  # 20 x 4 MiB written
    assert kept == 0
    assert after_free < 8, after_free  # glibc's heap kept all 80 MiB


def test_kept_blocks_stay_within_the_bound():
    (touched, after_free, kept), (released, kept_after) = _run(10)
    assert touched >= 76
    assert 0 < kept <= 10  # two 4 MiB blocks (with their headers: page multiples above 4 MiB)
    assert after_free <= 10 + 4, after_free  # the kept ones resident, the rest given back
    assert kept_after == 0 and released < 4, released
