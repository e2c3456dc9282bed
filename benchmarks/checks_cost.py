"""Cost of the runtime checks (flex-insert-checks) on the tiled backend.

    PYTHONPATH=python python -m benchmarks.checks_cost [--sizes 1024,2048] [--reps 10]

Same tiled pipeline with and without `flex-insert-checks`, on flex.attention
IR built by hand (benchmarks/flex_ir.py), fp32, B=1, H=8, D=64; the two
variants are called alternately; median and min times:

- "bias[ids[kv]]": score_mod `s + bias[ids[kv_idx]]` with runtime ids and
  torch-mlir's negative-index wrap on the data-dependent read: guarded;
- "alibi+causal" and "document": reads indexed by h / q_idx / kv_idx, which
  the pass proves in range: no check is inserted (same code).
"""

import argparse
import statistics
import time


import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch

from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import PIPELINES, find_openmp_runtime

from . import flex_ir as fi
from . import host as hs

H, E, TABLE = 8, 64, 64


def bias_by_ids(length: int) -> str:
    """s + bias[ids[kv_idx]] with torch-mlir's wrap of the data-dependent index."""
    return f"""
        %id = tensor.extract %ids[%n] : tensor<{length}xi64>
        %z = arith.constant 0 : i64
        %sz = arith.constant {TABLE} : i64
        %neg = arith.cmpi slt, %id, %z : i64
        %wr = arith.addi %id, %sz : i64
        %w = arith.select %neg, %wr, %id : i64
        %wi = arith.index_cast %w : i64 to index
        %bb = tensor.extract %bias[%wi] : tensor<{TABLE}xf32>
        %r = arith.addf %s, %bb : f32"""


def cases(S):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(-TABLE, TABLE, (S,), generator=g)
    bias = torch.randn(TABLE, generator=g)
    doc = torch.arange(S, dtype=torch.int64) // max(1, S // 7)
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)])
    return [
        ("bias[ids[kv]]", dict(score_mod=bias_by_ids(S),
                               captures=[("ids", f"tensor<{S}xi64>"), ("bias", f"tensor<{TABLE}xf32>")]),
         [ids, bias]),
        ("alibi+causal", dict(score_mod=fi.alibi("slopes", H), mask_mod=fi.CAUSAL,
                              captures=[("slopes", f"tensor<{H}xf32>")]), [slopes]),
        ("document", dict(mask_mod=fi.document_mask("doc", S),
                          captures=[("doc", f"tensor<{S}xi64>")]), [doc]),
    ]


def interleaved_times(fns, reps):
    """Per function (median, min) in ms, calls interleaved so that load
    changes on a shared machine hit both variants alike."""
    for fn in fns:
        fn()
    ts = [[] for _ in fns]
    for _ in range(reps):
        for f, t in zip(fns, ts):
            t0 = time.perf_counter()
            f()
            t.append((time.perf_counter() - t0) * 1e3)
    return [(statistics.median(t), min(t)) for t in ts]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--backend", default="tiled", choices=sorted(PIPELINES))
    a = ap.parse_args(argv)
    with_checks = PIPELINES[a.backend]
    without = with_checks.replace("flex-insert-checks,", "")
    assert without != with_checks, "the pipeline has no flex-insert-checks"
    libs = [find_openmp_runtime()] if "openmp" in with_checks and find_openmp_runtime() else []
    print(hs.line(hs.describe()))
    print(f"backend {a.backend}, B=1 H={H} D={E} fp32, {a.reps} interleaved calls")
    print("| case | S | checks in IR | with checks, ms (median / min) | without | ratio |")
    print("|---|---|---|---|---|---|")
    for S in [int(s) for s in a.sizes.split(",")]:
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(1, H, S, E, generator=g) for _ in range(3))
        for name, kw, caps in cases(S):
            text = fi.attention_ir(B=1, Hq=H, M=S, N=S, E=E, **kw)
            fns = [JitFunction(text, "f", pipeline=p, opt_level=3, shared_libs=libs)
                   for p in (with_checks, without)]
            n_checks = str(fns[0].lowered).count("flex.check_messages = [")
            outs = [f(q, k, v, *caps) for f in fns]
            torch.testing.assert_close(outs[0], outs[1])
            (m0, n0), (m1, n1) = interleaved_times(
                [lambda f=f: f(q, k, v, *caps) for f in fns], a.reps)
            print(f"| {name} | {S} | {'yes' if n_checks else 'no'} | {m0:.2f} / {n0:.2f} "
                  f"| {m1:.2f} / {n1:.2f} | {m0 / m1:.3f} / {n0 / n1:.3f} |")


if __name__ == "__main__":
    main()
