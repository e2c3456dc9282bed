"""Single-token mutations of the lit inputs (issue 9 acceptance; see
docs/robustness.md): every mutant differs from one `// -----` chunk of a lit
test (or of inputs/*.mlir) in exactly one token: deleted, duplicated, swapped
with its neighbour, or replaced by another token of the corpus or by a
boundary value (INT64_MIN, 2^64, 1e308, nan, ...). Each mutant runs through
flex-opt with the flex-opt arguments of its file's RUN lines (fuzz.py
`find_crashes`), and through the Python API (py_fuzz_worker.py).
"""

import random
import re
import shlex
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SPLIT = "// -----"

_TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"'            # string
    r"|[%^@#!][\w$.#-]*"              # SSA value, block, symbol, alias, dialect type
    r"|0x[0-9A-Fa-f]+"                # hex literal
    r"|(?<=[\d?])x"                   # shape separator: 4x?xf32
    r"|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"  # number
    r"|[A-Za-z_][\w$.]*"              # keyword, op or type name
    r"|->|::|\S")                     # punctuation

BOUNDARY = [
    "0", "-1", "1", "2", "3", "-2", "8", "64", "255", "256", "65536", "2147483647", "-2147483648",
    "4294967296", "9223372036854775807", "-9223372036854775808", "-9223372036854775807",
    "18446744073709551616", "-99999999999999999999", "0.0", "-0.0", "1e308", "-1e308", "1e-320",
    "nan", "inf", "0x7FC00000", "0xFFFFFFFFFFFFFFFF", "true", "false", "?",
]


def strip_comments(text: str) -> str:
    """Drops `//` comments (RUN/CHECK/expected-* lines and prose): mutating
    them would change nothing."""
    lines = (re.sub(r"//.*$", "", l) if '"' not in l else re.sub(r"^\s*//.*$", "", l)
             for l in text.splitlines())
    return "\n".join(l for l in lines if l.strip()) + "\n"


def run_args(text: str) -> List[List[str]]:
    """flex-opt arguments of every `// RUN:` line that runs flex-opt on %s,
    without %s, -split-input-file and -verify-diagnostics (the fuzzer adds
    its own splitting and checks only for crashes)."""
    joined = re.sub(r"\\\n\s*//\s*RUN:", " ", text)
    out = []
    for line in re.findall(r"//\s*RUN:(.*)", joined):
        first = line.split("|")[0].split()
        if "%s" not in first or "flex-opt" not in first:
            continue
        args = shlex.split(line.split("|")[0])
        args = [a for a in args[args.index("flex-opt") + 1:]
                if not a.startswith(("2>", ">")) and a not in ("%s", "-split-input-file", "--split-input-file", "-verify-diagnostics",
                             "--verify-diagnostics")]
        if args not in out:
            out.append(args)
    return out or [[]]


def lit_seeds() -> List[Tuple[str, str, List[List[str]]]]:
    """(name, text, flex-opt argument lists) of every chunk of the lit tests
    (test/Dialect/Flex and its folders) and of inputs/*.mlir, comments stripped."""
    out = []
    files = sorted((ROOT / "test" / "Dialect" / "Flex").rglob("*.mlir"), key=lambda p: p.name) + sorted((HERE / "inputs").glob("*.mlir"))
    for f in files:
        whole = f.read_text()
        runs = run_args(whole)
        for i, chunk in enumerate(whole.split(SPLIT)):
            text = strip_comments(chunk)
            if re.search(r"\w\.\w", text):  # holds at least one op
                out.append((f"{f.relative_to(ROOT)}#{i}", text, runs))
    return out


def tokens(text: str) -> List[re.Match]:
    return list(_TOKEN.finditer(text))


def vocabulary(seeds: Sequence[Tuple[str, str, object]]) -> List[str]:
    """Every distinct token of the seeds, in a fixed order."""
    seen: Dict[str, None] = {}
    for _, text, *_ in seeds:
        for m in tokens(text):
            seen.setdefault(m.group(0), None)
    return list(seen)


def mutate_token(text: str, rng: random.Random, vocab: Sequence[str]) -> Tuple[str, str]:
    """One single-token mutation of `text` -> (new text, description)."""
    toks = tokens(text)
    if not toks:
        return text, "no tokens"
    numbers = [j for j, t in enumerate(toks) if t.group(0)[0].isdigit()]
    # A third of the mutants change a number (sizes, attributes, transform
    # parameters): most out-of-range classes hide there.
    if numbers and rng.random() < 0.33:
        i = rng.choice(numbers)
        kind = "boundary"
    else:
        i = rng.randrange(len(toks))
        kind = rng.choice(["delete", "duplicate", "swap", "boundary", "vocab", "vocab", "same-text"])
    m = toks[i]
    old = m.group(0)
    if kind == "delete":
        new = ""
    elif kind == "duplicate":
        new = old + " " + old
    elif kind == "swap" and i + 1 < len(toks) and "\n" not in text[m.end():toks[i + 1].start()]:
        n = toks[i + 1]
        return (text[:m.start()] + n.group(0) + text[m.end():n.start()] + old + text[n.end():],
                f"swap {old!r} <-> {n.group(0)!r} at {m.start()}")
    elif kind == "boundary" or (kind == "swap"):
        # Numbers keep their sign position: "-" before them is a token too.
        new = rng.choice(BOUNDARY)
    elif kind == "same-text":
        new = rng.choice(toks).group(0)
    else:
        new = rng.choice(vocab)
    return text[:m.start()] + new + text[m.end():], f"{kind} {old!r} -> {new!r} at {m.start()}"


def make_token_mutants(n: int, seed: int, seeds=None):
    """n single-token mutants (fuzz.Mutant, with .args = flex-opt argument
    lists of the seed's file), cycling over the seeds; deterministic."""
    from .fuzz import Mutant

    rng = random.Random(seed)
    seeds = list(seeds if seeds is not None else lit_seeds())
    vocab = vocabulary(seeds)
    out = []
    for k in range(n):
        name, text, runs = seeds[k % len(seeds)]
        for _ in range(5):  # a mutation may leave the text unchanged
            new, what = mutate_token(text, rng, vocab)
            if new != text:
                break
        out.append(Mutant(name, [what], new, runs))
    return out
