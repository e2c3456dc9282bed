"""One implementation of one serving configuration, in its own process:
`python -m benchmarks.serve.child '<json spec>'`. Prints one JSON line.

Implementations (greedy):
- eager: `model.generate`, transformers' flex path uncompiled;
- inductor: `model.forward = torch.compile(model.forward)` (DynamicCache);
- inductor-static: inductor with `cache_implementation="static"`;
- ours: the same with `backend="torch_mlir_flex"` (DynamicCache);
- ours-static: ours with `cache_implementation="static"`;
- ours-api: `torch_mlir_flex.hf.generator(model, ...).generate(...)`
  (compiled prefill + decode over a static cache; `first_s` includes
  building the generator).
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

from ..timing import copy_bandwidth_gbs
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


class _ApiModel:
    """`generate` of torch_mlir_flex.hf's CompiledGenerator behind the
    `model.generate` call the benchmark makes (built at the first call)."""

    def __init__(self, model, cfg):
        self.model, self.cfg, self.gen = model, cfg, None
        self.config = model.config

    def generate(self, ids, attention_mask, max_new_tokens, min_new_tokens, do_sample, logits_processor=None):
        import torch_mlir_flex.hf as flex_hf

        if self.gen is None:
            self.gen = flex_hf.generator(self.model, max_cache_len=self.cfg.prompt + self.cfg.new_tokens + 32,
                                         batch_size=self.cfg.batch)
        return self.gen.generate(ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
                                 min_new_tokens=min_new_tokens, logits_processor=logits_processor)


def main(spec):
    cfg = ServeConfig(**spec["config"])
    impl = spec["impl"]
    model, ids, mask = build(cfg)
    static = impl.endswith("-static")
    if impl.startswith("inductor"):
        model.forward = torch.compile(model.forward)
    elif impl == "ours-api":
        model = _ApiModel(model, cfg)
    elif impl.startswith("ours"):
        from torch_mlir_flex import dynamo

        dynamo.register()
        model.forward = torch.compile(model.forward, backend="torch_mlir_flex")
    t = time.perf_counter()
    _generate(model, ids, mask, 1, static)
    first = time.perf_counter() - t
    _generate(model, ids, mask, cfg.new_tokens, static)  # compiles the decode graphs
    nbytes = bytes_per_token(model.model if isinstance(model, _ApiModel) else model, cfg)
    ttft, steps, copy, share = [], [], [], []
    for _ in range(spec.get("reps", 3)):
        t = time.perf_counter()
        _generate(model, ids, mask, 1, static)
        ttft.append(time.perf_counter() - t)
        stamps = _Stamps()
        before = copy_bandwidth_gbs(reps=3)
        out = _generate(model, ids, mask, cfg.new_tokens, static, stamps)
        round_steps = [b - a for a, b in zip(stamps.times, stamps.times[1:])]
        steps += round_steps
        # The host's bandwidth right before and after this round's tokens
        # (their mean): the share of it that the round's decode steps read.
        copy.append((before + copy_bandwidth_gbs(reps=3)) / 2)
        share.append(100 * nbytes / (copy[-1] * 1e9 * statistics.median(round_steps)))
    res = dict(first_s=first, ttft_ms=1e3 * statistics.median(ttft),
               ms_per_token=1e3 * statistics.median(steps), bytes_per_token=nbytes,
               copy_gbs=statistics.median(copy), bandwidth_pct=statistics.median(share),
               tokens=out[:, ids.shape[1]:].tolist())
    if impl in ("ours", "ours-static"):
        from torch_mlir_flex import dynamo

        res["graphs"] = dict(dynamo.stats)
    print(json.dumps(res))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
