"""Mutation fuzzer for flex IR (see docs/robustness.md).

Takes seed modules (test/Dialect/Flex/**/*.mlir, split at `// -----`, and
test/robustness/inputs/*.mlir), applies textual mutations with a fixed seed,
and runs `flex-opt` on the mutants.  The property checked is only "never dies
by a signal": exit code 0, or 1 with an `error:` diagnostic, are both fine.

    python -m test.robustness.fuzz --mutants 2000 --seed 7      # standalone
    python -m test.robustness.fuzz --token --python --mutants 5000 --seed 9
                                   # single-token mutants (token_fuzz.py), flex-opt + Python API
"""

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SPLIT = "// -----"

BUFFERIZE = ("--one-shot-bufferize=bufferize-function-boundaries "
             "function-boundary-type-conversion=identity-layout-map")
# Modes: extra flex-opt arguments. "verify" only parses and verifies.
MODES = {
    "verify": [],
    "loops": [BUFFERIZE, "--flex-to-loops"],
}
# Modes for passes that may not be in every build: (mode, pass, args).
OPTIONAL_MODES = [
    ("materialize", "flex-materialize", ["--flex-materialize"]),
    ("flash", "flex-to-flash", ["--flex-to-flash", "--canonicalize", BUFFERIZE, "--flex-to-loops"]),
]


def _pipeline_modes():
    """The backend's named pipelines to LLVM, as flex-opt --pass-pipeline."""
    sys.path.insert(0, str(ROOT / "python" / "torch_mlir_flex" / "backend"))
    try:
        import pipelines  # plain module: no torch / MLIR imports
    finally:
        sys.path.pop(0)
    return {f"pipeline-{name}": [f"--pass-pipeline={p}"] for name, p in sorted(pipelines.PIPELINES.items())}


def available_modes():
    """MODES plus the optional ones this flex-opt has."""
    modes = dict(MODES)
    helptext = subprocess.run([flex_opt_path(), "--help"], capture_output=True, text=True).stdout
    for mode, pass_name, args in OPTIONAL_MODES:
        if f"--{pass_name} " in helptext:
            modes[mode] = args
    modes.update(_pipeline_modes())
    return modes


def flex_opt_path() -> str:
    if os.environ.get("FLEX_OPT"):
        return os.environ["FLEX_OPT"]
    for p in (ROOT / "build" / "bin" / "flex-opt",
              ROOT / "python" / "torch_mlir_flex" / "_bin" / "flex-opt"):
        if p.exists():
            return str(p)
    raise FileNotFoundError("flex-opt not found (build/bin or python/torch_mlir_flex/_bin)")


def _strip_lit(text: str) -> str:
    # RUN/CHECK lines and expected-error annotations only add noise.
    return "\n".join(l for l in text.splitlines()
                     if not re.match(r"\s*//\s*(RUN|CHECK|expected-)", l)
                     and "expected-error" not in l) + "\n"


def seed_modules() -> List[Tuple[str, str]]:
    """(name, text) of every seed module: our inputs plus the lit tests."""
    out = []
    files = sorted((HERE / "inputs").glob("*.mlir")) + sorted((ROOT / "test" / "Dialect" / "Flex").rglob("*.mlir"), key=lambda p: p.name)
    for f in files:
        chunks = f.read_text().split(SPLIT)
        for i, c in enumerate(chunks):
            c = _strip_lit(c)
            if "flex." not in c:
                continue
            out.append((f"{f.relative_to(ROOT)}#{i}", c))
    return out


# --------------------------------------------------------------------------
# Mutations: each takes (text, rng) and returns a new text (maybe unchanged).
# --------------------------------------------------------------------------

_TYPES = ["f32", "f16", "bf16", "f64", "i1", "i32", "i64", "index"]
_GARBAGE = ["%", "^bb9", "{", "}", "(", ")", ":", ",", "->", "tensor<", "x", "?", "0", "-1",
            "9999999999999999999", "flex.yield", "flex.attention", "ins(", "outs(", "captures(",
            "score_mod", "mask_mod", "scale(", "offsets(", "logsumexp(", "max_scores(",
            "kv_blocks(", "full_kv_blocks(", "block_sizes", "[0, 0]",
            "\"", "#map", "!foo", "@main", "%q", "%k", "%v", "memref<", "tensor<0x0xf32>",
            "index", "f32", "i1", "arith.constant 0 : index", "<<", ">>", "nan", "inf", ";"]


def _ssa_uses(text):
    return [m for m in re.finditer(r"%[A-Za-z0-9_#]+", text)]


def m_drop_operand(text, rng):
    # Remove one "%x, " or ", %x" from a parenthesised list.
    ms = list(re.finditer(r"(%[A-Za-z0-9_#]+\s*,\s*)|(,\s*%[A-Za-z0-9_#]+)", text))
    if not ms:
        return text
    m = rng.choice(ms)
    return text[:m.start()] + text[m.end():]


def m_change_type(text, rng):
    ms = list(re.finditer(r"\b(f32|f16|bf16|f64|i1|i32|i64|index)\b", text))
    if not ms:
        return text
    m = rng.choice(ms)
    return text[:m.start()] + rng.choice(_TYPES) + text[m.end():]


def m_change_shape(text, rng):
    ms = list(re.finditer(r"(?<=[<x])(\d+|\?)(?=x)", text))
    if not ms:
        return text
    m = rng.choice(ms)
    new = rng.choice(["0", "1", "2", "3", "5", "?", "7", "64", str(int(m.group(0)) + 1) if m.group(0).isdigit() else "4"])
    return text[:m.start()] + new + text[m.end():]


def m_change_rank(text, rng):
    ms = list(re.finditer(r"(tensor|memref)<([0-9?x]*)(f32|f16|bf16|i64|i1)>", text))
    if not ms:
        return text
    m = rng.choice(ms)
    dims = m.group(2)
    dims = dims[:-2] if rng.random() < 0.5 and len(dims) >= 2 else dims + "3x"
    return text[:m.start()] + f"{m.group(1)}<{dims}{m.group(3)}>" + text[m.end():]


def m_truncate(text, rng):
    return text[:rng.randrange(len(text) + 1)]


def m_delete_line(text, rng):
    lines = text.splitlines(True)
    if len(lines) < 2:
        return text
    i = rng.randrange(len(lines))
    return "".join(lines[:i] + lines[i + 1:])


def m_duplicate_line(text, rng):
    lines = text.splitlines(True)
    if not lines:  # an earlier mutation emptied the text
        return text
    cands = [i for i, l in enumerate(lines) if "flex.yield" in l] or list(range(len(lines)))
    i = rng.choice(cands)
    return "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])


def m_swap_lines(text, rng):
    lines = text.splitlines(True)
    if len(lines) < 3:
        return text
    i = rng.randrange(len(lines) - 1)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return "".join(lines)


def m_swap_region_args(text, rng):
    ms = list(re.finditer(r"\^bb0\(([^)]*)\)", text))
    if not ms:
        return text
    m = rng.choice(ms)
    args = [a.strip() for a in m.group(1).split(",")]
    if len(args) < 2:
        return text
    i, j = rng.sample(range(len(args)), 2)
    args[i], args[j] = args[j], args[i]
    return text[:m.start()] + "^bb0(" + ", ".join(args) + ")" + text[m.end():]


def m_region_arg_type(text, rng):
    ms = list(re.finditer(r"\^bb0\(([^)]*)\)", text))
    if not ms:
        return text
    m = rng.choice(ms)
    args = [a.strip() for a in m.group(1).split(",")]
    op = rng.choice(["drop", "add", "retype"])
    if op == "drop" and args:
        args.pop(rng.randrange(len(args)))
    elif op == "add":
        args.insert(rng.randrange(len(args) + 1), f"%extra{rng.randrange(9)}: {rng.choice(_TYPES)}")
    elif args:
        i = rng.randrange(len(args))
        args[i] = args[i].split(":")[0] + ": " + rng.choice(_TYPES)
    return text[:m.start()] + "^bb0(" + ", ".join(args) + ")" + text[m.end():]


def m_yield(text, rng):
    ms = list(re.finditer(r"flex\.yield[^\n]*", text))
    if not ms:
        return text
    m = rng.choice(ms)
    new = rng.choice([
        "flex.yield",
        "flex.yield %s, %s : f32, f32",
        "flex.yield %b : index",
        "flex.yield %h : index",
        m.group(0) + "\n        " + m.group(0),
        "flex.yield %m, %n : index, index",
    ])
    return text[:m.start()] + new + text[m.end():]


def m_garbage(text, rng):
    ws = [m.start() for m in re.finditer(r"\s", text)] or [0]
    i = rng.choice(ws)
    return text[:i] + " " + rng.choice(_GARBAGE) + text[i:]


def m_swap_ssa(text, rng):
    ms = _ssa_uses(text)
    if len(ms) < 2:
        return text
    m = rng.choice(ms)
    other = rng.choice(ms).group(0)
    return text[:m.start()] + other + text[m.end():]


def m_attr(text, rng):
    choice = rng.randrange(4)
    if choice == 0:
        return re.sub(r"scale\([^)]*\)", "scale(" + rng.choice(["0.0", "-1.0", "1e39", "nan", "0x7FC00000", "1", "\"x\""]) + ")", text, count=1)
    if choice == 1:
        g = rng.choice(["0", "-1", "3", "1000", "9223372036854775807"])
        if "kv_group_size" in text:
            return re.sub(r"kv_group_size = [-0-9]+", f"kv_group_size = {g}", text, count=1)
        return re.sub(r"(scale\([^)]*\))", rf"\1 {{kv_group_size = {g} : i64}}", text, count=1)
    if choice == 2:
        # offsets with a wrong count or a non-index value.
        if "offsets(" in text:
            return re.sub(r"offsets\(([^)]*)\)", lambda m: "offsets(" + m.group(1).split(",")[0] + ")", text, count=1)
        return text.replace(" outs(", " offsets(%q) outs(", 1)
    # drop / move an optional clause
    return re.sub(rng.choice([r"logsumexp\([^)]*\)", r"max_scores\([^)]*\)", r"captures\([^)]*\)"]), "", text, count=1)


def m_remove_region(text, rng):
    for kw in rng.sample(["score_mod", "mask_mod"], 2):
        i = text.find(kw + " {")
        if i >= 0:
            j = text.find("}", i)
            return text[:i] + text[j + 1:]
    return text


MUTATIONS = [m_drop_operand, m_change_type, m_change_shape, m_change_rank, m_truncate,
             m_delete_line, m_duplicate_line, m_swap_lines, m_swap_region_args,
             m_region_arg_type, m_yield, m_garbage, m_swap_ssa, m_attr, m_remove_region]


def mutate(text: str, rng: random.Random, max_steps: int = 3) -> Tuple[str, List[str]]:
    applied = []
    for _ in range(rng.randint(1, max_steps)):
        f = rng.choice(MUTATIONS)
        text = f(text, rng)
        applied.append(f.__name__)
    return text, applied


@dataclass
class Mutant:
    seed_name: str
    mutations: List[str]
    text: str
    # flex-opt argument lists to run it with (token mutants: its file's RUN lines)
    runs: Optional[List[List[str]]] = None


def make_mutants(n: int, seed: int, seeds: Optional[Sequence[Tuple[str, str]]] = None) -> List[Mutant]:
    rng = random.Random(seed)
    seeds = list(seeds if seeds is not None else seed_modules())
    out = []
    for i in range(n):
        name, text = seeds[i % len(seeds)]
        t, muts = mutate(text, rng)
        out.append(Mutant(name, muts, t))
    return out


# --------------------------------------------------------------------------
# Running flex-opt
# --------------------------------------------------------------------------


@dataclass
class Crash:
    mode: str
    args: List[str]
    returncode: int
    mutant: Mutant
    stderr: str

    def describe(self) -> str:
        sig = -self.returncode
        name = signal.Signals(sig).name if sig > 0 else f"exit {self.returncode}"
        return (f"flex-opt {' '.join(self.args)} died with {name} on a mutant of "
                f"{self.mutant.seed_name} ({', '.join(self.mutant.mutations)}):\n"
                f"----- input -----\n{self.mutant.text}\n----- stderr (tail) -----\n"
                + "\n".join(self.stderr.splitlines()[-15:]))


# Aborts inside upstream MLIR 22.1.8 that our Python JIT guards against
# (backend/prechecks.py) but a bare flex-opt --pass-pipeline=<to LLVM> still
# hits. (array<index: ...>, which crashes the parser, and out-of-range
# transform sizes are rejected by flex-opt itself: tools/flex-opt/PreVerify.cpp.)
KNOWN_UPSTREAM = {
    # name: (substrings that must all be in stderr, explanation)
    "i1-memref": (["integralElementType.getWidth() >= 8"],
                  "finalize-memref-to-llvm asserts on memref.load/store of i1 (sub-byte) elements; "
                  "backend/jit.py rejects such IR before that pass"),
}


def known_upstream(stderr: str) -> Optional[str]:
    for name, (needles, why) in KNOWN_UPSTREAM.items():
        if all(n in stderr for n in needles):
            return f"{name}: {why}"
    return None


def _bad(rc: int) -> bool:
    # 0 = ok, 1 = diagnostic; negative = killed by a signal; anything else
    # (e.g. 134 from a shell, 139) is also a crash.
    return rc not in (0, 1)


def run_flex_opt(texts: Sequence[str], args: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Runs `flex-opt --split-input-file ARGS` once on the `// -----`-joined texts."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(("\n" + SPLIT + "\n").join(texts))
        path = f.name
    try:
        return subprocess.run([flex_opt_path(), "--split-input-file", *args, path, "-o", os.devnull],
                              capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(path)


def find_crashes(mutants: Sequence[Mutant], mode: str, args: Sequence[str], batch: int = 50,
                 allow_known: bool = True) -> List[Crash]:
    """Batches mutants per flex-opt process; a batch that crashes is rerun
    one mutant per process to name the culprits."""
    crashes = []
    for i in range(0, len(mutants), batch):
        group = mutants[i:i + batch]
        r = run_flex_opt([m.text for m in group], args)
        if not _bad(r.returncode):
            continue
        for m in group:
            r1 = run_flex_opt([m.text], args)
            if _bad(r1.returncode) and not (allow_known and known_upstream(r1.stderr)):
                crashes.append(Crash(mode, list(args), r1.returncode, m, r1.stderr))
    return crashes


def find_token_crashes(mutants: Sequence[Mutant], modes: dict, allow_known: bool = True,
                       log=None) -> List[Crash]:
    """Single-token mutants (token_fuzz.py): each through flex-opt with its
    file's RUN-line arguments, then all of them through every mode in `modes`."""
    groups = {}
    for m in mutants:
        for args in m.runs or [[]]:
            groups.setdefault(tuple(args), []).append(m)
    crashes = []
    for args, group in groups.items():
        crashes += find_crashes(group, "lit " + " ".join(args), list(args), allow_known=allow_known)
    for mode, args in modes.items():
        crashes += find_crashes(mutants, mode, args, allow_known=allow_known)
        if log:
            log(f"{mode}: {len(mutants)} mutants, {len(crashes)} crash(es) so far")
    return crashes


def python_worker(texts: Sequence[str], call: bool, timeout: float = 240.0):
    """Runs py_fuzz_worker.py on `texts` in a fresh interpreter ->
    (CompletedProcess, list of its JSON events)."""
    import json

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(list(texts), f)
        path = f.name
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        r = subprocess.run([sys.executable, "-m", "test.robustness.py_fuzz_worker", path]
                           + (["--call"] if call else []),
                           capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    finally:
        os.unlink(path)
    return r, [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


def find_python_failures(mutants: Sequence[Mutant], call: bool = False, chunk: int = 250,
                         log=None) -> List[str]:
    """The mutants through Module.parse and compile_mlir (py_fuzz_worker.py),
    `chunk` per process; a dead worker is restarted after the mutant it died
    on. Returns a description per abort or unexpected exception."""
    failures, start = [], 0
    while start < len(mutants):
        group = mutants[start:start + chunk]
        r, events = python_worker([m.text for m in group], call, timeout=60.0 + 5.0 * len(group))
        for e in events:
            if e["event"] == "done" and e["outcome"].startswith("unexpected"):
                m = group[e["index"]]
                failures.append(f"{m.seed_name} {m.mutations} {e['step']}: {e['outcome']}\n{m.text}")
        if events and events[-1].get("event") == "finished":
            start += len(group)
        else:
            started = [e for e in events if e["event"] == "start"]
            i = started[-1]["index"] if started else 0
            m = group[i]
            failures.append(f"worker died (rc={r.returncode}) in {started[-1]['step'] if started else '?'} of "
                            f"{m.seed_name} {m.mutations}:\n{m.text}\n" + "\n".join(r.stderr.splitlines()[-15:]))
            start += i + 1
        if log:
            log(f"python API: {start}/{len(mutants)} mutants, {len(failures)} failure(s)")
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", default="all", help="one of the modes (see --list-modes), or all")
    ap.add_argument("--list-modes", action="store_true")
    ap.add_argument("--out", help="directory to write crashing inputs to")
    ap.add_argument("--python", action="store_true",
                    help="with --token: also run the mutants through Module.parse and compile_mlir")
    ap.add_argument("--token", action="store_true",
                    help="single-token mutants of the lit inputs (token_fuzz.py), run with their "
                         "files' RUN-line flex-opt arguments and the backend pipelines")
    a = ap.parse_args(argv)
    all_modes = available_modes()
    if a.list_modes:
        for k, v in all_modes.items():
            print(k, " ".join(v))
        return 0
    modes = list(all_modes) if a.mode == "all" else [a.mode]
    if a.token:
        from .token_fuzz import make_token_mutants

        mutants = make_token_mutants(a.mutants, a.seed)
        total = find_token_crashes(mutants, {m: all_modes[m] for m in modes if m.startswith("pipeline")},
                                   log=print)
        print(f"{len(mutants)} single-token mutants, {len(total)} crash(es) in flex-opt")
        if a.python:
            failures = find_python_failures(mutants, log=print)
            print("\n\n".join(failures[:5]))
            print(f"{len(mutants)} single-token mutants, {len(failures)} failure(s) in the Python API")
            if failures and not total:
                return 1
        modes = []
    else:
        mutants = make_mutants(a.mutants, a.seed)
        total = []
    for mode in modes:
        cs = find_crashes(mutants, mode, all_modes[mode])
        total += cs
        print(f"{mode}: {len(mutants)} mutants, {len(cs)} crash(es)")
    for i, c in enumerate(total):
        print(c.describe())
        if a.out:
            Path(a.out).mkdir(parents=True, exist_ok=True)
            Path(a.out, f"crash_{c.mode}_{i}.mlir").write_text(c.mutant.text)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
