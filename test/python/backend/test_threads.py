"""Small ops stay on one thread by default; with small_ops_when_awake they
use the OpenMP threads only while the workers spin (flex-omp-if-awake,
threads.py): the lowered module of a small op carries
the guard's globals, the spin time is stored into it, both choices give
the one-thread result, and the last-end time follows the regions."""

import ctypes
import os
import sys
import threading

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


@pytest.mark.parametrize("M,N,parallel", [(1, 300, False), (512, 512, True)])
def test_small_ops_on_one_thread_by_default(omp_lib, M, N, parallel):
    """Without small_ops_when_awake, ops estimated below SERIAL_BELOW_US on
    one thread get no parallel region; larger ones keep it."""
    text = fi.attention_ir(B=1, Hq=4, M=M, N=N, E=64, mask_mod=fi.CAUSAL if M > 1 else None)
    fn = JitFunction(text, "f", shared_libs=[omp_lib],
                     pipeline=tiled_pipeline(openmp=True, small_ops_when_awake=False))
    assert ("omp.parallel" in str(fn.lowered)) == parallel, (M, N)
    assert fn.spin_seconds is None
    q, k, v = _qkv(M, N)
    assert torch.equal(fn(q, k, v), JitFunction(text, "f", pipeline="tiled-1t")(q, k, v))


@pytest.mark.parametrize("M,N,small", [(1, 300, True), (512, 512, False)])
def test_small_ops_get_the_guard(omp_lib, M, N, small):
    text = fi.attention_ir(B=1, Hq=4, M=M, N=N, E=64, mask_mod=fi.CAUSAL if M > 1 else None)
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=tiled_pipeline(openmp=True, small_ops_when_awake=True))
    lowered = str(fn.lowered)
    assert "omp.parallel" in lowered
    assert ("@_mlir_flex_spin_seconds" in lowered) == small
    assert (fn.spin_seconds is not None) == small
    q, k, v = _qkv(M, N)
    want = JitFunction(text, "f", pipeline="tiled-1t")(q, k, v)
    if not small:
        assert torch.equal(fn(q, k, v), want)
        return
    assert fn.spin_seconds.value == threads.spin_seconds()
    for spin in (0.0, float("inf")):  # one thread; the threads
        fn.spin_seconds.value = spin
        assert torch.equal(fn(q, k, v), want), spin


def test_last_end_follows_the_regions(omp_lib):
    """The module's last_end is the end of its last region, on one thread
    or on the threads."""
    text = fi.attention_ir(B=1, Hq=4, M=1, N=300, E=64)
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=tiled_pipeline(openmp=True, small_ops_when_awake=True))
    last = ctypes.c_double.from_address(fn.engine.raw_lookup("flex_last_parallel_end"))
    q, k, v = _qkv(1, 300)
    last.value = -1e30  # (a cached library loaded before shares its globals)
    fn.spin_seconds.value = 0.0
    fn(q, k, v)  # one thread
    first = last.value
    assert first > 0  # omp_get_wtime() at the end of the region
    fn.spin_seconds.value = float("inf")
    fn(q, k, v)  # the threads
    assert last.value >= first


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
    assert threads.spin_seconds(env, gomp=False) == pytest.approx(seconds)


@pytest.mark.parametrize("env,seconds", [
    ({}, 300000 * threads.GOMP_SPIN_NS * 1e-9),
    ({"KMP_BLOCKTIME": "2s"}, 300000 * threads.GOMP_SPIN_NS * 1e-9),
    ({"GOMP_SPINCOUNT": "10k"}, 1e4 * threads.GOMP_SPIN_NS * 1e-9),
    ({"GOMP_SPINCOUNT": "2M"}, 2e6 * threads.GOMP_SPIN_NS * 1e-9),
    ({"GOMP_SPINCOUNT": "0"}, 0.0),
    ({"GOMP_SPINCOUNT": "infinite"}, float("inf")),
    ({"GOMP_SPINCOUNT": "lots"}, 0.0),
    ({"OMP_WAIT_POLICY": "active"}, float("inf")),
    ({"GOMP_SPINCOUNT": "5", "OMP_WAIT_POLICY": "passive"}, 0.0),
])
def test_spin_seconds_on_libgomp(env, seconds):
    assert threads.spin_seconds(env, gomp=True) == pytest.approx(seconds)


def test_default_runtime_is_torchs_libgomp(monkeypatch):
    """Without FLEX_OPENMP_LIB the compiled code's OpenMP calls go to
    libflex_kmpc.so, on the libgomp torch loaded: a region of ours and
    torch's ops then share one set of workers (no second runtime loaded)."""
    monkeypatch.delenv("FLEX_OPENMP_LIB", raising=False)
    lib = find_openmp_runtime()
    assert os.path.basename(lib) == "libflex_kmpc.so"
    assert ctypes.CDLL(lib).flex_kmpc_ready() == 1
    text = fi.attention_ir(B=1, Hq=4, M=256, N=256, E=64, mask_mod=fi.CAUSAL)
    fn = JitFunction(text, "f", pipeline=tiled_pipeline(openmp=True))
    q, k, v = _qkv(256, 256)
    torch.testing.assert_close(fn(q, k, v), JitFunction(text, "f", pipeline=tiled_pipeline())(q, k, v))
    maps = open("/proc/self/maps").read()
    assert "libflex_kmpc.so" in maps and "libgomp" in maps
    assert "libiomp5" not in maps and "libomp.so" not in maps


def test_guard_of_a_cached_library(omp_lib, tmp_path, monkeypatch):
    """A small op loaded from the compile cache (a shared library) gets its
    spin time too, and its guard works."""
    from torch_mlir_flex.backend import cache

    monkeypatch.setenv(cache.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    text = fi.attention_ir(B=1, Hq=4, M=1, N=300, E=64)
    pipe = tiled_pipeline(openmp=True, small_ops_when_awake=True)
    JitFunction(text, "f", shared_libs=[omp_lib], pipeline=pipe)
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=pipe)
    assert isinstance(fn.engine, cache.SharedObjectEngine)
    assert fn.spin_seconds.value == threads.spin_seconds()
    q, k, v = _qkv(1, 300)
    want = JitFunction(text, "f", pipeline="tiled-1t")(q, k, v)
    for spin in (0.0, float("inf")):
        fn.spin_seconds.value = spin
        assert torch.equal(fn(q, k, v), want), spin


def _run_ns(tid):
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


def _omp_workers(call):
    """Thread ids of this process's OpenMP worker threads: libiomp5 names
    them; of libgomp's (libflex_kmpc.so, the default), which have the
    process's name, those not started by Python that ran during at least
    five `call()`s (the caller may take every chunk of a call before a
    worker wakes: on a fast CPU that happened in five calls in a row, so up
    to 50 calls until one ran)."""
    python_threads = {t.native_id for t in threading.enumerate()}
    native = [int(t) for t in os.listdir("/proc/self/task") if int(t) not in python_threads]
    before = {tid: _run_ns(tid) for tid in native}
    named = []
    for tid in native:
        with open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().startswith("openmp_worker"):
                named.append(tid)
    ran = []
    for i in range(50):
        call()
        ran = [tid for tid in native if _run_ns(tid) > before[tid]]
        if i >= 4 and (named or ran):
            break
    return named or ran


def _last_cpu(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])  # field 39, processor


def test_workers_leave_the_callers_cpu(omp_lib):
    """flex-omp-spread-workers: a worker that starts a region on the CPU of
    the calling thread moves to another CPU, and its affinity mask is the
    one it had before. The last CPU of a worker is read after the call, so
    on a busy machine the scheduler may already have put an idle worker back
    on the caller's CPU: up to three calls, one of which must show every
    worker elsewhere. (Where the kernel itself wakes sleeping workers on
    another CPU, this passes without the pass too; omp-spread-workers.mlir
    checks the IR.)"""
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    text = fi.attention_ir(B=1, Hq=4, M=512, N=512, E=64, mask_mod=fi.CAUSAL)
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=tiled_pipeline(openmp=True, spread_workers=True))
    assert "_mlir_flex_leave_cpu" in str(fn.lowered)
    q, k, v = _qkv(512, 512)
    want = fn(q, k, v)  # starts the workers
    workers = _omp_workers(lambda: fn(q, k, v))
    assert workers
    cpu = min(allowed)
    for _ in range(3):
        try:
            os.sched_setaffinity(0, {cpu})  # this thread only
            for tid in workers:  # onto the caller's CPU, then the old mask back
                os.sched_setaffinity(tid, {cpu})
                os.sched_setaffinity(tid, allowed)
            got = fn(q, k, v)
            after = {tid: (_last_cpu(tid), os.sched_getaffinity(tid)) for tid in workers}
        finally:
            os.sched_setaffinity(0, allowed)
        assert torch.equal(got, want)
        assert all(mask == allowed for _, mask in after.values()), after
        if all(last != cpu for last, _ in after.values()):
            break
    assert all(last != cpu for last, _ in after.values()), after


def test_spread_workers_can_be_turned_off(omp_lib):
    text = fi.attention_ir(B=1, Hq=4, M=512, N=512, E=64, mask_mod=fi.CAUSAL)
    on = tiled_pipeline(openmp=True, spread_workers=True)
    off = tiled_pipeline(openmp=True, spread_workers=False)
    assert "flex-omp-spread-workers" in on and "flex-omp-spread-workers" not in off
    assert "flex-omp-spread-workers" not in tiled_pipeline()  # no OpenMP
    fn = JitFunction(text, "f", shared_libs=[omp_lib], pipeline=off)
    assert "_mlir_flex_leave_cpu" not in str(fn.lowered)


def test_spread_workers_default_by_host_and_environment(monkeypatch):
    """On AMD family 23 (Zen 1/2: measured to help decode there), off
    elsewhere (measured: it slowed whole models on an Intel Xeon and a
    Zen 4); FLEX_SPREAD_WORKERS decides when set."""
    from torch_mlir_flex.backend import cpu_features

    monkeypatch.delenv("FLEX_SPREAD_WORKERS", raising=False)
    hosts = ((("GenuineIntel", "6"), False), (("AuthenticAMD", "23"), True),
             (("AuthenticAMD", "25"), False), (None, False))
    for host, want in hosts:
        fields = {"vendor_id": host[0], "cpu family": host[1]} if host else {}
        monkeypatch.setattr(cpu_features, "_first_cpu", lambda f=fields: f)
        assert cpu_features.spread_workers_default() is want
        assert ("flex-omp-spread-workers" in tiled_pipeline(openmp=True)) is want
    monkeypatch.setenv("FLEX_SPREAD_WORKERS", "1")
    assert cpu_features.spread_workers_default() is True
    monkeypatch.setenv("FLEX_SPREAD_WORKERS", "0")
    monkeypatch.setattr(cpu_features, "_first_cpu", lambda: {"vendor_id": "AuthenticAMD", "cpu family": "23"})
    assert cpu_features.spread_workers_default() is False
