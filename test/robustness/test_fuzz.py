"""Mutation fuzzing (fixed seeds): flex-opt and the Python API must never
die by a signal on malformed or odd IR; errors are diagnostics/exceptions.
See fuzz.py for the mutations and docs/robustness.md for the findings."""

import json
import os
import sys
import time
import zlib

import pytest

from . import fuzz
from .helpers import ROOT, died_by_signal, subprocess_env

SEED = 20261001
N_FLEX_OPT = int(os.environ.get("FLEX_FUZZ_MUTANTS", "500"))
N_PYTHON = int(os.environ.get("FLEX_FUZZ_PY_MUTANTS", "120"))


def test_seeds_cover_inputs_and_lit_tests():
    seeds = fuzz.seed_modules()
    names = {n.split("#")[0] for n, _ in seeds}
    assert any(n.startswith("test/robustness/inputs/") for n in names)
    lit = sorted((ROOT / "test/Dialect/Flex").glob("*.mlir"))
    for f in lit:
        if "flex." in f.read_text():
            assert str(f.relative_to(ROOT)) in names, f


def test_mutations_are_deterministic():
    a = fuzz.make_mutants(50, seed=SEED)
    b = fuzz.make_mutants(50, seed=SEED)
    assert [m.text for m in a] == [m.text for m in b]
    assert len({m.text for m in a}) > 40


_MODES = fuzz.available_modes()


@pytest.mark.parametrize("mode", list(_MODES))
def test_flex_opt_never_crashes(mode):
    """verify, loops (one-shot-bufferize + flex-to-loops), materialize, flash
    and the backends' full pipelines to LLVM. The upstream MLIR aborts listed
    in fuzz.KNOWN_UPSTREAM (each one guarded in our Python API, see
    test_python_api_survives_known_abort_inputs) are tolerated here."""
    mutants = fuzz.make_mutants(N_FLEX_OPT, seed=SEED + zlib.crc32(mode.encode()) % 1000)
    t0 = time.time()
    crashes = fuzz.find_crashes(mutants, mode, _MODES[mode])
    assert time.time() - t0 < 60, "fuzzing took too long"
    assert not crashes, "\n\n".join(c.describe() for c in crashes[:3])


def _run_worker(mutants, tmp_path, call):
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps([m.text for m in mutants]))
    import subprocess

    args = [sys.executable, "-m", "test.robustness.py_fuzz_worker", str(path)] + (["--call"] if call else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=subprocess_env(), cwd=str(ROOT))
    events = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return r, events


@pytest.mark.parametrize("batch", [0, 1])
def test_python_api_never_aborts(batch, tmp_path):
    """Module.parse in-process, then compile_mlir (materialize + JitFunction)
    for every backend and a call on random inputs, in a subprocess per batch:
    the process must survive, and every failure must be an MLIRError or a
    FlexBackendError."""
    per = N_PYTHON // 2
    mutants = fuzz.make_mutants(per * 2, seed=SEED + 7)[batch * per:(batch + 1) * per]
    r, events = _run_worker(mutants, tmp_path, call=True)
    if died_by_signal(r.returncode) or not events or events[-1].get("event") != "finished":
        started = [e for e in events if e["event"] == "start"]
        last = started[-1] if started else None
        m = mutants[last["index"]] if last else None
        pytest.fail(f"worker died (rc={r.returncode}) during {last and last['step']} of mutant "
                    f"{last and last['index']} ({m and m.seed_name}, {m and m.mutations}):\n"
                    f"{m and m.text}\n--- stderr tail ---\n" + "\n".join(r.stderr.splitlines()[-20:]))
    unexpected = [e for e in events if e["event"] == "done" and e["outcome"].startswith("unexpected")]
    assert not unexpected, "\n".join(
        f"mutant {e['index']} {e['step']}: {e['outcome']}\n{mutants[e['index']].text}" for e in unexpected[:3])
    done = [e for e in events if e["event"] == "done"]
    outcomes = {e["outcome"] for e in done}
    # The batch exercises both sides: some mutants fail cleanly, some compile.
    assert "MLIRError" in outcomes
    assert any(e["step"].startswith("compile") for e in done)


CRASHES = ROOT / "test/robustness/inputs/crashes"
# reproducer -> (worker step, expected outcome)
KNOWN_ABORTS = {
    "kv_group_size_oob.mlir": ("parse", "MLIRError"),
    # i1 memrefs: rejected by JitFunction's guard, or compiled once a
    # pipeline widens them (flex-widen-i1-memrefs); never an abort.
    "i1_memref_output.mlir": ("compile-reference", ("FlexBackendError", "ok")),
    "i1_capture_mask.mlir": ("compile-reference", ("FlexBackendError", "ok")),
    "array_index_attr.mlir": ("parse", "FlexBackendError"),
    "parallel_verifier_diagnostic.mlir": ("parse", "MLIRError"),
}


def test_python_api_survives_known_abort_inputs(tmp_path):
    """Inputs that used to kill the Python process (docs/robustness.md), in
    one worker; the racy parallel-verifier one 30 times."""
    names = sorted(KNOWN_ABORTS)
    texts = [(CRASHES / n).read_text() for n in names]
    texts += [(CRASHES / "parallel_verifier_diagnostic.mlir").read_text()] * 30
    mutants = [fuzz.Mutant("known", [], t) for t in texts]
    r, events = _run_worker(mutants, tmp_path, call=True)
    assert not died_by_signal(r.returncode), r.stderr[-3000:]
    assert events and events[-1]["event"] == "finished", r.stderr[-3000:]
    by = {(e["index"], e["step"]): e["outcome"] for e in events if e["event"] == "done"}
    for i, n in enumerate(names):
        step, outcome = KNOWN_ABORTS[n]
        assert by[(i, step)] in ((outcome,) if isinstance(outcome, str) else outcome), (n, by)


@pytest.mark.parametrize("name", sorted(KNOWN_ABORTS))
def test_known_abort_inputs_through_cli(name):
    """The same through `python -m torch_mlir_flex compile --run`."""
    from .helpers import require_cli
    from .test_cli import check_clean_error, run_cli

    require_cli()
    r = run_cli("compile", str(CRASHES / name), "--run")
    if name.startswith("i1_") and r.returncode == 0:
        return  # compiled (i1 widened): fine, it did not abort
    check_clean_error(r)
