"""Overheads of the user path.

Per call: a tiny decode call (B=1, H=8, M=1, N=64, D=64, f32, one thread)
compiled with torch_mlir_flex.compile; almost all of its time is the Python
side (argument checks, output allocation, memref descriptors, ctypes). Also
timed: the same JitFunction called directly (without CompiledModule's
output unflattening).

Per process: the first compile of a process also sets up torch.export's
tracing of flex_attention and BlockMask modifiers, the importer, LLVM and
the OpenMP runtime (here 1.85 s against 0.82 s for the next compile of the
same kind). The benchmark compiles a tiny causal case first and reports it
on its own line, so that each configuration's compile time is per op."""

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


def first_compile(backend):
    """(seconds, {stage: seconds}) of the process's first compile: a tiny
    causal BlockMask case (S=128, D=16, f32) with `backend`."""
    inst = cases.instance(cases.Config("causal", torch.float32, 128, 16))
    _, seconds, stages = compile_ours(inst, backend)
    return seconds, stages


def describe_first_compile(first):
    seconds, stages = first
    return (f"first compile of the process (causal S=128 D=16 f32; one-time set-up of "
            f"torch.export, the importer, LLVM and OpenMP included; not in the tables): "
            f"{seconds:.2f} s (" + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()) + ")")


def describe(overhead):
    return (f"per-call overhead (decode M=1, N=64, H=8, D=64, f32, tiled-1t): "
            f"{overhead['compiled module']:.1f} us/call through torch_mlir_flex.compile's "
            f"callable, {overhead['jit function']:.1f} us/call on its JitFunction")
