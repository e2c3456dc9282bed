"""Timing and memory measurement for the benchmark (Linux /proc based).

`interleaved_medians`: the implementations take turns in short blocks of
back-to-back calls, so a load change on a shared machine hits all of them
alike; medians per implementation. Not call by call: an OpenMP runtime
keeps its workers spinning after a parallel region (torch's libgomp by
default; ours for KMP_BLOCKTIME ms), and those spinners shared the
cores with the next implementation's call. Measured with call-by-call
turns: ours causal f32 S=1024 D=64 took 8.6 ms beside torch's spinning
workers and 4.5 ms alone or with OMP_WAIT_POLICY=PASSIVE, while
torch.compile's time moved by 3%. So before each block the process idles
`settle_s` (every runtime's workers go to sleep) and one untimed call
starts the block: each implementation is timed in its own steady state.

`peak_extra_bytes`: growth of the process's peak RSS (VmHWM, reset through
/proc/self/clear_refs) over its RSS before one call, after malloc returned
its free memory to the OS.
"""

import ctypes
import gc
import statistics
import time


def timed_call(fn):
    """(seconds, result) of one call."""
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def reps_for(seconds_per_call, budget=1.5, lo=3, hi=15):
    """Repetitions so that one implementation takes about `budget` seconds."""
    if seconds_per_call <= 0:
        return hi
    return max(lo, min(hi, int(budget / seconds_per_call)))


def interleaved_medians(fns, reps, warmup=1, rounds=3, settle_s=0.02):
    """{name: median seconds} of `fns` ({name: () -> any}), about `reps`
    timed calls each in `rounds` blocks (see the module docstring)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    per_block = max(1, -(-reps // rounds))
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(settle_s)
            fn()
            times[name] += [timed_call(fn)[0] for _ in range(per_block)]
    return {name: statistics.median(ts) for name, ts in times.items()}


def _status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _release_free_memory():
    """Hands memory that malloc keeps after earlier frees back to the OS
    (glibc malloc_trim), so that a call reusing it still shows in RSS."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_extra_bytes(fn):
    """Peak RSS growth during one call of `fn` (its output included; None
    where /proc cannot reset the peak)."""
    _release_free_memory()
    if not _reset_peak_rss():
        return None
    base = _status_bytes("VmRSS")
    fn()
    return max(0, _status_bytes("VmHWM") - base)


def copy_bandwidth_gbs(mib=256, reps=5) -> float:
    """Bytes read + written per second by a large tensor copy (the best of
    `reps`): a STREAM-like copy on torch's threads."""
    import torch

    a = torch.empty(mib * 2**18, dtype=torch.float32).fill_(1.0)
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        b.copy_(a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.numel() * 4 / best / 1e9
