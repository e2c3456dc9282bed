"""Read rate of the few-row product kernels per ISA (lib/Runtime/Gemv/),
standalone: one pass over a Qwen2-0.5B-shaped weight set (hidden 896, 24
layers of q 896x896, k/v 128x896, o 896x896, gate/up 4864x896, down
896x4864, and the 151936x896 lm head) is what one decode step reads; the
kernels run it through flex_gemv_f32 / flex_gemv_bf16 of the built runtime,
on torch's threads, each ISA forced in turn, and the f32 pass once more on
the scalar loop that AVX2 hosts ran before these kernels (FlexGemv.c of
`--old-commit`, built without its AVX-512 path). Prints GB/s of weights
read (best of `--repeat` rounds, the variants in turn in each) and the
host's CPU.

    PYTHONPATH=python python lib/Runtime/Gemv/gemv_bench.py [--rows 1] [--dtype f32 bf16] [--threads 1]
"""

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import torch

from torch_mlir_flex.backend import blas, cpu_features

HIDDEN, LAYERS, FFN, VOCAB = 896, 24, 4864, 151936
LAYER = [(896, 896), (128, 896), (128, 896), (896, 896), (FFN, 896), (FFN, 896), (896, FFN)]
OLD_COMMIT = "f929ae3"  # the last FlexGemv.c before the per-ISA kernels
HERE = os.path.dirname(os.path.abspath(__file__))


def weights(dtype):
    """The weight set as [N, K] tensors, in a decode step's order."""
    g = torch.Generator().manual_seed(0)
    shapes = [s for _ in range(LAYERS) for s in LAYER] + [(VOCAB, HIDDEN)]
    return [torch.randn(n, k, generator=g, dtype=torch.float32).to(dtype) for n, k in shapes]


def old_scalar_library():
    """FlexGemv.c of OLD_COMMIT built without its AVX-512 path: the f32
    scalar loop (rows_f32) on the same threads, as an AVX2 host ran it."""
    out = tempfile.mkdtemp(prefix="flex-gemv-old-")
    for name in ("FlexGemv.c", "FlexGemv.h", "FlexBf16.h"):
        text = subprocess.run(["git", "show", f"{OLD_COMMIT}:lib/Runtime/{name}"], cwd=HERE,
                              check=True, capture_output=True, text=True).stdout
        text = text.replace("#define FLEX_HAVE_AVX512_PATH 1", "")
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    lib = os.path.join(out, "libold_gemv.so")
    subprocess.run(["cc", "-O3", "-std=c99", "-shared", "-fPIC", "-o", lib, os.path.join(out, "FlexGemv.c"),
                    "-lpthread", "-ldl"], check=True)
    return ctypes.CDLL(lib)


def typed(fn, bf16):
    i64, p = ctypes.c_int64, ctypes.c_void_p
    fn.restype = ctypes.c_int
    fn.argtypes = ([i64, i64, i64, p, i64, i64, p, i64, p, i64, i64] + ([ctypes.c_int] if bf16 else [])
                   + [ctypes.c_int])
    return fn


def one_pass(gemv, ws, xs, ys, bf16):
    for w, x, y in zip(ws, xs, ys):
        n, k = w.shape
        m = x.shape[0]
        args = [m, n, k, x.data_ptr(), k, 1, w.data_ptr(), k, y.data_ptr(), n, 1]
        ok = gemv(*(args + ([0] if bf16 else []) + [0]))
        assert ok == 1, "the kernel declined the product"


def rates(variants, ws, rows, bf16, repeat):
    """Best GB/s of weights read, per variant (name: (gemv, set-up
    function)), over `repeat` rounds of one pass of each in turn (after a
    warm-up pass): a busy moment of the host slows one pass, not a
    variant."""
    dtype = ws[0].dtype
    xs = {k: torch.randn(rows, k, dtype=torch.float32).to(dtype) for k in (HIDDEN, FFN)}
    xs = [xs[w.shape[1]] for w in ws]
    ys = [torch.empty(rows, w.shape[0], dtype=torch.float32) for w in ws]
    total = sum(w.numel() * w.element_size() for w in ws)
    best = {name: float("inf") for name in variants}
    for round in range(repeat + 1):
        for name, (gemv, setup) in variants.items():
            setup()
            t = time.perf_counter()
            one_pass(gemv, ws, xs, ys, bf16)
            if round:
                best[name] = min(best[name], time.perf_counter() - t)
    return {name: (total / t / 1e9, t * 1e3, total) for name, t in best.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1, help="rows of x (1: batch-1 decode; up to 4)")
    parser.add_argument("--dtype", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch's threads (default: torch's own)")
    parser.add_argument("--no-old", action="store_true", help="skip the old scalar loop")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    blas.runtime_library()
    rt = ctypes.CDLL(blas.runtime_library_path())
    cpu = cpu_features._first_cpu()
    print(f"host: {cpu.get('model name', '?')} (family {cpu.get('cpu family', '?')}, model "
          f"{cpu.get('model', '?')}), {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"kernel ISAs {', '.join(blas.runtime_isas())}, bf16 dot: {cpu_features.host_has_avx512_bf16()}")
    print(f"rows of x: {args.rows}")
    for name in args.dtype:
        bf16 = name == "bf16"
        ws = weights(torch.bfloat16 if bf16 else torch.float32)
        gemv = typed(rt.flex_gemv_bf16 if bf16 else rt.flex_gemv_f32, bf16)
        variants = {isa: (gemv, lambda isa=isa: blas.set_runtime_isa(isa)) for isa in blas.runtime_isas()}
        if not bf16 and not args.no_old:
            variants["old scalar loop"] = (typed(old_scalar_library().flex_gemv_f32, False), lambda: None)
        kernels = {isa: blas.set_runtime_isa(isa) and blas.gemv_kernel(ws[0].dtype) for isa in blas.runtime_isas()}
        for variant, (gbs, ms, total) in rates(variants, ws, args.rows, bf16, args.repeat).items():
            kernel = f"kernel {kernels[variant]:8s}" if variant in kernels else ""
            print(f"{name:5s} {variant:16s} {kernel:15s} {gbs:6.1f} GB/s {ms:7.1f} ms/pass ({total / 1e9:.2f} GB)",
                  flush=True)
        blas.set_runtime_isa(None)
        del ws
    return 0


if __name__ == "__main__":
    sys.exit(main())
