"""Decode with a long context: hf.generator's float KV cache against
``kv_cache_dtype=torch.int8`` (docs/quantization.md, "Quantized KV cache").

    python -m benchmarks.kv_int8 [--context 2048] [--batches 1 4] [--weights f32|int8|int4] [--steps 24]

A random model of Qwen2-0.5B's shape (benchmarks/quant_models.py: 24
layers, 14 query / 2 kv heads of 64; `--weights int8/int4` quantizes its
linears with torchao as the quantized serving benchmark does). The cache
is filled with `--context` random keys and values (standard normal; for
the int8 cache quantized per token as the step would write them) instead
of running a prefill of that length: the decode step's time does not
depend on the values, and a 2048-token prefill of the 0.5B shape takes
minutes on two cores. Then `--steps` decode steps (after two warm ones)
through the compiled decode function, each at the next position;
prints the median ms/token per (batch, cache) and the cache's bytes.
"""

import argparse
import statistics
import time

import torch_mlir_flex  # noqa: F401  (before torch-mlir)
import torch


def build_model(weights: str, layers: int):
    from .quant_models import QuantServeConfig, build, float_model

    cfg = QuantServeConfig("qwen2-0.5b", weights if weights != "f32" else "int8")
    model = float_model(cfg) if weights == "f32" else build(cfg)[0]
    if layers < model.config.num_hidden_layers:
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
    return model


def fill_cache(gen, context: int):
    """`context` random tokens in every layer's cache."""
    from torch_mlir_flex.hf.static_step import quantize_kv

    g = torch.Generator().manual_seed(0)
    per_layer = 4 if gen.kv_int8 else 2
    for i in range(0, len(gen.cache), per_layer):
        for j in range(2):
            t = gen.cache[i + j]
            x = torch.randn(*t.shape[:2], context, t.shape[3], generator=g)
            if gen.kv_int8:
                q, s = quantize_kv(x)
                t[:, :, :context] = q
                gen.cache[i + 2 + j][:, :, :context] = s
            else:
                t[:, :, :context] = x


def decode_ms(model, batch: int, context: int, steps: int, kv_int8: bool):
    """(median ms per decode step, cache bytes, compile s)."""
    import torch_mlir_flex.hf as flex_hf

    gen = flex_hf.generator(model, max_cache_len=context + steps + 2, batch_size=batch,
                            kv_cache_dtype=torch.int8 if kv_int8 else None)
    fill_cache(gen, context)
    t = time.perf_counter()
    decode = gen.decode_fn
    compile_s = time.perf_counter() - t
    mask = torch.zeros(batch, gen.max_cache_len, dtype=torch.long)
    mask[:, :context] = 1
    token = torch.full((batch, 1), 5, dtype=torch.long)
    times = []
    with torch.no_grad():
        for step in range(steps + 2):
            slot = context + step
            mask[:, slot] = 1
            t = time.perf_counter()
            decode(token, mask, torch.full((batch, 1), slot), torch.tensor([slot]), *gen.cache)
            times.append(time.perf_counter() - t)
    nbytes = sum(t.numel() * t.element_size() for t in gen.cache)
    return 1e3 * statistics.median(times[2:]), nbytes, compile_s


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--context", type=int, default=2048, help="cached tokens before the timed steps")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    p.add_argument("--weights", choices=("f32", "int8", "int4"), default="f32")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--steps", type=int, default=24)
    a = p.parse_args(argv)
    model = build_model(a.weights, a.layers)
    print(f"qwen2-0.5b shape, {a.layers} layers, weights {a.weights}, context {a.context}, "
          f"{torch.get_num_threads()} threads")
    print("| batch | KV cache | decode ms/token | cache MiB | compile s |")
    print("|---|---|---|---|---|")
    for batch in a.batches:
        for kv_int8 in (False, True):
            ms, nbytes, compile_s = decode_ms(model, batch, a.context, a.steps, kv_int8)
            print(f"| {batch} | {'int8' if kv_int8 else 'f32'} | {ms:.2f} | {nbytes / 2**20:.0f} | "
                  f"{compile_s:.1f} |", flush=True)


if __name__ == "__main__":
    main()
