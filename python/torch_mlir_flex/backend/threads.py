"""How long idle OpenMP workers spin, for the small-op guards.

Ops too small to pay for waking sleeping OpenMP workers (about 100 us here)
have their parallel regions guarded by flex-omp-if-awake (see
pipelines.SERIAL_BELOW_US): such a region runs on the threads only when the
module's last parallel region ended less than the workers' spin time ago,
so that a loop of back-to-back calls (decode steps) uses the threads while
a call after a pause runs on one thread and wakes nobody. The spin time is
stored into each compiled module once (jit.py); without it small regions
always run on one thread. The compiled code's regions run on torch's
libgomp by default (libflex_kmpc.so), on libiomp5 with FLEX_OPENMP_LIB.
"""

import os
import re


# libgomp's workers spin GOMP_SPINCOUNT times (default 300000) before they
# sleep; one spin took 28 ns on a Zen 4 (about 8.5 ms of CPU after a
# region) and is slower on Intel, so 10 ns is a lower bound.
GOMP_SPIN_NS = 10
GOMP_DEFAULT_SPINS = 300000


def spin_seconds(env=None, gomp=None) -> float:
    """How long the runtime's idle workers spin after a parallel region,
    0 under OMP_WAIT_POLICY=passive, `inf` under active. On libgomp (`gomp`;
    None: whether the JIT's runtime is libflex_kmpc.so, pipelines.py):
    GOMP_SPINCOUNT (a count, with an optional k/M/G suffix, or `infinite`)
    spins of at least GOMP_SPIN_NS. On libiomp5 / libomp: KMP_BLOCKTIME
    (milliseconds, or with a unit `us`/`ms`/`s`; `infinite`); the runtime's
    own default is 200 ms, jit.py sets 1 ms unless the user chose. 0 when
    unreadable."""
    env = os.environ if env is None else env
    policy = env.get("OMP_WAIT_POLICY", "").strip().lower()
    if policy == "passive":
        return 0.0
    if gomp is None:
        from . import pipelines
        kmpc = pipelines.kmpc_library()
        gomp = kmpc is not None and pipelines.find_openmp_runtime() == kmpc
    if gomp:
        if policy == "active":
            return float("inf")
        return _gomp_spin_count(env.get("GOMP_SPINCOUNT", str(GOMP_DEFAULT_SPINS))) * GOMP_SPIN_NS * 1e-9
    text = env.get("KMP_BLOCKTIME", "200").strip().lower()
    if text in ("infinite", "infinity"):
        return float("inf")
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(us|ms|s)?", text)
    if not m:
        return 0.0
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1e-3}[m.group(2)]
    return float(m.group(1)) * scale


def _gomp_spin_count(text: str) -> float:
    text = text.strip().lower()
    if text in ("infinite", "infinity"):
        return float("inf")
    m = re.fullmatch(r"(\d+)\s*([kmgt])?", text)
    if not m:
        return 0.0
    return int(m.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
