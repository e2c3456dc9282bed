"""How long idle OpenMP workers spin, for the small-op guards.

Ops too small to pay for waking sleeping OpenMP workers (about 100 us here)
have their parallel regions guarded by flex-omp-if-awake (see
pipelines.SERIAL_BELOW_US): such a region runs on the threads only when the
module's last parallel region ended less than the workers' spin time ago,
so that a loop of back-to-back calls (decode steps) uses the threads while
a call after a pause runs on one thread and wakes nobody. The spin time is
stored into each compiled module once (jit.py); without it small regions
always run on one thread.
"""

import os
import re


def spin_seconds(env=None) -> float:
    """How long the runtime's idle workers spin after a parallel region:
    KMP_BLOCKTIME (milliseconds, or with a unit `us`/`ms`/`s`; `infinite`),
    0 under OMP_WAIT_POLICY=passive or when unreadable. The runtime's own
    default is 200 ms; jit.py sets 1 ms unless the user chose."""
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
