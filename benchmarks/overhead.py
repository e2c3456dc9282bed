"""Per-call overhead of the user path: a tiny decode call (B=1, H=8, M=1,
N=64, D=64, f32, one thread) compiled with torch_mlir_flex.compile; almost
all of its time is the Python side (argument checks, output allocation,
memref descriptors, ctypes). Also timed: the same JitFunction called
directly (without CompiledModule's output unflattening)."""

import statistics
import time

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from . import cases
from .runner import compile_ours


def _us_per_call(fn, args, calls, rounds=5):
    for _ in range(100):
        fn(*args)
    runs = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        runs.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(runs)


def per_call_overhead(calls=2000, N=64):
    """{"compiled module": us, "jit function": us} per call (median of 5 x calls)."""
    inst = cases.instance(cases.Config("decode", torch.float32, N, 64))
    fn, _, _ = compile_ours(inst, "tiled-1t")
    return {"compiled module": _us_per_call(fn, inst.args, calls),
            "jit function": _us_per_call(fn.jit_function, inst.args, calls)}


def describe(overhead):
    return (f"per-call overhead (decode M=1, N=64, H=8, D=64, f32, tiled-1t): "
            f"{overhead['compiled module']:.1f} us/call through torch_mlir_flex.compile's "
            f"callable, {overhead['jit function']:.1f} us/call on its JitFunction")
