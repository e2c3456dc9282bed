"""Where a whole-model training process's peak resident memory is (issue
#42): one engine of one configuration of `python -m benchmarks.train
--models`, in this process, with the resident set sampled by phase.

    PYTHONPATH=python python -m benchmarks.train.memory_profile \
        [--config llama-4l-s512-f32] [--impl ours|eager|inductor] [--attn flex|sdpa] \
        [--steps 6] [--threads 1] [--json FILE]

The model, batches and step are benchmarks/train/models_child.py's (one
seed, AdamW; forward with labels, backward, optimizer step, zero_grad).
A thread reads /proc/self/status every 5 ms (VmRSS, RssAnon, RssFile) and
remembers, per phase (each step's forward, backward and optimizer step;
the first step's forward and backward include compiling ours' graphs), the
largest resident set and, at the process's peak, the resident memory of
each kind of mapping (/proc/self/smaps): the compiler's libraries (our
MLIR/LLVM, torch-mlir's), the compiled graphs' code, other libraries, the
anonymous memory (tensors, glibc's heaps, the runtime's kept blocks), with
the runtime heap's kept and live bytes (ours) at that moment. Printed: one
line per phase, the breakdown at the peak, the step times and VmHWM.
Runs with fresh cache directories of its own (a cold first step) unless
TORCH_MLIR_FLEX_CACHE_DIR is set.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time

# Libraries only the compiler runs (the compiled graphs do not).
COMPILER_LIBS = ("libLLVM", "libTorchMLIRFlexPythonCAPI", "libTorchMLIRAggregateCAPI", "libMLIRPythonSupport",
                 "/_mlir", "_torchMlir", "nanobind", "_site_initialize", "libmlir_")


def status_kib():
    """{VmRSS, RssAnon, RssFile, VmHWM}: KiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(line.split()[1])
    return out


def smaps_by_kind(cache_dir=None) -> dict:
    """Resident MiB by kind of mapping: compiler libraries (file pages and
    their private copies apart), compiled code, other files, [heap],
    other anonymous memory."""
    kinds = {}
    path, rss, anon = None, 0, 0

    def flush():
        if path is None:
            return
        if any(m in path for m in COMPILER_LIBS):
            kind = "compiler libs"
        elif cache_dir and path.startswith(cache_dir):
            kind = "compiled graphs"
        elif path.startswith("/"):
            kind = "other files"
        elif path == "[heap]":
            kind = "[heap]"
        else:
            kind = "anonymous"
        k = kinds.setdefault(kind, [0, 0])
        k[0] += rss - anon
        k[1] += anon

    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                flush()
                parts = line.split(None, 5)
                path, rss, anon = (parts[5].strip() if len(parts) > 5 else ""), 0, 0
            elif first == "Rss:":
                rss = int(line.split()[1])
            elif first == "Anonymous:":
                anon = int(line.split()[1])
    flush()
    return {k: {"file_mib": round(v[0] / 1024, 1), "anon_mib": round(v[1] / 1024, 1)} for k, v in kinds.items()}


class Sampler(threading.Thread):
    def __init__(self, cache_dir, heap=None, interval=0.005):
        super().__init__(daemon=True)
        self.cache_dir, self.heap, self.interval = cache_dir, heap, interval
        self.phase = "start"
        self.by_phase = {}  # phase -> largest VmRSS sample (KiB) with its RssAnon / RssFile
        self.peak = None  # the largest sample with its smaps breakdown
        self.done = threading.Event()

    def sample(self):
        s = status_kib()
        phase = self.phase
        best = self.by_phase.get(phase)
        if best is None or s["VmRSS"] > best["VmRSS"]:
            self.by_phase[phase] = dict(s)
        if self.peak is None or s["VmRSS"] > self.peak["VmRSS"] + 2048:
            peak = dict(s, phase=phase, smaps=smaps_by_kind(self.cache_dir))
            if self.heap is not None:
                peak["kept_mib"] = round(self.heap.kept_bytes() / 2**20, 1)
            self.peak = peak

    def run(self):
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="llama-4l-s512-f32")
    ap.add_argument("--impl", default="ours", choices=("ours", "eager", "inductor"))
    ap.add_argument("--attn", default="flex", choices=("flex", "sdpa"))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    if args.impl != "ours" and args.attn == "flex":
        args.attn = "sdpa"
    tmp = None
    if "TORCH_MLIR_FLEX_CACHE_DIR" not in os.environ:
        tmp = tempfile.mkdtemp(prefix="train_mem_")
        os.environ["TORCH_MLIR_FLEX_CACHE_DIR"] = tmp
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
    cache_dir = os.environ["TORCH_MLIR_FLEX_CACHE_DIR"]
    from benchmarks.train.models import QUICK, FULL
    from benchmarks.train import models_child

    cfg = {c.name: c for c in QUICK + FULL}[args.config]
    spec = dict(cfg.spec(args.impl, args.attn, args.threads), warmup=0, steps=args.steps - 1)
    sampler = Sampler(cache_dir)
    sampler.start()
    sampler.phase = "import"
    import torch_mlir_flex  # noqa: F401  (before torch_mlir)
    import torch

    from torch_mlir_flex import dynamo

    torch.set_num_threads(args.threads)
    if args.impl == "ours":
        dynamo.register()
        from torch_mlir_flex.backend import blas

        sampler.heap = blas
    sampler.phase = "model"
    model, batches = models_child.model_and_batches(spec)
    run = model if args.impl == "eager" else torch.compile(
        model, backend=dynamo.NAME if args.impl == "ours" else "inductor")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times, losses, cpu, faults = [], [], [], []
    for i, ids in enumerate(batches):
        t, c, m = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        sampler.phase = f"step {i} forward"
        loss = run(input_ids=ids, labels=ids).loss
        sampler.phase = f"step {i} backward"
        loss.backward()
        sampler.phase = f"step {i} optimizer"
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - m)
        losses.append(loss.item())
    sampler.phase = "end"
    time.sleep(0.02)
    sampler.done.set()
    sampler.join()
    hwm = status_kib()["VmHWM"] / 1024
    out = dict(config=args.config, impl=args.impl, attn=args.attn, threads=args.threads,
               vm_hwm_mib=round(hwm, 1), steps_s=[round(t, 3) for t in times],
               step_s=statistics.median(times[1:]) if len(times) > 1 else times[0], losses=losses,
               cpu_s=[round(t, 3) for t in cpu], step_cpu_s=statistics.median(cpu[1:]) if len(cpu) > 1 else cpu[0],
               minor_faults=faults,
               phases={p: {k: round(v / 1024, 1) for k, v in s.items()} for p, s in sampler.by_phase.items()},
               peak=dict(sampler.peak, VmRSS=round(sampler.peak["VmRSS"] / 1024, 1)))
    if args.impl == "ours":
        out["dynamo_stats"] = dict(dynamo.stats)
    for p, s in out["phases"].items():
        print(f"{p:22s} rss {s['VmRSS']:7.1f}  anon {s['RssAnon']:7.1f}  file {s['RssFile']:7.1f}")
    print("peak:", json.dumps(out["peak"]))
    print(f"VmHWM {hwm:.1f} MiB; steps {out['steps_s']}; median after the first {out['step_s']:.3f} s; "
          f"CPU s {out['cpu_s']} (median {out['step_cpu_s']:.3f}); minor faults {faults}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if tmp:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
