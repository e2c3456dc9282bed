"""One implementation of one model configuration, in its own process:
`python -m benchmarks.models.child JSON` prints one JSON line with its
compile time, forward times, peak RSS and where its output was saved.

JSON: {"model", "seq", "dtype", "layers", "impl", "reps", "out"}; impl is
eager, inductor, ours (cold: empty compile cache), ours-cached (a second
process on the same $TORCH_MLIR_FLEX_CACHE_DIR) or interleaved: one model,
compiled by all three, called in rounds (eager, inductor, ours, eager, ...)
so that the forward times share the machine's state; it reports
{"forward_ms": {impl: median}}."""

import json
import statistics
import sys
import time

from ..timing import _release_free_memory, _reset_peak_rss, _status_bytes


def _compile(impl, cfg, model, inputs):
    import torch

    if impl == "eager":
        return model
    if impl == "inductor":
        return torch.compile(model)
    import torch_mlir_flex

    if cfg.model == "block":
        return torch_mlir_flex.compile(model, inputs)
    from torch_mlir_flex import hf

    return hf.compile(model, inputs)


def _call(fn, inputs):
    out = fn(*inputs) if isinstance(inputs, tuple) else fn(**inputs)
    return getattr(out, "logits", out)


def interleaved(spec, cfg, model, inputs):
    """Median forward ms per implementation, timed in alternating rounds."""
    impls = ("eager", "inductor", "ours")
    fns = {impl: _compile(impl, cfg, model, inputs) for impl in impls}
    for fn in fns.values():  # inductor compiles here; a warm-up for all
        _call(fn, inputs)
    times = {impl: [] for impl in impls}
    for _ in range(spec["reps"]):
        for impl in impls:
            t = time.perf_counter()
            _call(fns[impl], inputs)
            times[impl].append(time.perf_counter() - t)
    return {"forward_ms": {k: 1e3 * statistics.median(v) for k, v in times.items()}}


def main(spec):
    if spec["impl"] in ("ours", "ours-cached", "interleaved"):
        import torch_mlir_flex  # noqa: F401  (before torch-mlir)
    import torch

    from .configs import ModelConfig, build, weight_bytes

    cfg = ModelConfig(spec["model"], spec["seq"], spec["dtype"], spec["layers"])
    base = _status_bytes("VmRSS")
    with torch.no_grad():
        model, inputs = build(cfg)
        for p in model.parameters():
            p.requires_grad_(False)
        # The peak counts from here: the weights are in, building them
        # (transformers inits in f32, then casts) is the same for all.
        _release_free_memory()
        _reset_peak_rss()
        if spec["impl"] == "interleaved":
            print(json.dumps(interleaved(spec, cfg, model, inputs)))
            return
        t = time.perf_counter()
        fn = _compile(spec["impl"], cfg, model, inputs)
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        out = _call(fn, inputs)
        first_s = time.perf_counter() - t
        # Saved and dropped before the timed calls: the peak is one
        # forward's, not two outputs alive at once (the logits of a 0.5B
        # model at S=1024 are 594 MiB in f32).
        if spec.get("out"):
            torch.save(out, spec["out"])
        del out
        times = []
        for _ in range(spec["reps"]):
            t = time.perf_counter()
            _call(fn, inputs)
            times.append(time.perf_counter() - t)
    print(json.dumps({
        "compile_s": compile_s if spec["impl"] != "eager" else 0.0,
        # inductor compiles at its first call
        "first_call_s": first_s,
        "forward_ms": 1e3 * statistics.median(times) if times else 1e3 * first_s,
        "peak_extra_mib": (_status_bytes("VmHWM") - base) / 2 ** 20,
        "weights_mib": weight_bytes(model) / 2 ** 20,
    }))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
