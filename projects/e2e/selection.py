"""Which tests the pytest suites run in CI, and which only with
FLEX_TESTS_FULL=1 (`full()`).

CI runs the whole suite on two cores and must fit a Zen 1's time (about
three times a Zen 5's). So:
- the e2e suites (test_e2e.py, test_e2e_grad.py) run every case's forward
  on the default backend ("tiled", the one users get); the other backends
  ("reference", the scalar loops; "tiled-1t", the tiled code on one
  thread) run a fixed quarter of the cases, chosen by a hash of the case's
  name (a new case does not move the others);
- the backward runs the other three quarters on "tiled": every case's
  gradients are checked on one backend or the other;
- tests and parametrizations marked `@pytest.mark.extended` (the
  repository's conftest.py) repeat what a kept one covers, for another
  model family, dtype or chunk: they are deselected.
FLEX_TESTS_FULL=1 runs all of it. `python -m projects.e2e.main --backend
all` runs every pair whatever the variable.
"""

import os
import zlib

FULL_ENV = "FLEX_TESTS_FULL"
DEFAULT = "tiled"
SAMPLE = 4  # the cases fall in SAMPLE fixed parts


def full() -> bool:
    return os.environ.get(FULL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _part(case_name: str) -> int:
    return zlib.crc32(case_name.encode()) % SAMPLE


def runs(case_name: str, backend: str) -> bool:
    """Whether the forward suite runs this case on this backend."""
    return backend == DEFAULT or sampled(case_name)


def grad_runs(case_name: str, backend: str) -> bool:
    """Whether the backward suite runs this case on this backend: the
    sampled quarter on the other backends, the rest on the default one."""
    return full() or (backend == DEFAULT) != (_part(case_name) == 0)


def sampled(case_name: str) -> bool:
    """Whether a case is in the fixed quarter (all of them with
    FLEX_TESTS_FULL=1): also the cases test_direct_flex_trace.py imports
    both ways."""
    return full() or _part(case_name) == 0
