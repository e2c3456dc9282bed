"""One implementation of one whole-model training configuration, in its own
process: `python -m benchmarks.train.models_child '<json spec>'` prints one
JSON line (benchmarks/child_process.py runs it; benchmarks/train/models.py
is the parent).

A transformers causal LM (Llama, or Qwen2 for the 0.5B shape) built from
one seed, AdamW (lr 1e-3), the same batches in every process; a training
step is forward with labels, `loss.backward()`, `opt.step()`,
`opt.zero_grad(set_to_none=True)`, under `torch.autocast("cpu",
torch.bfloat16)` for the bf16 rows. Implementations:
- ours: `torch.compile(model, backend="torch_mlir_flex")`, the model's
  attention `attn` ("flex": attn_implementation="flex_attention", "sdpa");
- inductor: `torch.compile(model)` (SDPA: inductor cannot train
  flex_attention on CPU);
- eager: the model uncompiled (SDPA: eager flex_attention has no backward
  on CPU).

`measure(spec)` returns the first step's seconds (compilation included;
cold or warm as the parent's cache directories make it), the later steps'
seconds and their median after `warmup` steps, tokens/s, every step's
loss, this process's peak RSS (VmHWM) and its children's (our LLVM
code generation and linking, when they ran: sampled), Dynamo's graphs and graph
breaks (torch._dynamo.utils.counters), ours' compiled graphs and graphs
run in eager (torch_mlir_flex.dynamo.stats) and the first step's phases
(benchmarks/train_warm.py's instrumentation and summary).
"""

import json
import os
import statistics
import sys
import threading

IMPLS = ("ours", "inductor", "eager")
# ours' compiled graph kinds (dynamo.compile_graph's `kind`), counted per step
OUR_KINDS = ("forward", "backward", "compiled")


def model_and_batches(spec):
    """(model in train mode, [input ids per step]) from a spec's shape."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    from benchmarks.models.configs import QWEN2_05B

    attn = "flex_attention" if spec["attn"] == "flex" else "sdpa"
    common = dict(num_hidden_layers=spec["layers"], max_position_embeddings=max(spec["seq"], 128),
                  use_cache=False)
    if spec["model"] == "qwen2":
        cfg = Qwen2Config(**{**QWEN2_05B, **common})
    else:
        cfg = LlamaConfig(vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["inter"],
                          num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"],
                          initializer_range=0.02, **common)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn).train()
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, cfg.vocab_size, (spec["batch"], spec["seq"]), generator=g)
               for _ in range(1 + spec["warmup"] + spec["steps"])]
    return model, batches


def vm_hwm_mib(pid="self"):
    """The peak resident set (VmHWM) of a process's current image, MiB;
    None when unreadable. Not getrusage's maxrss: Linux carries the
    spawning process's peak into its children's (fork, then exec) and into
    RUSAGE_CHILDREN."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


class ChildrenPeak(threading.Thread):
    """The largest VmHWM of this process's direct children (our LLVM code
    generation, the linker), sampled every `interval` seconds while they
    run: a child's growth in its last interval can be missed. A child not
    yet past its exec (still this process's image) is skipped, and so are
    the children alive before the thread starts (multiprocessing's
    resource tracker, left by an earlier `spawn` in the same process)."""

    def __init__(self, interval=0.05):
        super().__init__(daemon=True)
        self.interval, self.peak, self.seen = interval, None, 0
        self.done = threading.Event()  # set(): sampling stops
        with open("/proc/self/cmdline", "rb") as f:
            self.me = f.read()
        self.before = self._children()

    def _children(self):
        pids = set()
        try:
            for task in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{task}/children") as f:
                    pids.update(f.read().split())
        except OSError:
            pass
        return pids

    def run(self):
        seen = set()
        while not self.done.is_set():
            for pid in self._children() - self.before:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if f.read() == self.me:
                            continue
                except OSError:
                    continue
                mib = vm_hwm_mib(pid)
                if mib is not None:
                    seen.add(pid)
                    self.seen = len(seen)
                    self.peak = max(self.peak or 0.0, mib)
            self.done.wait(self.interval)


def measure(spec) -> dict:
    """The metrics of one (configuration, implementation); see the banner.
    spec: the shape (model, layers, hidden, heads, kv_heads, inter, vocab,
    batch, seq), dtype ("f32" / "bf16"), attn, impl, warmup, steps and
    threads (torch's threads; 0: torch's default)."""
    import torch_mlir_flex  # noqa: F401  (before torch_mlir)
    import torch
    import torch._dynamo.utils as dynamo_utils

    from benchmarks import train_warm as tw
    from torch_mlir_flex import dynamo

    impl = spec["impl"]
    if impl not in IMPLS:
        raise ValueError(f"unknown implementation {impl!r}: expected one of {IMPLS}")
    if impl != "ours" and spec["attn"] == "flex":
        raise ValueError(f"{impl} cannot train flex_attention on CPU: use attn 'sdpa'")
    children = ChildrenPeak()
    children.start()
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    dynamo.stats.clear()
    dynamo_utils.counters.clear()
    phases = tw.Phases()
    if impl == "ours":
        dynamo.register()
        tw._instrument_ours(phases)
    model, batches = model_and_batches(spec)
    run = model if impl == "eager" else torch.compile(model, backend=dynamo.NAME if impl == "ours" else "inductor")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    autocast = spec["dtype"] == "bf16"
    gc_seconds = tw._time_gc(phases)
    times, losses = tw.train_steps(run, opt, batches, phases, autocast)
    children.done.set()
    steady = times[1 + spec["warmup"]:] or times[1:] or times
    step = statistics.median(steady)
    stats = dict(dynamo.stats)
    counters = dynamo_utils.counters
    first = dict(steps=times, torch=tw.torch_metrics(), ours=phases.report())
    out = dict(first_s=round(times[0], 3), step_s=step, steps_s=[round(s, 4) for s in times],
               tokens_per_s=spec["batch"] * spec["seq"] / step, losses=losses,
               peak_rss_mib=vm_hwm_mib(), children_peak_rss_mib=children.peak, children_seen=children.seen,
               threads=torch.get_num_threads(),
               dynamo_graphs=int(counters["stats"].get("unique_graphs", 0)),
               graph_breaks=int(sum(counters["graph_break"].values())),
               gc_s=round(sum(v[0] for v in gc_seconds.values()), 3))
    if impl != "eager":
        out["phases"] = {k: round(v, 3) for k, v in tw._summary(first).items()}
    if impl == "ours":
        from torch_mlir_flex.backend import cache, stage_cache

        out.update(compiled_graphs=sum(stats.get(k, 0) for k in OUR_KINDS), eager_graphs=stats.get("eager", 0),
                   eager_calls=stats.get("eager_calls", 0), dynamo_stats=stats, cache_stats=dict(cache.stats),
                   build_id=stage_cache.build_id()[:16])  # a source edit between cold and warm: stages miss
    return out


def main(spec):
    print(json.dumps(measure(spec)), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
