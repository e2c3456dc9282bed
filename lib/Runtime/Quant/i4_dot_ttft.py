"""Time to first token of the int4 g32 models of benchmarks/quant_models.py
(Qwen2-0.5B or -1.5B shape, 128-token prompt, `hf.generator` as
`benchmarks.serve --quant` runs it) with the int4 products' activations in
f32 and in int8 (FlexQuantI4Dot.c), alternating in one process so that a
shared host's load falls on both alike; prints the wall and CPU time (all
threads) of each, min and median, and the first token of each.

    PYTHONPATH=python python lib/Runtime/Quant/i4_dot_ttft.py [qwen2-0.5b|qwen2-1.5b] [threads] [reps]
"""

import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

import torch_mlir_flex  # noqa: F401,E402  (before torch)
import torch  # noqa: E402

from benchmarks.quant_models import QuantServeConfig, build  # noqa: E402
from benchmarks.serve.child import _ApiModel, _generate  # noqa: E402
from torch_mlir_flex.backend import blas  # noqa: E402


def main():
    model_name = sys.argv[1] if len(sys.argv) > 1 else "qwen2-0.5b"
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    torch.set_num_threads(threads)
    cfg = QuantServeConfig(model_name, "int4")
    model, ids, mask = build(cfg, "flex_attention")
    runner = _ApiModel(model, cfg)
    _generate(runner, ids, mask, 1, False)  # compiles
    times, first = {"f32": [], "int8": []}, {}
    for _ in range(reps):
        for mode in times:
            blas.set_quant_activations(mode)
            wall, cpu = time.perf_counter(), time.process_time()
            out = _generate(runner, ids, mask, 1, False)
            times[mode].append((time.perf_counter() - wall, time.process_time() - cpu))
            first[mode] = out[0, -1].item()
    blas.set_quant_activations(None)
    print(f"host {platform.node()}, load {os.getloadavg()[0]:.2f}; {model_name} int4 g32, "
          f"{threads} threads, {reps} reps; int8 products so far {blas.quant_int8_activation_products()}")
    for mode, ts in times.items():
        w, c = [t[0] * 1e3 for t in ts], [t[1] * 1e3 for t in ts]
        print(f"{mode}: wall min {min(w):.0f} median {statistics.median(w):.0f} ms; "
              f"CPU min {min(c):.0f} median {statistics.median(c):.0f} ms; first token {first[mode]}")


if __name__ == "__main__":
    main()
