"""Which (case, backend) pairs the pytest suites run (test_e2e.py,
test_e2e_grad.py).

Every case runs on the default backend ("tiled", the one users get). The
other backends ("reference", the scalar loops; "tiled-1t", the tiled code
on one thread) run every case when FLEX_E2E_FULL=1, else a fixed quarter
of the cases, chosen by a hash of the case's name (a new case does not
move the others): together they were half the e2e suites' time, a sixth
of CI's, which on a Zen 1 must fit in its time. `python -m
projects.e2e.main --backend all` runs every pair whatever the variable.
"""

import os
import zlib

FULL_ENV = "FLEX_E2E_FULL"
DEFAULT = "tiled"
SAMPLE = 4  # one case in SAMPLE on the other backends


def full() -> bool:
    return os.environ.get(FULL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def runs(case_name: str, backend: str) -> bool:
    """Whether the pytest suites run this case on this backend."""
    return backend == DEFAULT or sampled(case_name)


def sampled(case_name: str) -> bool:
    """Whether a case is in the fixed quarter (all of them with
    FLEX_E2E_FULL=1): also the cases test_direct_flex_trace.py imports
    both ways."""
    return full() or zlib.crc32(case_name.encode()) % SAMPLE == 0
