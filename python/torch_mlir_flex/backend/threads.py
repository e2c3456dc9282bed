"""Whether small compiled ops may use the OpenMP threads at this call.

Ops too small to pay for waking sleeping OpenMP workers (about 100 us here)
have their parallel regions guarded by a flag (flex-omp-if-awake, see
pipelines.SERIAL_BELOW_US): 0 runs them on the calling thread, 1 on the
threads. The workers spin for KMP_BLOCKTIME after a parallel region, so the
flag is 1 when the last compiled OpenMP call returned less than that ago:
in a loop of back-to-back calls (decode steps) the threads are used and
stay awake; a call after a pause runs on one thread and wakes nobody.
"""

import os
import re
import time

_last_end = [float("-inf")]  # perf_counter() when the last OpenMP call returned
_window = []  # [seconds the workers spin], read once


def spin_seconds(env=None) -> float:
    """How long the runtime's idle workers spin after a parallel region:
    KMP_BLOCKTIME (milliseconds, or with a unit `us`/`ms`/`s`; `infinite`),
    0 under OMP_WAIT_POLICY=passive or when unreadable (then small ops
    always run on one thread). The runtime's own default is 200 ms; jit.py
    sets 1 ms unless the user chose."""
    env = os.environ if env is None else env
    if env.get("OMP_WAIT_POLICY", "").strip().lower() == "passive":
        return 0.0
    text = env.get("KMP_BLOCKTIME", "200").strip().lower()
    if text in ("infinite", "infinity"):
        return float("inf")
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(us|ms|s)?", text)
    if not m:
        return 0.0
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1e-3}[m.group(2)]
    return float(m.group(1)) * scale


def workers_awake() -> int:
    """1 when the last OpenMP call returned within the spin time, else 0."""
    if not _window:
        _window.append(spin_seconds())
    return int(time.perf_counter() - _last_end[0] < _window[0])


def call_ended() -> None:
    _last_end[0] = time.perf_counter()
