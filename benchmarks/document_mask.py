"""Document masks (doc ids a runtime input): our tiled lowering vs
torch.compile(flex_attention), in one process on the same inputs.

    PYTHONPATH=python python -m benchmarks.document_mask [--S 4096] [--runs 5]

Run from the repository root. fp32, B=1, H=8, D=64, 8 documents of random
lengths summing to S; masks `doc[q] == doc[kv]` and the same and causal.
Each implementation is timed `--runs` times (median of `--reps` calls each,
implementations interleaved so that machine noise hits them alike); the
table gives the median over runs and ours / compiled. torch.compile's
BlockMask is built once, outside the timing (ours classifies its blocks
from the doc ids inside every call). "ours" uses OpenMP when a runtime is
found (as benchmarks/run.py), "ours 1T" does not; "ours dense pre-pass"
is ours with the mask classified by evaluating it on every point of each
block (the fallback), for comparison.
"""

import argparse
import statistics


import torch_mlir_flex  # noqa: F401  (must load before torch_mlir)
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.backend.pipelines import find_openmp_runtime, tiled_pipeline

from . import flex_ir as fi
from . import host as hs
from .timing import interleaved_medians

DOC_ONLY = """
        %dq = tensor.extract %doc[%m] : tensor<{S}xi64>
        %dk = tensor.extract %doc[%n] : tensor<{S}xi64>
        %c = arith.cmpi eq, %dq, %dk : i64"""


# The same masks in a form the interval analysis rejects (maxui is not
# analyzed; canonicalize folds maxui(m, m) = m after flex-to-flash has
# chosen): classified by the dense per-block pre-pass, for comparison.
def dense_form(mask):
    return ("\n        %mu = arith.maxui %m, %m : index" +
            mask.replace("%doc[%m]", "%doc[%mu]"))


def doc_ids(S, docs=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    cuts = torch.sort(torch.randperm(S - 1, generator=g)[: docs - 1] + 1).values
    lens = torch.diff(torch.cat([torch.tensor([0]), cuts, torch.tensor([S])]))
    return torch.repeat_interleave(torch.arange(docs), lens).to(torch.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--S", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    S, H, E = args.S, 8, 64
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, H, S, E, generator=g) for _ in range(3))
    doc = doc_ids(S)
    libomp = find_openmp_runtime()
    cases = {
        "document": (DOC_ONLY.format(S=S), lambda b, h, m, n: doc[m] == doc[n]),
        "document+causal": (fi.document_mask("doc", S),
                            lambda b, h, m, n: (doc[m] == doc[n]) & (m >= n)),
    }
    print(hs.line(hs.describe()))
    print(f"S={S} H={H} D={E} f32, doc lengths {torch.bincount(doc).tolist()}, "
          f"OpenMP {'on' if libomp else 'off'}")
    print("| mask | ours ms | ours 1T ms | ours dense pre-pass ms | compiled ms "
          "| ours / compiled | max err |")
    print("|---|---|---|---|---|---|---|")
    for name, (mask, t_mask) in cases.items():
        text = fi.attention_ir(B=1, Hq=H, M=S, N=S, E=E, mask_mod=mask,
                               captures=[("doc", f"tensor<{S}xi64>")])
        ours = JitFunction(text, "f", pipeline=tiled_pipeline(openmp=libomp is not None),
                           opt_level=3, shared_libs=[libomp] if libomp else [])
        ours1 = JitFunction(text, "f", pipeline=tiled_pipeline(), opt_level=3)
        dense_text = fi.attention_ir(B=1, Hq=H, M=S, N=S, E=E, mask_mod=dense_form(mask),
                                     captures=[("doc", f"tensor<{S}xi64>")])
        dense = JitFunction(dense_text, "f", pipeline=tiled_pipeline(openmp=libomp is not None),
                            opt_level=3, shared_libs=[libomp] if libomp else [])
        bm = create_block_mask(t_mask, 1, 1, S, S, device="cpu")
        torch._dynamo.reset()
        cflex = torch.compile(flex_attention, dynamic=False)
        ref = cflex(q, k, v, block_mask=bm)
        err = (ours(q, k, v, doc) - ref).abs().max().item()
        impls = {"ours": lambda: ours(q, k, v, doc), "ours 1T": lambda: ours1(q, k, v, doc),
                 "dense": lambda: dense(q, k, v, doc),
                 "compiled": lambda: cflex(q, k, v, block_mask=bm)}
        times = {i: [] for i in impls}
        for _ in range(args.runs):
            for i, f in impls.items():
                times[i].append(interleaved_medians({"f": f}, args.reps)["f"] * 1e3)
        med = {i: statistics.median(t) for i, t in times.items()}
        print(f"| {name} | {med['ours']:.2f} | {med['ours 1T']:.2f} | "
              f"{med['dense']:.2f} | {med['compiled']:.2f} | {med['ours'] / med['compiled']:.2f} | {err:.2e} |")


if __name__ == "__main__":
    main()
