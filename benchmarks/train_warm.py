"""Warm restart of a compiled training step (issue #42): where a second
process spends its first step when every cache is warm.

    PYTHONPATH=python python -m benchmarks.train_warm [--layers 4 --seq 512]
        [--hidden 512 --heads 8 --kv-heads 4 --inter 1408 --vocab 8192 --batch 2]
        [--only flex|inductor] [--attn flex_attention|sdpa] [--keep DIR] [--threads N] [--gc-freeze] [--json FILE]

A transformers Llama (attn_implementation="flex_attention", f32, AdamW)
trained through `torch.compile(model, backend="torch_mlir_flex")` runs
the same two steps in two fresh processes that share one cache directory
(TORCH_MLIR_FLEX_CACHE_DIR; a new temporary one unless --keep): the
first process fills the caches (cold), the second reads them (warm). The
same model with attn_implementation="sdpa" under backend="inductor"
(inductor cannot train flex_attention on CPU) does likewise with its own
shared TORCHINDUCTOR_CACHE_DIR.

Printed per process: the first and second step's seconds, the losses
(the warm ones must equal the cold ones), and the first step's phases,
inclusive, summed over the graphs (forward, backward): torch's own
(`torch._dynamo.utils.compilation_time_metrics`: Dynamo's frame compile,
AOTAutograd) and ours (timers put around the backend's functions in the
child process only: the pre-export key, torch.export, import..materialize,
lowering, LLVM code generation or the object cache's load, binding, each
compiled function's first call), Python's cyclic GC by generation, and a
`summary:` line of the phases without overlaps (Dynamo's trace,
AOTAutograd, our compiles, the rest). Every phase line is "name: seconds
(calls)". A NOTE says when the package changed between the two processes
(another build id: every stage entry misses); the exit status is 1 when
a process failed or the warm losses differ from the cold ones.
"""

import argparse
import collections
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# torch's timers worth reporting (dynamo_timed names), when present.
TORCH_METRICS = ("_compile.compile_inner", "OutputGraph.call_user_compiler", "create_aot_dispatcher_function",
                 "aot_trace_joint_graph", "compile_fx_inner", "compile_fx.<locals>.fw_compiler_base",
                 "compile_fx.<locals>.bw_compiler", "AOTAutogradCache.inductor_load", "backward._backward_impl",
                 "GraphLowering.compile_to_module", "async_compile.wait", "entire_frame_compile",
                 "entire_backward_compile", "inductor_compile")


# --------------------------------------------------------------------------
# The child: one process, two training steps
# --------------------------------------------------------------------------


class Phases:
    """Inclusive seconds and call counts of wrapped functions."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.calls = collections.Counter()
        self.on = True

    def wrap(self, owner, attr, label=None, label_of=None):
        """Replaces `owner.attr` by a timed wrapper; `label_of(args, kw)`
        may name the phase per call (e.g. by the graph's kind)."""
        fn = getattr(owner, attr)
        name = label or attr

        @functools.wraps(fn)
        def timed(*args, **kw):
            if not self.on:
                return fn(*args, **kw)
            what = label_of(args, kw) if label_of is not None else name
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self.seconds[what] += time.perf_counter() - t
                self.calls[what] += 1

        setattr(owner, attr, timed)

    def report(self):
        return {k: [round(v, 4), self.calls[k]] for k, v in self.seconds.items()}


def _instrument_ours(phases):
    import importlib

    from torch_mlir_flex import dynamo
    from torch_mlir_flex.backend import cache, jit, pre_export_cache, stage_cache

    compile_mod = importlib.import_module("torch_mlir_flex.backend.compile")  # the package exports compile()

    kind = lambda args, kw: f"compile_graph[{kw.get('kind', args[4] if len(args) > 4 else 'compiled')}]"  # noqa: E731
    phases.wrap(dynamo, "compile_graph", label_of=kind)
    phases.wrap(compile_mod, "compile", "compile()")
    phases.wrap(pre_export_cache.PreExport, "__init__", "pre-export key (module_key)")
    phases.wrap(pre_export_cache.PreExport, "load", "pre-export entry load")
    phases.wrap(pre_export_cache.PreExport, "store", "pre-export entry store")
    phases.wrap(compile_mod, "export_model", "torch.export")
    phases.wrap(compile_mod, "_import_stages", "import..materialize (or stage hit)")
    phases.wrap(compile_mod, "import_model", "  import")
    phases.wrap(compile_mod, "to_linalg", "  to_linalg")
    phases.wrap(compile_mod, "materialize", "  materialize")
    phases.wrap(jit.JitFunction, "__init__", "JitFunction (lower + LLVM + bind)")
    phases.wrap(jit.JitFunction, "_lower", "  lowering (or stage hit)")
    phases.wrap(jit, "ShapeProgram", "  shape program")
    phases.wrap(cache, "engine_for", "  LLVM codegen (or object cache load)")
    phases.wrap(jit.JitFunction, "_bind", "  bind")
    phases.wrap(stage_cache, "load", "stage_cache.load")
    phases.wrap(stage_cache, "store", "stage_cache.store")
    phases.wrap(stage_cache, "build_id", "stage_cache.build_id")
    first = set()
    call = compile_mod.CompiledModule.__call__

    def first_call(self, *args):
        if id(self) in first:
            return call(self, *args)
        first.add(id(self))
        t = time.perf_counter()
        try:
            return call(self, *args)
        finally:
            phases.seconds["first call of each compiled graph"] += time.perf_counter() - t
            phases.calls["first call of each compiled graph"] += 1

    compile_mod.CompiledModule.__call__ = first_call


def _time_gc(phases) -> dict:
    """{generation: [seconds, collections]} of Python's cyclic GC while
    `phases` is on (inside the other phases' times)."""
    import gc

    out, start = {}, [0.0]

    def on_gc(phase, info):
        if phase == "start":
            start[0] = time.perf_counter()
        elif phases.on:
            entry = out.setdefault(str(info["generation"]), [0.0, 0])
            entry[0] = round(entry[0] + time.perf_counter() - start[0], 4)
            entry[1] += 1

    gc.callbacks.append(on_gc)
    return out


def _model(spec):
    from transformers import AutoModelForCausalLM, LlamaConfig

    import torch

    cfg = LlamaConfig(vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["inter"],
                      num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
                      num_key_value_heads=spec["kv_heads"], max_position_embeddings=max(spec["seq"], 128),
                      initializer_range=0.02, use_cache=False)
    torch.manual_seed(0)
    attn = spec.get("attn") or ("flex_attention" if spec["backend"] == "torch_mlir_flex" else "sdpa")
    return AutoModelForCausalLM.from_config(cfg, attn_implementation=attn).train()


def train_steps(run, opt, batches, phases, autocast=False, cpu=None):
    """One training step per batch (forward with labels, backward,
    `opt.step()`, `opt.zero_grad(set_to_none=True)`; under CPU bfloat16
    autocast when `autocast`), each timed: (seconds per step, losses).
    `phases` records the first step only; `cpu`, a list, gets each step's
    CPU seconds of the process (what a loaded host's wall time hides)."""
    import torch

    times, losses = [], []
    for ids in batches:
        t, c = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
        if cpu is not None:
            cpu.append(time.process_time() - c)
        losses.append(loss.item())
        phases.on = False  # the first step's phases only
    return times, losses


def torch_metrics() -> dict:
    """torch's timers of TORCH_METRICS so far: name -> [seconds, calls]."""
    import torch._dynamo.utils as dynamo_utils

    return {k: [round(sum(v), 4), len(v)] for k, v in dynamo_utils.compilation_time_metrics.items()
            if k in TORCH_METRICS}


def child(spec) -> dict:
    t0 = time.perf_counter()
    import torch_mlir_flex  # noqa: F401  (before torch_mlir)
    import torch

    ours = spec["backend"] == "torch_mlir_flex"
    phases = Phases()
    if ours:
        from torch_mlir_flex import dynamo
        from torch_mlir_flex.backend import cache

        dynamo.register()
        _instrument_ours(phases)
    torch.set_num_threads(spec.get("threads") or torch.get_num_threads())
    model = _model(spec)
    compiled = torch.compile(model, backend=spec["backend"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, spec["vocab"], (spec["batch"], spec["seq"]), generator=g) for _ in range(2)]
    setup_s = time.perf_counter() - t0

    if spec.get("gc_freeze"):
        import gc

        gc.freeze()  # the objects so far (torch, transformers, the model) out of full collections
    gc_seconds = _time_gc(phases)
    cpu = []
    steps, losses = train_steps(compiled, opt, batches, phases, cpu=cpu)
    out = dict(setup_s=round(setup_s, 3), steps=[round(s, 3) for s in steps], cpu=[round(s, 3) for s in cpu],
               losses=losses,
               torch=torch_metrics(), ours=phases.report(), gc=gc_seconds)
    if ours:
        out["dynamo_stats"] = dict(dynamo.stats)
        out["cache_stats"] = dict(cache.stats)
        from torch_mlir_flex.backend import stage_cache

        out["build_id"] = stage_cache.build_id()[:16]  # an edit between the runs: every stage misses
    return out


# --------------------------------------------------------------------------
# The parent: two processes per compiler, one shared cache directory each
# --------------------------------------------------------------------------


def run_child(spec, cache_dir, timeout=1800.0) -> dict:
    env = dict(os.environ, TORCH_MLIR_FLEX_CACHE_DIR=os.path.join(cache_dir, "flex"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), os.path.join(ROOT, "python"),
                                                      ROOT) if p))
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "benchmarks.train_warm", "--child", json.dumps(spec)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    wall = time.perf_counter() - t
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
        return {"error": " / ".join(tail)[-800:]}
    out = json.loads(lines[-1])
    out["process_s"] = round(wall, 2)
    return out


def _summary(r) -> dict:
    """The first step's phases without overlaps: Dynamo's trace (its frame
    compile less the backend call), AOTAutograd (the backend call less our
    forward compile; inductor's: its cache load and compile), our forward
    and backward compiles, and the rest (the first calls, the optimizer)."""
    t = {k: v[0] for k, v in r["torch"].items()}
    o = {k: v[0] for k, v in r["ours"].items()}
    ours_fw = o.get("compile_graph[forward]", 0.0) + o.get("compile_graph[compiled]", 0.0)
    ours_bw = o.get("compile_graph[backward]", 0.0)
    backend = t.get("OutputGraph.call_user_compiler", 0.0)
    out = {"Dynamo trace": t.get("_compile.compile_inner", 0.0) - backend,
           "AOTAutograd/inductor": backend - ours_fw + t.get("backward._backward_impl", 0.0) - ours_bw,
           "ours fw+bw": ours_fw + ours_bw}
    out["rest"] = r["steps"][0] - sum(out.values())
    return out


def _print_run(name, r):
    if "error" in r:
        print(f"  {name}: ERROR {r['error']}")
        return
    cpu = r.get("cpu") or [float("nan")] * 2
    print(f"  {name}: process {r['process_s']} s, setup {r['setup_s']} s, step 1 {r['steps'][0]} s "
          f"(CPU {cpu[0]} s), step 2 {r['steps'][1]} s (CPU {cpu[1]} s), "
          f"losses {', '.join(f'{x:.6f}' for x in r['losses'])}")
    summary = _summary(r)
    print("    summary: " + ", ".join(f"{k} {v:.2f} s" for k, v in summary.items()))
    for title, table in (("torch", r["torch"]), ("ours", r["ours"])):
        for k, (s, n) in sorted(table.items(), key=lambda kv: -kv[1][0]):
            print(f"    {title:5s} {k}: {s:.3f} s ({n})")
    for gen, (sec, n) in sorted(r.get("gc", {}).items()):
        print(f"    python cyclic GC, generation {gen}: {sec:.3f} s ({n}; inside the phases above)")
    for k in ("dynamo_stats", "cache_stats"):
        if k in r:
            print(f"    {k}: {json.dumps(r[k], sort_keys=True)}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--inter", type=int, default=1408)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    p.add_argument("--gc-freeze", action="store_true",
                   help="gc.freeze() after building the model, before the first step")
    p.add_argument("--only", choices=("flex", "inductor"))
    p.add_argument("--attn", choices=("flex_attention", "sdpa"), default="flex_attention",
                   help="ours' attention (inductor always runs sdpa: it cannot train flex_attention on CPU)")
    p.add_argument("--keep", help="cache directory to use and keep (default: a new temporary one)")
    p.add_argument("--json", help="also write the results to this file")
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(json.loads(a.child))))
        return 0
    spec = dict(layers=a.layers, seq=a.seq, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                inter=a.inter, vocab=a.vocab, batch=a.batch, threads=a.threads, gc_freeze=a.gc_freeze)
    with open("/proc/loadavg") as f:
        print(f"shape {json.dumps(spec)}; load before: {f.read().split()[:3]}")
    root = a.keep or tempfile.mkdtemp(prefix="train_warm_")
    os.makedirs(root, exist_ok=True)
    results, ok = {}, True
    try:
        for name, backend in (("flex", "torch_mlir_flex"), ("inductor", "inductor")):
            if a.only and a.only != name:
                continue
            attn = a.attn if backend == "torch_mlir_flex" else "sdpa"
            print(f"{name} (backend={backend}, attention {attn}):", flush=True)
            runs = [run_child(dict(spec, backend=backend, attn=attn), root) for _ in range(2)]
            for label, r in zip(("cold", "warm"), runs):
                _print_run(label, r)
            results[name] = dict(zip(("cold", "warm"), runs))
            if all("error" not in r for r in runs):
                if runs[0].get("build_id") != runs[1].get("build_id"):
                    print("  NOTE: the package changed between the two processes (build id): the stage "
                          "cache could not hit")
                if runs[0]["losses"] != runs[1]["losses"]:
                    ok = False
                    print(f"  LOSSES DIFFER: cold {runs[0]['losses']} warm {runs[1]['losses']}")
            else:
                ok = False
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    with open("/proc/loadavg") as f:
        print(f"load after: {f.read().split()[:3]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(spec=spec, results=results), f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
