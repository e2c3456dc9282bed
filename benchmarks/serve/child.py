"""One implementation of one serving configuration, in its own process:
`python -m benchmarks.serve.child '<json spec>'`. Prints one JSON line.

Implementations (all call `model.generate`, greedy):
- eager: transformers' flex path uncompiled;
- inductor: `model.forward = torch.compile(model.forward)` (DynamicCache);
- ours: the same with `backend="torch_mlir_flex"` (DynamicCache);
- ours-static: ours with `cache_implementation="static"`.
`first_s` is the first generate() of the process (one token: time to the
first token, compilation included); `ttft_ms` the same call warm;
`ms_per_token` the median time between successive tokens of warm
generate() calls of `new_tokens` tokens (stamped by a logits processor
as each token is chosen: one decode step each)."""

import json
import statistics
import sys
import time

import torch_mlir_flex  # noqa: F401  (before torch-mlir)
import torch

from .configs import ServeConfig, build, bytes_per_token


class _Stamps:
    """A logits processor that records when each token is chosen."""

    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def _generate(model, ids, mask, n, static, stamps=None):
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False)
    if stamps is not None:
        from transformers import LogitsProcessorList

        kw["logits_processor"] = LogitsProcessorList([stamps])
    if static:
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, **kw)


def main(spec):
    cfg = ServeConfig(**spec["config"])
    impl = spec["impl"]
    model, ids, mask = build(cfg)
    static = impl == "ours-static"
    if impl == "inductor":
        model.forward = torch.compile(model.forward)
    elif impl.startswith("ours"):
        from torch_mlir_flex import dynamo

        dynamo.register()
        model.forward = torch.compile(model.forward, backend="torch_mlir_flex")
    t = time.perf_counter()
    _generate(model, ids, mask, 1, static)
    first = time.perf_counter() - t
    _generate(model, ids, mask, cfg.new_tokens, static)  # compiles the decode graphs
    ttft, steps = [], []
    for _ in range(spec.get("reps", 3)):
        t = time.perf_counter()
        _generate(model, ids, mask, 1, static)
        ttft.append(time.perf_counter() - t)
        stamps = _Stamps()
        out = _generate(model, ids, mask, cfg.new_tokens, static, stamps)
        steps += [b - a for a, b in zip(stamps.times, stamps.times[1:])]
    res = dict(first_s=first, ttft_ms=1e3 * statistics.median(ttft),
               ms_per_token=1e3 * statistics.median(steps),
               bytes_per_token=bytes_per_token(model, cfg), tokens=out[:, ids.shape[1]:].tolist())
    if impl.startswith("ours"):
        from torch_mlir_flex import dynamo

        res["graphs"] = dict(dynamo.stats)
    print(json.dumps(res))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
