"""Read rate of the quantized-weight product kernels per ISA
(lib/Runtime/Quant/), standalone: one row of x (batch-1 decode) against the
Qwen2-0.5B linear shapes (N x K: 896 x 4864 down, 4864 x 896 gate/up,
896 x 896 q/o), 24 weights of each (one per layer: more bytes than the
caches hold, as a decode step reads them), int8 with per-channel scales
and int4 in this host's torch packing with group-32 scales and zeros,
through flex_quant_matmul_i8 / _i4 of the built runtime, each ISA forced in
turn, and torch's own int4 kernel (aten._weight_int4pack_mm_for_cpu) on the
same bytes. Prints GB/s of quantized weight bytes read (and with the scales
and zeros counted too; each product's best of `--repeat` rounds, the variants
in turn in each), a tensor copy's GB/s (bytes read + written:
benchmarks/timing.py's copy_bandwidth_gbs) measured in the same run (first
and last), and the host's CPU.

    PYTHONPATH=python python lib/Runtime/Quant/quant_bench.py [--threads 2] [--dtype f32] [--no-torch]
"""

import argparse
import ctypes
import os
import sys
import time

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

from benchmarks.timing import copy_bandwidth_gbs  # noqa: E402
from torch_mlir_flex.backend import blas, cpu_features  # noqa: E402

SHAPES = [(896, 4864), (4864, 896), (896, 896)]
LAYERS, GROUP = 24, 32


def host_layout():
    """The int4 packing torch uses here (0 DEFAULT, 1 AVX2, 2 AVX512)."""
    q = torch.arange(64 * 128, dtype=torch.int32).reshape(128, 64) % 16
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    for layout, bn in ((2, 64), (1, 32), (0, 32)):
        b = q.reshape(128 // bn, bn, 64).permute(0, 2, 1)
        lo, hi = (b[..., 0::2], b[..., 1::2]) if layout == 0 else (b[..., :bn // 2], b[..., bn // 2:])
        if torch.equal(packed, (lo | (hi << 4)).to(torch.uint8).reshape(128, 32)):
            return layout
    raise SystemExit("torch packs int4 in a layout none of 0/1/2")


def weights(fmt, n, k, dtype):
    """LAYERS weights of one shape: (bytes, scales) per layer."""
    g = torch.Generator().manual_seed(n + k)
    out = []
    for _ in range(LAYERS):
        if fmt == "int8":
            q = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int32).to(torch.int8)
            out.append((q, (torch.rand(n, generator=g) * 0.01).to(dtype)))
        else:
            q = torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32)
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
            sz = torch.rand(k // GROUP, n, 2, generator=g).to(dtype).contiguous()
            out.append((packed, sz))
    return out


def ours(rt, fmt, layout, x, w, s, y):
    flags = 7 if x.dtype == torch.bfloat16 else 0
    m, k = x.shape
    n = w.shape[0]
    if fmt == "int8":
        rt.flex_quant_matmul_i8(m, n, k, x.data_ptr(), 0, k, w.data_ptr(), 0, k, s.data_ptr(), 0,
                                y.data_ptr(), 0, n, flags)
    else:
        rt.flex_quant_matmul_i4(m, n, k, x.data_ptr(), 0, k, w.data_ptr(), 0, s.data_ptr(), 0,
                                y.data_ptr(), 0, n, GROUP, layout, flags)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch's threads")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"], help="x, y and scales")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true", help="skip torch's int4 kernel (on a "
                        "loaded host its slow calls left the threads stalling at every barrier)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    blas.runtime_library()
    rt = ctypes.CDLL(blas.runtime_library_path())
    rt.flex_quant_matmul_i8.argtypes = [ctypes.c_int64] * 15
    rt.flex_quant_matmul_i4.argtypes = [ctypes.c_int64] * 16
    layout = host_layout()
    cpu = cpu_features._first_cpu()
    print(f"host: {cpu.get('model name', '?')} (family {cpu.get('cpu family', '?')}, model "
          f"{cpu.get('model', '?')}), {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"kernel ISAs {', '.join(blas.runtime_isas())}, torch int4 layout {layout}, x {args.dtype}")
    print(f"copy: {copy_bandwidth_gbs():.1f} GB/s (read + written)", flush=True)
    for fmt in ("int8", "int4"):
        for n, k in SHAPES:
            ws = weights(fmt, n, k, dtype)
            total = sum(w.numel() * w.element_size() for w, _ in ws)
            scales = sum(s.numel() * s.element_size() for _, s in ws)
            x = torch.randn(1, k).to(dtype)
            y = torch.empty(1, n, dtype=dtype)
            variants = {isa: (lambda isa=isa: blas.set_runtime_isa(isa),
                              lambda w, s: ours(rt, fmt, layout, x, w, s, y)) for isa in blas.runtime_isas()}
            if fmt == "int4" and not args.no_torch:
                variants["torch"] = (lambda: None,
                                     lambda w, s: torch.ops.aten._weight_int4pack_mm_for_cpu(x, w, GROUP, s))
            # Each product timed alone, its best over the rounds: a moment
            # the host's other work holds a thread (a 2-CPU host shared by
            # others: several ms at a barrier) slows one product, not a pass.
            best = {name: [float("inf")] * LAYERS for name in variants}
            for rnd in range(args.repeat + 1):
                for name, (setup, run) in variants.items():
                    setup()
                    for i, (w, s) in enumerate(ws):
                        t = time.perf_counter()
                        run(w, s)
                        if rnd:
                            best[name][i] = min(best[name][i], time.perf_counter() - t)
            blas.set_runtime_isa(None)
            for name, times in best.items():
                t = sum(times)
                print(f"{fmt:4s} {n:5d}x{k:<5d} {name:8s} {total / t / 1e9:6.1f} GB/s "
                      f"({(total + scales) / t / 1e9:5.1f} with scales) {t / LAYERS * 1e6:7.1f} "
                      f"us/product ({total / 1e6:.0f} MB)", flush=True)
            del ws
    print(f"copy again: {copy_bandwidth_gbs():.1f} GB/s (read + written)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
