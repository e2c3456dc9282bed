"""One engine of one quantized serving configuration, in its own process:
`python -m benchmarks.serve_quant_child '<json spec>'`. Prints one JSON line.

Engines (greedy, the torchao-quantized model of benchmarks/quant_models.py):
- ours: `torch_mlir_flex.hf.generator(model, ...).generate(...)`
  (`attn_implementation="flex_attention"`);
- inductor: `model.forward = torch.compile(model.forward)` (torch's
  default backend on the same quantized model; DynamicCache; SDPA
  attention, transformers' default);
- eager: `model.generate`, uncompiled (SDPA attention).
llama.cpp runs in benchmarks/llama_cpp_peer.py.

`ttft_ms`: a warm generate() of one token (the 128-token prefill and the
first token); `ms_per_token`: the median time between successive tokens of
warm generate() calls (benchmarks/serve/child.py's stamps); `bandwidth_pct`:
the bytes a decode step reads (quant_models.bytes_per_token) over
ms/token, against the mean of copies measured right before and after each
round, the median over rounds."""

import json
import statistics
import sys
import time

import torch_mlir_flex  # noqa: F401  (before torch-mlir)
import torch

from .quant_models import QuantServeConfig, build, bytes_per_token
from .serve.child import _ApiModel, _generate, _Stamps
from .timing import copy_bandwidth_gbs

ATTN = {"ours": "flex_attention", "inductor": "sdpa", "eager": "sdpa"}


def engine(cfg: QuantServeConfig, name: str):
    """(object with `generate`, the quantized model, ids, mask)."""
    if name not in ATTN:
        raise ValueError(f"unknown engine {name!r}: expected one of {sorted(ATTN)}")
    model, ids, mask = build(cfg, ATTN[name])
    if name == "inductor":
        model.forward = torch.compile(model.forward)
    runner = _ApiModel(model, cfg) if name == "ours" else model
    return runner, model, ids, mask


def measure(cfg: QuantServeConfig, name: str, reps: int = 3, copy_reps: int = 3) -> dict:
    runner, model, ids, mask = engine(cfg, name)
    t = time.perf_counter()
    _generate(runner, ids, mask, 1, False)
    first = time.perf_counter() - t
    _generate(runner, ids, mask, cfg.new_tokens, False)  # compiles the decode step
    nbytes = bytes_per_token(model, cfg)
    ttft, steps, copy, share = [], [], [], []
    for _ in range(reps):
        t = time.perf_counter()
        _generate(runner, ids, mask, 1, False)
        ttft.append(time.perf_counter() - t)
        stamps = _Stamps()
        before = copy_bandwidth_gbs(reps=copy_reps)
        out = _generate(runner, ids, mask, cfg.new_tokens, False, stamps)
        round_steps = [b - a for a, b in zip(stamps.times, stamps.times[1:])]
        steps += round_steps
        copy.append((before + copy_bandwidth_gbs(reps=copy_reps)) / 2)
        share.append(100 * nbytes["total"] / (copy[-1] * 1e9 * statistics.median(round_steps)))
    return dict(first_s=first, ttft_ms=1e3 * statistics.median(ttft), ms_per_token=1e3 * statistics.median(steps),
                bytes_per_token=nbytes["total"], weight_bytes=nbytes["weights"], kv_bytes=nbytes["kv"],
                copy_gbs=statistics.median(copy), bandwidth_pct=statistics.median(share),
                tokens=out[:, ids.shape[1]:].tolist())


def main(spec):
    cfg = QuantServeConfig(**spec["config"])
    print(json.dumps(measure(cfg, spec["impl"], spec.get("reps", 3), spec.get("copy_reps", 3))))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
