"""One benchmark configuration end to end: compile ours through the user
path, warm the peers, check ours against a peer, time all of them
interleaved, measure peak extra memory. Returns a plain dict (a "row",
JSON-serialisable) that report.py and targets.py read.

Ours is `torch_mlir_flex.compile(module, args, backend=...)` with the
compile cache off (TORCH_MLIR_FLEX_CACHE=0), timed on the returned callable
(per-call overhead included). Peers: "torch.compile" (the compiled
flex_attention function, warm, with a fresh dynamo state per
configuration), "SDPA" (where the case is expressible), "eager" (eager
flex_attention, opt-in: slow and memory hungry).
"""

import contextlib
import dataclasses
import logging
import os
import re

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import log as flex_log
from torch_mlir_flex.backend import cache

from . import cases, timing
from .peak import dtype_name

PEERS = ("torch.compile", "SDPA", "eager")
# max |ours - reference| allowed: atol + rtol * |reference|
TOLERANCE = {"f32": (1e-4, 1e-3), "bf16": (2e-2, 2e-2), "f16": (1e-2, 1e-2)}


@dataclasses.dataclass
class Options:
    backends: tuple = ("tiled",)  # ours; more backends are extra columns
    peers: tuple = ("torch.compile", "SDPA")
    budget_s: float = 1.5  # timed seconds per implementation (3..60 calls)


def impl_name(backend, i):
    return "ours" if i == 0 else f"ours[{backend}]"


@contextlib.contextmanager
def cache_off_and_stage_log():
    """Compile cache off; yields the list of torch_mlir_flex log messages."""
    old = os.environ.get(cache.ENABLE_ENV)
    os.environ[cache.ENABLE_ENV] = "0"
    logger = flex_log.get_logger()
    propagate, logger.propagate = logger.propagate, False
    try:
        with flex_log.capture(logging.INFO) as messages:
            yield messages
    finally:
        logger.propagate = propagate
        if old is None:
            del os.environ[cache.ENABLE_ENV]
        else:
            os.environ[cache.ENABLE_ENV] = old


STAGE_RE = re.compile(r"^stage (\S+): ([0-9.]+) s$")


def compile_ours(inst, backend):
    """(compiled callable, total compile seconds, {stage: seconds})."""
    with cache_off_and_stage_log() as messages:
        seconds, fn = timing.timed_call(
            lambda: torch_mlir_flex.compile(inst.module, inst.args, backend=backend))
    stages = {}
    for m in messages:
        hit = STAGE_RE.match(m)
        if hit:
            stages[hit.group(1)] = stages.get(hit.group(1), 0.0) + float(hit.group(2))
    return fn, seconds, stages


def _peer_callables(inst, peers):
    q, k, v = inst.args[:3]
    kw = inst.flex_kwargs
    out = {}
    if "torch.compile" in peers:
        torch._dynamo.reset()  # else dynamo's recompile limit falls back to eager
        cflex = torch.compile(flex_attention, dynamic=False)
        out["torch.compile"] = lambda: cflex(q, k, v, **kw)
    if "SDPA" in peers and inst.sdpa is not None:
        out["SDPA"] = inst.sdpa
    if "eager" in peers:
        out["eager"] = lambda: flex_attention(q, k, v, **kw)
    return out


def _error(e):
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:200]


def _build_ours(inst, opts, row, fns):
    for i, backend in enumerate(opts.backends):
        name = impl_name(backend, i)
        try:
            fn, seconds, stages = compile_ours(inst, backend)
        except Exception as e:  # report the failure, keep benchmarking
            row["errors"][name] = "compile: " + _error(e)
            continue
        fns[name] = lambda fn=fn: fn(*inst.args)
        row["compile_s"][name] = seconds
        row["stages"][name] = stages


def _warm(fns, row):
    """First call of each implementation (torch.compile compiles here):
    {name: output}; failures move to row["errors"]."""
    outs = {}
    for name in list(fns):
        try:
            seconds, outs[name] = timing.timed_call(fns[name])
            row["first_call_s"][name] = seconds
        except Exception as e:
            row["errors"][name] = "run: " + _error(e)
            del fns[name]
    return outs


def _check(outs, row):
    """Max |ours - reference| (over every ours backend) against the first
    peer that ran."""
    ref_name = next((p for p in PEERS if p in outs), None)
    ours = [n for n in outs if n.startswith("ours")]
    if not ours or ref_name is None:
        return
    ref = outs[ref_name].float()
    atol, rtol = TOLERANCE[row["dtype"]]
    diffs = [(outs[n].float() - ref).abs() for n in ours]
    row["reference"] = ref_name
    row["max_abs_diff"] = max(d.max().item() for d in diffs)
    row["ok"] = all(bool((d <= atol + rtol * ref.abs()).all()) for d in diffs)


def new_row(inst):
    c = inst.config
    return dict(case=c.case, dtype=dtype_name(c.dtype), S=c.S, D=c.D, B=c.B, H=inst.Hq, Hkv=inst.Hkv,
                M=inst.M, N=inst.N, kept=inst.kept, flops=cases.flops(inst),
                time={}, mem={}, errors={}, compile_s={}, stages={}, first_call_s={},
                reference=None, max_abs_diff=None, ok=None)


def run_config(cfg: cases.Config, opts: Options = Options()):
    inst = cases.instance(cfg)
    row = new_row(inst)
    fns = {}
    _build_ours(inst, opts, row, fns)
    try:
        fns.update(_peer_callables(inst, opts.peers))
    except Exception as e:
        row["errors"]["peers"] = _error(e)
    outs = _warm(fns, row)
    _check(outs, row)
    del outs
    if fns:
        # a second (warm) call of each sets the number of repetitions
        probe = max(timing.timed_call(fn)[0] for fn in fns.values())
        reps = timing.reps_for(probe, opts.budget_s, hi=60)
        row["reps"] = reps
        row["time"] = timing.interleaved_medians(fns, reps, warmup=0)
        row["mem"] = {name: timing.peak_extra_bytes(fn) for name, fn in fns.items()}
    return row
