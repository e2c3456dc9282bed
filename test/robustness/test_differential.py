"""Randomized differential test, CI size: a fixed seed, 200 flex calls
(cases), each checked against eager on every backend (reference and, when
registered, tiled). Longer runs:

    python -m test.robustness.differential --cases 2000 --seed N
"""

import os

import pytest

from . import differential as D
from .helpers import backends, require_compile

SEED = int(os.environ.get("FLEX_DIFF_SEED", "2026"))
CASES = int(os.environ.get("FLEX_DIFF_CASES", "200"))
PER_GROUP = 10
GROUPS = -(-CASES // PER_GROUP)
CHUNKS = 4


def test_generator_is_deterministic_and_valid_python():
    a = D.make_group(SEED, 3, PER_GROUP)
    b = D.make_group(SEED, 3, PER_GROUP)
    assert a.source == b.source
    compile(a.source, "<group>", "exec")
    # Shapes span the interesting ranges over the CI groups.
    gs = [D.make_group(SEED, i, PER_GROUP) for i in range(GROUPS)]
    assert any(g.M == 1 for g in gs) and any(g.Hq != g.Hkv for g in gs)
    assert any(g.N % 64 for g in gs) and any(g.E != g.Ev for g in gs)
    assert any(g.runtime_doc for g in gs)


def test_eager_side_runs():
    """The generated models run in eager mode (no compiler involved)."""
    g = D.make_group(SEED, 0, PER_GROUP)
    Model, get_inputs = D.load(g.source)
    outs = D.eager(Model(), get_inputs(0))
    assert len(outs) >= PER_GROUP


# Half the calls in CI, all with FLEX_TESTS_FULL=1.
@pytest.mark.parametrize("chunk", [c if c < CHUNKS // 2 else pytest.param(c, marks=pytest.mark.extended) for c in range(CHUNKS)])
def test_differential(chunk):
    require_compile()
    bs = backends()
    fails = []
    for i in range(chunk, GROUPS, CHUNKS):
        g = D.make_group(SEED, i, PER_GROUP)
        fails += D.run_group(g, bs, draws=1)
    assert not fails, "\n\n".join(f.report() for f in fails[:3])
