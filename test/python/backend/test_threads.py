"""Small ops choose threads or one thread at each call (threads.py,
flex-omp-if-awake): the lowered module of a small op carries the
flex_threads_awake flag, both flag values give the one-thread result, and
the flag follows the time since the last compiled OpenMP call."""

import os
import sys

import pytest
import torch

import torch_mlir_flex  # noqa: F401  (load order)
from torch_mlir_flex.backend import threads
from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import find_openmp_runtime, tiled_pipeline

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import flex_ir as fi  # noqa: E402


def _qkv(M, N, seed=3):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 4, n, 64, generator=g) for n in (M, N, N))


@pytest.fixture
def omp_lib():
    lib = find_openmp_runtime()
    if lib is None:
        pytest.fail("no OpenMP runtime: requirements.txt pins intel-openmp")
    return lib


@pytest.mark.parametrize("M,N,small", [(1, 300, True), (512, 512, False)])
def test_small_ops_get_the_flag(omp_lib, monkeypatch, M, N, small):
    text = fi.attention_ir(B=1, Hq=4, M=M, N=N, E=64, mask_mod=fi.CAUSAL if M > 1 else None)
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=tiled_pipeline(openmp=True))
    lowered = str(fn.lowered)
    assert "omp.parallel" in lowered
    assert ("@_mlir_flex_threads_awake" in lowered) == small
    assert (fn._awake is not None) == small
    q, k, v = _qkv(M, N)
    want = JitFunction(text, "f", pipeline="tiled-1t")(q, k, v)
    for awake in (0, 1):
        monkeypatch.setattr(threads, "workers_awake", lambda awake=awake: awake)
        assert torch.equal(fn(q, k, v), want), awake
        if small:
            assert fn._awake.value == awake


def test_flag_follows_the_last_call(omp_lib, monkeypatch):
    text = fi.attention_ir(B=1, Hq=4, M=1, N=300, E=64)
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=tiled_pipeline(openmp=True))
    q, k, v = _qkv(1, 300)
    monkeypatch.setattr(threads, "_window", [1e-3])
    monkeypatch.setattr(threads, "_last_end", [float("-inf")])
    fn(q, k, v)  # no call before: one thread
    assert fn._awake.value == 0
    assert threads._last_end[0] > float("-inf")
    fn(q, k, v)  # right after a call: the workers spin
    assert fn._awake.value == 1
    threads._last_end[0] -= 1.0  # a pause longer than the spin time
    fn(q, k, v)
    assert fn._awake.value == 0


@pytest.mark.parametrize("env,seconds", [
    ({}, 0.2),
    ({"KMP_BLOCKTIME": "1"}, 1e-3),
    ({"KMP_BLOCKTIME": "0"}, 0.0),
    ({"KMP_BLOCKTIME": "500us"}, 5e-4),
    ({"KMP_BLOCKTIME": "2s"}, 2.0),
    ({"KMP_BLOCKTIME": "infinite"}, float("inf")),
    ({"KMP_BLOCKTIME": "soon"}, 0.0),
    ({"KMP_BLOCKTIME": "5", "OMP_WAIT_POLICY": "PASSIVE"}, 0.0),
])
def test_spin_seconds(env, seconds):
    assert threads.spin_seconds(env) == pytest.approx(seconds)
