"""Decode with a long context: hf.generator's float KV cache against
``kv_cache_dtype=torch.int8`` (docs/quantization.md, "Quantized KV cache").

    python -m benchmarks.kv_int8 [--context 2048] [--batches 1 4] [--weights f32|int8|int4] [--steps 24]
    python -m benchmarks.kv_int8 --attention-only      # the 24 layers' decode attentions alone

A random model of Qwen2-0.5B's shape (benchmarks/quant_models.py: 24
layers, 14 query / 2 kv heads of 64; `--weights int8/int4` quantizes its
linears with torchao as the quantized serving benchmark does). The cache
is filled with `--context` random keys and values (standard normal; for
the int8 cache quantized per token as the step would write them) instead
of running a prefill of that length: the decode step's time does not
depend on the values, and a 2048-token prefill of the 0.5B shape takes
minutes on two cores. Then `--steps` decode steps (after two warm ones)
through the compiled decode functions of both caches, alternating (a
change of the host's load hits both), each at the next position;
prints the median ms/token per (batch, cache) and the cache's bytes.
"""

import argparse
import os
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


def decode_steps(model, batch: int, context: int, kv_int8: bool):
    """(a function running one decode step at the next position, cache
    bytes, compile s)."""
    import torch_mlir_flex.hf as flex_hf

    gen = flex_hf.generator(model, max_cache_len=context + 64, batch_size=batch,
                            kv_cache_dtype=torch.int8 if kv_int8 else None)
    fill_cache(gen, context)
    t = time.perf_counter()
    decode = gen.decode_fn
    compile_s = time.perf_counter() - t
    mask = torch.zeros(batch, gen.max_cache_len, dtype=torch.long)
    mask[:, :context] = 1
    token = torch.full((batch, 1), 5, dtype=torch.long)
    slot = [context - 1]

    def step():
        s = slot[0] = slot[0] + 1 if slot[0] + 1 < gen.max_cache_len else context
        mask[:, s] = 1
        with torch.no_grad():
            decode(token, mask, torch.full((batch, 1), s), torch.tensor([s]), *gen.cache)

    nbytes = sum(t.numel() * t.element_size() for t in gen.cache)
    return step, nbytes, compile_s


def timed(step):
    t = time.perf_counter()
    step()
    return time.perf_counter() - t


class _Attention(torch.nn.Module):
    """Decode attention of one layer over a float cache, or (with scales)
    over an int8 one dequantized as StaticStep's int8 layers do."""

    def forward(self, q, k, v, k_scale=None, v_scale=None):
        from torch.nn.attention.flex_attention import flex_attention

        if k_scale is not None:
            k, v = k.float() * k_scale[..., None], v.float() * v_scale[..., None]
        return flex_attention(q, k, v, enable_gqa=True)


def attention_only(batch: int, context: int, layers: int, steps: int):
    """(f32 ms, int8 ms): `layers` decode attentions (Qwen2-0.5B's 14 / 2
    heads of 64), each over its own cache (together larger than the
    caches of the CPU), alternating f32 and int8 rounds; medians."""
    import torch_mlir_flex as tmf
    from torch_mlir_flex.hf.static_step import quantize_kv

    q = torch.randn(batch, 14, 1, 64)
    floats = [(torch.randn(batch, 2, context, 64), torch.randn(batch, 2, context, 64)) for _ in range(layers)]
    ints = [(kq, vq, ks, vs) for k, v in floats for (kq, ks), (vq, vs) in [(quantize_kv(k), quantize_kv(v))]]
    f = tmf.compile(_Attention(), (q, *floats[0]))
    i = tmf.compile(_Attention(), (q, ints[0][0], ints[0][1], ints[0][2], ints[0][3]))
    times = [[], []]
    for _ in range(steps + 2):
        times[0].append(timed(lambda: [f(q, k, v) for k, v in floats]))
        times[1].append(timed(lambda: [i(q, *args) for args in ints]))
    return [1e3 * statistics.median(t[2:]) for t in times]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--context", type=int, default=2048, help="cached tokens before the timed steps")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    p.add_argument("--weights", choices=("f32", "int8", "int4"), default="f32")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--attention-only", action="store_true",
                   help="time the decode attentions alone (--layers of them), not the model")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.attention_only:
        print(f"{a.layers} decode attentions (14 / 2 heads of 64), context {a.context}, "
              f"{torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")
        print("| batch | f32 cache ms | int8 cache ms |")
        print("|---|---|---|")
        for batch in a.batches:
            f, i = attention_only(batch, a.context, a.layers, a.steps)
            print(f"| {batch} | {f:.2f} | {i:.2f} |", flush=True)
        return
    model = build_model(a.weights, a.layers)
    print(f"qwen2-0.5b shape, {a.layers} layers, weights {a.weights}, context {a.context}, "
          f"{torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")
    print("| batch | KV cache | decode ms/token | cache MiB | compile s |")
    print("|---|---|---|---|---|")
    for batch in a.batches:
        runs = [decode_steps(model, batch, a.context, kv_int8) for kv_int8 in (False, True)]
        # Alternating steps of the two: a change in the host's load hits both.
        times = [[], []]
        for i in range(a.steps + 2):
            for k, (step, _, _) in enumerate(runs):
                times[k].append(timed(step))
        for k, (_, nbytes, compile_s) in enumerate(runs):
            ms = 1e3 * statistics.median(times[k][2:])
            print(f"| {batch} | {'int8' if k else 'f32'} | {ms:.2f} | {nbytes / 2**20:.0f} | {compile_s:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
