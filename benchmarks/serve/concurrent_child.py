"""One implementation of the concurrent-serving benchmark in its own
process: `python -m benchmarks.serve.concurrent_child '<json spec>'`
prints one JSON line (benchmarks/serve/concurrent.py runs it).

The request stream (`make_stream`): from one seed, prompts of uniformly
drawn lengths and random token ids, output lengths drawn the same way,
Poisson arrivals (unit exponential gaps drawn once, divided by the rate:
every rate has the same requests in the same order; rate "inf": all at 0).
The driver (`drive`) submits each request to transformers'
ContinuousBatchingManager (`add_request(..., record_timestamps=True)`) at
its arrival time, or as soon as fewer than `concurrency` requests are in
flight, and collects finished requests from the manager's output queue
(`get_result`); the manager stamps each generated token (perf_counter,
the driver's clock). `metrics` turns the records into output tokens/s,
requests/s, time to first token (from submission) and inter-token latency
percentiles.

Implementations: `eager` (no compile), `inductor` (CompileConfig()),
`ours` (CompileConfig(backend="torch_mlir_flex")) in the config's
varlen_compile_config and decode_compile_config, all on the model's
"sdpa" attention; `ours-paged-flex`: ours over torch_mlir_flex.hf.paged's
flex attention reading the paged cache in place.
"""

import dataclasses
import json
import math
import random
import sys
import time

IMPLS = ("ours", "inductor", "eager", "ours-paged-flex")


@dataclasses.dataclass(frozen=True)
class StreamSpec:
    requests: int  # the stream's length (a point serves a prefix of it)
    prompt_min: int
    prompt_max: int
    out_min: int
    out_max: int
    min_requests: int = 12  # per point: max(min_requests, 2 x concurrency), at most `requests`
    seed: int = 0

    def requests_at(self, concurrency: int) -> int:
        return min(self.requests, max(self.min_requests, 2 * concurrency))


QUICK = StreamSpec(12, 8, 64, 4, 16, min_requests=12)
FULL = StreamSpec(128, 32, 1024, 16, 256, min_requests=16)


def make_stream(spec: StreamSpec, vocab: int):
    """[{"prompt": ids, "max_new_tokens": n, "gap": unit exponential}] (fixed seed)."""
    rng = random.Random(spec.seed)
    out = []
    for _ in range(spec.requests):
        length = rng.randint(spec.prompt_min, spec.prompt_max)
        out.append(dict(prompt=[rng.randrange(3, vocab) for _ in range(length)],
                        max_new_tokens=rng.randint(spec.out_min, spec.out_max), gap=rng.expovariate(1.0)))
    return out


def arrivals(stream, rate: float):
    """Arrival times (s from the start) of the stream's requests at `rate`
    requests/s (Poisson: cumulative exponential gaps); inf: all at 0."""
    if math.isinf(rate):
        return [0.0] * len(stream)
    t, out = 0.0, []
    for r in stream:
        out.append(t)
        t += r["gap"] / rate
    return out


def drive(manager, stream, rate: float, concurrency: int, timeout: float = 3600.0):
    """Serves `stream` through a started manager: each request submitted at
    its arrival time or, when `concurrency` are in flight, as soon as one
    finishes. Records per request (times in s from the start): arrival,
    submit, done (collected), token times, tokens. Raises on a failed
    request or a stopped manager."""
    times = arrivals(stream, rate)
    clock = time.perf_counter
    t0 = clock()
    order = list(range(len(stream)))
    inflight, records = {}, [None] * len(stream)
    while order or inflight:
        now = clock() - t0
        if now > timeout:
            raise TimeoutError(f"stream not served in {timeout} s ({len(order)} waiting, {len(inflight)} in flight)")
        while order and len(inflight) < concurrency and times[order[0]] <= now:
            i = order.pop(0)
            req = stream[i]
            submit = clock() - t0
            rid = manager.add_request(req["prompt"], max_new_tokens=req["max_new_tokens"], record_timestamps=True)
            if rid is None:
                raise RuntimeError("the manager refused a request (not accepting new requests)")
            inflight[rid] = (i, submit)
        wait = 0.05
        if order and len(inflight) < concurrency:
            wait = max(0.0005, min(wait, times[order[0]] - (clock() - t0)))
        result = manager.get_result(timeout=wait)
        if result is None:
            if inflight and not manager.is_running():
                raise RuntimeError("the continuous-batching manager stopped with requests in flight")
            continue
        if not result.is_finished() or result.request_id not in inflight:
            continue
        if result.error is not None:
            raise RuntimeError(f"request {result.request_id} failed: {result.error}")
        i, submit = inflight.pop(result.request_id)
        records[i] = dict(arrival=times[i], submit=submit, done=clock() - t0,
                          times=[t - t0 for t in result.timestamps], tokens=list(result.generated_tokens))
    return records


def percentile(values, p: float) -> float:
    """The p-th percentile (0-100) of `values`, linear between closest ranks
    (numpy's default)."""
    v = sorted(values)
    if not v:
        raise ValueError("percentile of no values")
    pos = (len(v) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def metrics(records) -> dict:
    """Throughput and latency of one served stream: output tokens/s and
    requests/s over the span from the first submission to the last token;
    TTFT = first token - submission; ITL = gaps between a request's
    successive tokens (all requests' gaps pooled); queue = submission -
    arrival (waiting for a free slot under the concurrency cap)."""
    start = min(r["submit"] for r in records)
    end = max(r["times"][-1] for r in records)
    span = end - start
    tokens = sum(len(r["times"]) for r in records)
    ttft = [1e3 * (r["times"][0] - r["submit"]) for r in records]
    itl = [1e3 * (b - a) for r in records for a, b in zip(r["times"], r["times"][1:])]
    queue = [1e3 * (r["submit"] - r["arrival"]) for r in records]
    out = dict(requests=len(records), output_tokens=tokens, duration_s=span, tokens_per_s=tokens / span,
               requests_per_s=len(records) / span, ttft_p50_ms=percentile(ttft, 50),
               ttft_p99_ms=percentile(ttft, 99), queue_p50_ms=percentile(queue, 50))
    if itl:
        out.update(itl_p50_ms=percentile(itl, 50), itl_p99_ms=percentile(itl, 99))
    return out


def greedy_tokens(model, stream):
    """Each request's tokens by per-request greedy generation (model.generate,
    batch 1, exactly max_new_tokens, no end-of-sequence)."""
    import torch

    out = []
    with torch.no_grad():
        for req in stream:
            ids = torch.tensor([req["prompt"]])
            n = req["max_new_tokens"]
            got = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
            out.append(got[0, ids.shape[1]:].tolist())
    return out


def cb_config(impl: str, max_len: int, concurrency: int, page_size: int, max_batch_tokens: int,
              q_padding: int = 0, kv_padding: int = 0):
    """The ContinuousBatchingConfig of `impl`: a cache of room for
    `concurrency` requests of `max_len` tokens (block sharing off: the
    points serve the same prompts, a prefix cache would skip their prefill).
    With compile, transformers pads each step's query tokens and the KV it
    reads up to multiples of `q_padding` / `kv_padding` (0: its defaults, 64
    and 16384 tokens, capped at the batch and the whole cache)."""
    from transformers.generation.configuration_utils import CompileConfig, ContinuousBatchingConfig

    compile_config = {"eager": None, "inductor": CompileConfig()}.get(impl, CompileConfig(backend="torch_mlir_flex"))
    pages = -(-max_len // page_size) * concurrency + 4
    return ContinuousBatchingConfig(varlen_compile_config=compile_config, decode_compile_config=compile_config,
                                    num_blocks=pages, page_size=page_size, max_batch_tokens=max_batch_tokens,
                                    allow_block_sharing=False, use_async_batching=False,
                                    q_padding_interval_size=q_padding, kv_padding_interval_size=kv_padding)


def compile_counts() -> dict:
    """Graphs Dynamo compiled in this process and, for ours, what our
    backend did with them (torch_mlir_flex.dynamo.stats)."""
    import torch._dynamo.utils as dynamo_utils

    from torch_mlir_flex import dynamo

    return dict(dynamo_graphs=int(dynamo_utils.counters["stats"]["unique_graphs"]), **dict(dynamo.stats))


def serve(model, impl, stream, concurrencies, rates, requests_at=None, page_size=32, max_batch_tokens=256,
          timeout=3600.0, log=None, padding=(0, 0)):
    """Warms `impl` up, then serves the stream at every (concurrency, rate)
    point with one manager (`requests_at(concurrency)`: how many of the
    stream's first requests a point serves; default all). {"points": [...], "warmup_s", "compiles_warmup",
    "compiles_total", "graphs", "tokens": {point: tokens of each request}}."""
    import torch
    from transformers import GenerationConfig

    if impl == "ours-paged-flex":
        import torch_mlir_flex.hf as flex_hf

        model.set_attn_implementation(flex_hf.register_paged_flex())
    if impl.startswith("ours"):
        from torch_mlir_flex import dynamo

        dynamo.register()
    max_len = max(len(r["prompt"]) + r["max_new_tokens"] for r in stream)
    cb = cb_config(impl, max_len, max(concurrencies), page_size, max_batch_tokens, *padding)
    gen = GenerationConfig(max_new_tokens=max(r["max_new_tokens"] for r in stream), do_sample=False,
                           eos_token_id=-1, pad_token_id=0)
    res = dict(points=[], tokens={})
    with torch.no_grad():
        t = time.perf_counter()
        manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
        manager.warmup()
        manager.start()
        try:
            # The shortest and the longest prompt, then two at once: the
            # prefill, decode and mixed steps compile before the points.
            by_len = sorted(stream, key=lambda r: len(r["prompt"]))
            warm = [dict(by_len[0], max_new_tokens=4), dict(by_len[-1], max_new_tokens=4)]
            drive(manager, warm, math.inf, 1, timeout)
            drive(manager, warm, math.inf, 2, timeout)
            res["warmup_s"] = time.perf_counter() - t
            res["compiles_warmup"] = compile_counts()
            for c in concurrencies:
                for rate in rates:
                    part = stream[:requests_at(c)] if requests_at else stream
                    records = drive(manager, part, rate, c, timeout)
                    point = dict(concurrency=c, rate=rate if math.isfinite(rate) else "inf", **metrics(records))
                    res["points"].append(point)
                    res["tokens"][f"{c}@{point['rate']}"] = [r["tokens"] for r in records]
                    if log:
                        log(json.dumps(dict(impl=impl, **point)))
        finally:
            manager.stop(block=True, timeout=60)
    res["compiles_total"] = compile_counts()
    return res


def main(spec):
    import torch_mlir_flex  # noqa: F401  (before torch-mlir)

    from .configs import ServeConfig, build

    cfg = ServeConfig(spec["model"], spec["dtype"], 1, 128, layers=spec.get("layers", 24))
    stream_spec = StreamSpec(**spec["stream"])
    model, _, _ = build(cfg)
    model.set_attn_implementation("sdpa")
    stream = make_stream(stream_spec, model.config.vocab_size)
    rates = [float(r) for r in spec["rates"]]
    res = serve(model, spec["impl"], stream, spec["concurrency"], rates, stream_spec.requests_at,
                spec.get("page_size", 32),
                spec.get("max_batch_tokens", 256), spec.get("timeout", 3600.0),
                log=lambda s: print(s, file=sys.stderr, flush=True),
                padding=(spec.get("q_padding", 0), spec.get("kv_padding", 0)))
    check = spec.get("check", 0)
    if check and cfg.dtype == "f32":
        model.set_attn_implementation("sdpa")
        want = greedy_tokens(model, stream[:check])
        differ = sorted({i for toks in res["tokens"].values() for i, (a, b) in enumerate(zip(toks, want)) if a != b})
        res["tokens_checked"], res["tokens_differ"] = min(check, len(stream)), differ
    del res["tokens"]
    res["padding"] = [spec.get("q_padding", 0), spec.get("kv_padding", 0)]
    print(json.dumps(res))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
