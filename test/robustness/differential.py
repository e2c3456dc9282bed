"""Randomized differential testing: random score_mod / mask_mod programs and
shapes, eager `flex_attention` vs `torch_mlir_flex.compile(..., backend=b)`.

A *group* is one shape configuration and one generated nn.Module (its Python
source is the reproducer) holding several flex calls, each with its own
random score_mod and mask_mod; a *case* is one flex call of a group. Every
compiled group is called on two input draws.

    python -m test.robustness.differential --cases 2000 --seed 7
    python -m test.robustness.differential --cases 50 --seed 3 --backend tiled -v
    python -m test.robustness.differential --show 3 --seed 7     # print group 3's source

On a mismatch or an error the group's source, the seed and the group index
are printed; `--show GROUP --seed SEED` regenerates that source.
"""

import argparse
import random
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import List, Optional

RTOL, ATOL = 1e-3, 1e-5
TABLE_K = 4  # relative-position table radius: table has 2K+1 entries


# --------------------------------------------------------------------------
# Expression grammar
# --------------------------------------------------------------------------


class Gen:
    """Random expressions as Python source. Int expressions are int tensors
    (the index arguments), bool expressions bool tensors, float expressions
    float tensors (the score)."""

    IDX = ["b", "h", "q_idx", "kv_idx"]

    def __init__(self, rng: random.Random, runtime_doc: bool):
        self.rng = rng
        self.runtime_doc = runtime_doc
        self.uses_doc = False

    def c(self, lo=0.1, hi=3.0):
        return f"{self.rng.uniform(lo, hi):.3f}"

    def int_expr(self, d=0):
        r = self.rng
        if d >= 2 or r.random() < 0.35:
            return r.choice(self.IDX + ["q_idx", "kv_idx", "(q_idx - kv_idx)"])
        op = r.randrange(7)
        a = self.int_expr(d + 1)
        if op == 0:
            return f"({a} + {self.int_expr(d + 1)})"
        if op == 1:
            return f"({a} - {self.int_expr(d + 1)})"
        if op == 2:
            return f"({a} * {r.randint(1, 3)})"
        if op == 3:
            return f"({a} // {r.randint(2, 7)})"  # floor division (negative operands too)
        if op == 4:
            return f"({a} % {r.randint(2, 7)})"  # Python remainder (sign of divisor)
        if op == 5:
            k = r.randint(1, 8)
            return f"({a}).clamp(-{k}, {k})"
        return f"torch.abs({a})"

    def bool_expr(self, d=0):
        r = self.rng
        if d >= 2 or r.random() < 0.4:
            op = r.randrange(6)
            if op == 0 and self.runtime_doc:
                self.uses_doc = True
                return "(doc[q_idx] == doc[kv_idx])"
            if op == 1:
                return f"(q_idx >= kv_idx)"
            if op == 2:
                return f"((q_idx - kv_idx).abs() <= {r.randint(0, 20)})"
            cmp = r.choice(["<", "<=", ">", ">=", "==", "!="])
            return f"({self.int_expr(d + 1)} {cmp} {self.int_expr(d + 1)})"
        op = r.randrange(3)
        if op == 0:
            return f"({self.bool_expr(d + 1)} & {self.bool_expr(d + 1)})"
        if op == 1:
            return f"({self.bool_expr(d + 1)} | {self.bool_expr(d + 1)})"
        return f"(~{self.bool_expr(d + 1)})"

    def float_expr(self, d=0):
        r = self.rng
        if d >= 3 or r.random() < 0.25:
            return r.choice(["score", "score", "self.bias[h]", f"(score * {self.c()})",
                             f"self.table[({self.int_expr(2)}).clamp(-{TABLE_K}, {TABLE_K}) + {TABLE_K}]"])
        op = r.randrange(11)
        a = self.float_expr(d + 1)
        if op == 0:
            return f"({a} + {self.float_expr(d + 1)})"
        if op == 1:
            return f"({a} - {self.float_expr(d + 1)})"
        if op == 2:
            return f"({a} * {self.c(-2, 2)})"
        if op == 3:
            c = self.c(1, 30)
            return f"(torch.tanh({a} / {c}) * {c})"  # soft-cap
        if op == 4:
            return f"torch.exp(torch.tanh({a}))"
        if op == 5:
            return f"torch.abs({a})"
        if op == 6:
            return f"torch.where({self.bool_expr(1)}, {a}, {self.float_expr(d + 1)})"
        if op == 7:
            return f"({a} + self.slope[h] * ({self.int_expr(1)}))"  # ALiBi-like
        if op == 8:
            return f"({a} + self.table[({self.int_expr(1)}).clamp(-{TABLE_K}, {TABLE_K}) + {TABLE_K}])"
        if op == 9:
            return f"({a} * self.hscale[h // {r.randint(1, 2)}])" if r.random() < 0.5 else f"({a} + self.bias[h])"
        return f"torch.where({a} > {self.c(-1, 1)}, {a}, {a} * 0.5)"


# --------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------


@dataclass
class Call:
    score: Optional[str]
    mask: Optional[str]
    scale: Optional[float]
    return_lse: bool
    # "dense": BlockMask.from_kv_blocks with one block (cheap to trace);
    # "create": create_block_mask (the usual API; slow to trace and run).
    mask_kind: str = "dense"


@dataclass
class Group:
    seed: int
    index: int
    B: int
    Hq: int
    Hkv: int
    M: int
    N: int
    E: int
    Ev: int
    runtime_doc: bool
    calls: List[Call] = field(default_factory=list)
    source: str = ""

    @property
    def shapes(self):
        return f"B={self.B} Hq={self.Hq} Hkv={self.Hkv} M={self.M} N={self.N} E={self.E} Ev={self.Ev}"


def _shape(rng: random.Random):
    B = rng.randint(1, 2)
    Hkv = rng.choice([1, 1, 2, 2, 3, 4])
    Hq = Hkv * rng.choice([1, 1, 2, 4])
    M = rng.choice([1, rng.randint(2, 9), rng.randint(10, 80), rng.randint(60, 140)])
    N = rng.choice([rng.randint(1, 16), rng.randint(17, 63), rng.randint(65, 150), 64, 128])
    E = rng.choice([8, 16, 24, 32, 40, 64])
    Ev = E if rng.random() < 0.7 else rng.choice([8, 16, 48])
    return B, Hq, Hkv, M, N, E, Ev


def make_group(seed: int, index: int, calls_per_group: int = 8) -> Group:
    rng = random.Random(f"{seed}:{index}")
    B, Hq, Hkv, M, N, E, Ev = _shape(rng)
    runtime_doc = rng.random() < 0.4
    g = Group(seed, index, B, Hq, Hkv, M, N, E, Ev, runtime_doc)
    any_doc = False
    for _ in range(calls_per_group):
        gen = Gen(rng, runtime_doc)
        score = gen.float_expr() if rng.random() < 0.85 else None
        mask = gen.bool_expr() if rng.random() < 0.7 else None
        any_doc |= gen.uses_doc
        scale = None if rng.random() < 0.7 else round(rng.uniform(0.05, 1.0), 3)
        g.calls.append(Call(score, mask, scale, rng.random() < 0.4,
                            "create" if rng.random() < 0.2 else "dense"))
    g.runtime_doc = any_doc
    g.source = render(g)
    return g


def render(g: Group) -> str:
    L = []
    w = L.append
    w("import torch")
    w("from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention")
    w("")
    w(f"# differential group {g.index} of seed {g.seed}: {g.shapes}")
    w(f"B, HQ, HKV, M, N, E, EV = {g.B}, {g.Hq}, {g.Hkv}, {g.M}, {g.N}, {g.E}, {g.Ev}")
    w("")
    w("")
    w("def dense_block_mask(mask_mod):")
    w("    # One (M x N) block, marked partial: mask_mod decides every entry.")
    w("    return BlockMask.from_kv_blocks(torch.ones(B, HQ, 1, dtype=torch.int32),")
    w("                                    torch.zeros(B, HQ, 1, 1, dtype=torch.int32),")
    w("                                    BLOCK_SIZE=(M, N), mask_mod=mask_mod, seq_lengths=(M, N))")
    w("")
    w("")
    w("class Model(torch.nn.Module):")
    w("    def __init__(self):")
    w("        super().__init__()")
    w(f"        gen = torch.Generator().manual_seed({g.seed * 1000 + g.index})")
    w("        self.register_buffer('bias', torch.randn(HQ, generator=gen))")
    w("        self.register_buffer('slope', torch.rand(HQ, generator=gen) * 0.5)")
    w("        self.register_buffer('hscale', torch.rand(HQ, generator=gen) + 0.5)")
    w(f"        self.register_buffer('table', torch.randn({2 * TABLE_K + 1}, generator=gen))")
    w("")
    w("    def forward(self, q, k, v" + (", doc" if g.runtime_doc else "") + "):")
    w("        outs = []")
    for i, c in enumerate(g.calls):
        kw = []
        if c.score:
            w(f"        def score_{i}(score, b, h, q_idx, kv_idx):")
            w(f"            return {c.score}")
            kw.append(f"score_mod=score_{i}")
        if c.mask:
            w(f"        def mask_{i}(b, h, q_idx, kv_idx):")
            w(f"            return {c.mask}")
            if c.mask_kind == "create":
                kw.append(f"block_mask=create_block_mask(mask_{i}, B, HQ, M, N, device='cpu')")
            else:
                kw.append(f"block_mask=dense_block_mask(mask_{i})")
        if g.Hq != g.Hkv:
            kw.append("enable_gqa=True")
        if c.scale is not None:
            kw.append(f"scale={c.scale}")
        if c.return_lse:
            kw.append("return_lse=True")
        w(f"        r = flex_attention(q, k, v, {', '.join(kw)})")
        w("        outs.extend(r if isinstance(r, tuple) else (r,))")
    w("        return tuple(outs)")
    w("")
    w("")
    w("def get_inputs(draw=0):")
    w(f"    gen = torch.Generator().manual_seed({g.seed * 1000 + g.index} * 10 + draw)")
    w("    q = torch.randn(B, HQ, M, E, generator=gen)")
    w("    k = torch.randn(B, HKV, N, E, generator=gen)")
    w("    v = torch.randn(B, HKV, N, EV, generator=gen)")
    if g.runtime_doc:
        w("    doc = torch.sort(torch.randint(0, 3, (max(M, N),), generator=gen)).values")
        w("    return q, k, v, doc")
    else:
        w("    return q, k, v")
    return "\n".join(L) + "\n"


def load(source: str):
    ns = {}
    exec(compile(source, "<differential-group>", "exec"), ns)
    return ns["Model"], ns["get_inputs"]


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


@dataclass
class Failure:
    group: Group
    backend: str
    what: str

    def report(self) -> str:
        g = self.group
        return (f"=== differential mismatch: seed {g.seed}, group {g.index}, backend {self.backend!r} ({g.shapes})\n"
                f"{self.what}\n"
                f"--- reproducer (python -m test.robustness.differential --show {g.index} --seed {g.seed}) ---\n"
                f"{g.source}"
                f"# import torch_mlir_flex  (first); fn = torch_mlir_flex.compile(Model(), get_inputs(), "
                f"backend={self.backend!r})\n")


def eager(model, inputs):
    import torch

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return model(*inputs)


def compare(want, got, names=None):
    """None if equal within tolerance, else a description."""
    import torch

    if not isinstance(got, (tuple, list)):
        got = (got,)
    if len(want) != len(got):
        return f"{len(got)} results, expected {len(want)}"
    for i, (a, b) in enumerate(zip(want, got)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"result {i}: {tuple(b.shape)} {b.dtype}, expected {tuple(a.shape)} {a.dtype}"
        try:
            torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL, equal_nan=True)
        except AssertionError as e:
            return f"result {i}: {e}"
    return None


def run_group(g: Group, backends, draws: int = 2, verbose: bool = False) -> List[Failure]:
    """Compiles g's model for every backend and compares each with eager on
    `draws` input draws; returns the failures."""
    import torch_mlir_flex

    from torch_mlir_flex.backend import compile_mlir

    Model, get_inputs = load(g.source)
    model = Model().eval()
    fails = []
    # torch_mlir_flex.compile for one backend (alternating per group), then
    # the same flex IR through compile_mlir for the others: export, import
    # and the frontend (most of the time) run once per group.
    order = backends[g.index % len(backends):] + backends[:g.index % len(backends)]
    first = None
    wants = {}
    for b in order:
        t0 = time.time()
        try:
            if first is None:
                fn = first = torch_mlir_flex.compile(model, get_inputs(0), backend=b)
            else:
                fn = compile_mlir(first.flex_ir, backend=b, state=first.state)
        except Exception as e:
            fails.append(Failure(g, b, f"compile raised {type(e).__name__}: {e}"))
            if first is None:
                break
            continue
        for d in range(draws):
            inputs = get_inputs(d)
            if d not in wants:
                wants[d] = eager(model, inputs)
            want = wants[d]
            try:
                got = fn(*inputs)
            except Exception as e:
                fails.append(Failure(g, b, f"call raised {type(e).__name__}: {e}"))
                break
            msg = compare(want, got)
            if msg:
                fails.append(Failure(g, b, f"input draw {d}: {msg}"))
                break
        if verbose:
            print(f"group {g.index} [{b}] {g.shapes}: {len(g.calls)} calls, "
                  f"{'FAIL' if fails and fails[-1].backend == b else 'ok'} ({time.time() - t0:.1f}s)", flush=True)
    return fails


def default_backends():
    from torch_mlir_flex.backend import PIPELINES

    return [b for b in ("reference", "tiled") if b in PIPELINES]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200, help="flex calls to test (per backend)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls-per-group", type=int, default=8)
    ap.add_argument("--draws", type=int, default=2, help="input draws per compiled model")
    ap.add_argument("--backend", action="append", help="reference / tiled (default: all that exist)")
    ap.add_argument("--show", type=int, metavar="GROUP", help="print the source of one group and exit")
    ap.add_argument("--start", type=int, default=0, help="first group index")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if a.show is not None:
        print(make_group(a.seed, a.show, a.calls_per_group).source)
        return 0
    import torch_mlir_flex  # noqa: F401  (before torch_mlir)

    backends = a.backend or default_backends()
    n_groups = -(-a.cases // a.calls_per_group)
    t0 = time.time()
    fails = []
    for i in range(a.start, a.start + n_groups):
        g = make_group(a.seed, i, a.calls_per_group)
        try:
            fs = run_group(g, backends, draws=a.draws, verbose=a.verbose)
        except Exception:
            fs = [Failure(g, "eager", traceback.format_exc())]
        for f in fs:
            print(f.report(), flush=True)
        fails += fs
    print(f"{n_groups * a.calls_per_group} cases x {len(backends)} backend(s) {backends}, seed {a.seed}: "
          f"{len(fails)} failing group/backend pair(s), {time.time() - t0:.0f}s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
