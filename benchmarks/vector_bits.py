"""The tiled lowering's micro-kernels blocked for 512-bit (AVX-512) and
256-bit (AVX2) registers side by side, against SDPA: causal attention
forward and forward+backward (B=1, f32), one process, interleaved timing
(timing.interleaved_medians).

    PYTHONPATH=python python -m benchmarks.vector_bits [--size 1024 --dim 64 --heads 8]

Variants: `v512` (vector-bits=512, the JIT for the host CPU), `v256`
(vector-bits=256, the JIT for the host CPU: on an AVX-512 host LLVM may
still pick zmm registers for the wider vectors), `v256-avx2` (vector-bits=256
and the JIT capped at AVX2 by TORCH_MLIR_FLEX_ISA=avx2: x86-64-v3, no
AVX-512 instruction; what an AVX2-only host runs, on this host's cores),
`v512-avx2` (the 512-bit blocking with the JIT capped at AVX2: what an
AVX2-only host ran before vector-bits).
All with OpenMP (when a runtime is found) on the default thread count, or
with --one-thread ours without OpenMP and torch on one thread.
"""

import argparse
import os

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo
from torch_mlir_flex.backend import PIPELINES, cpu_features
from torch_mlir_flex.backend.pipelines import find_openmp_runtime, tiled_pipeline

from . import timing

# name: (vector-bits, TORCH_MLIR_FLEX_ISA while compiling or None)
VARIANTS = {"v512": (512, None), "v256": (256, None), "v512-avx2": (512, "avx2"),
            "v256-avx2": (256, "avx2")}


def _flex_fn(block_mask, name):
    """flex_attention with `block_mask` in a function of its own code object
    (Dynamo caches compiled graphs per code object)."""
    scope = {"flex_attention": flex_attention, "bm": block_mask}
    exec(compile("def f(q, k, v):\n    return flex_attention(q, k, v, block_mask=bm)\n",
                 f"<vector_bits {name}>", "exec"), scope)
    return scope["f"]


def _compiled(name, bits, isa, block_mask, inputs, grad, openmp):
    """(forward, forward+backward) callables of variant `name`, compiled
    (first call) with TORCH_MLIR_FLEX_ISA=`isa` when set."""
    backend = f"bench-{name}"
    PIPELINES[backend] = tiled_pipeline(openmp=openmp, vector_bits=bits, bf16_dot=False,
                                        amx=False)
    old = os.environ.get(cpu_features.ISA_ENV)
    if isa:
        os.environ[cpu_features.ISA_ENV] = isa
    try:
        fwd = torch.compile(_flex_fn(block_mask, name + "-fwd"), backend=dynamo.NAME,
                            options={"backend": backend})
        train = torch.compile(_flex_fn(block_mask, name + "-train"), backend=dynamo.NAME,
                              options={"backend": backend})
        leaves = [t.detach().clone().requires_grad_(True) for t in inputs]

        def fwd_call():
            with torch.no_grad():
                return fwd(*inputs)

        def train_call():
            for t in leaves:
                t.grad = None
            train(*leaves).backward(grad)
            return leaves[0].grad

        fwd_call(), train_call()  # compiles
    finally:
        if old is None:
            os.environ.pop(cpu_features.ISA_ENV, None)
        else:
            os.environ[cpu_features.ISA_ENV] = old
    return fwd_call, train_call


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--one-thread", action="store_true",
                    help="ours without OpenMP and torch on one thread (steadier on a busy host)")
    args = ap.parse_args(argv)
    openmp = find_openmp_runtime() is not None and not args.one_thread
    if args.one_thread:
        torch.set_num_threads(1)
    dynamo.register()
    S, D, H = args.size, args.dim, args.heads
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(1, H, S, D, generator=g) for _ in range(3)]
    grad = torch.randn(1, H, S, D, generator=g)
    bm = create_block_mask(lambda b, h, m, n: m >= n, None, None, S, S, device="cpu")
    fwd, train = {}, {}
    for name, (bits, isa) in VARIANTS.items():
        fwd[name], train[name] = _compiled(name, bits, isa, bm, inputs, grad, openmp)
    sdpa_leaves = [t.detach().clone().requires_grad_(True) for t in inputs]

    def sdpa_fwd():
        with torch.no_grad():
            return F.scaled_dot_product_attention(*inputs, is_causal=True)

    def sdpa_train():
        for t in sdpa_leaves:
            t.grad = None
        F.scaled_dot_product_attention(*sdpa_leaves, is_causal=True).backward(grad)
        return sdpa_leaves[0].grad

    ref = sdpa_fwd()
    for name, fn in fwd.items():
        torch.testing.assert_close(fn(), ref, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")
    fwd["sdpa"], train["sdpa"] = sdpa_fwd, sdpa_train
    cpu = cpu_features._first_cpu()
    print(f"host: {cpu.get('model name', '?')} ({os.cpu_count()} CPUs, vector ISA "
          f"{cpu_features.host_vector_isa()}); torch threads {torch.get_num_threads()}, ours "
          f"{'OpenMP' if openmp else 'one thread'}")
    print(f"causal f32 B=1 H={H} S={S} D={D}: median ms (x SDPA)")
    for label, fns in (("forward", fwd), ("fwd+bwd", train)):
        med = timing.interleaved_medians(fns, args.reps)
        print(f"  {label:8s} " + "  ".join(
            f"{n} {med[n] * 1e3:.2f} ({med[n] / med['sdpa']:.2f}x)" for n in fns))


if __name__ == "__main__":
    main()
