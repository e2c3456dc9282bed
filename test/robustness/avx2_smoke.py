"""The AVX2-only smoke program of test_avx2_emulation.py, run under
build_tools/run_as_avx2.sh (qemu-user's Haswell: AVX2 + FMA, no AVX-512):
compiles a causal flex attention (f32 and bf16) and a one-row Linear (the
decode product; f32 and bf16 weights) with the default backend, checks
them against eager PyTorch, and prints one JSON line with what the process
saw of its CPU and which kernels ran. An AVX-512 or AVX512-BF16
instruction anywhere on these paths ends it with SIGILL.

    build_tools/run_as_avx2.sh --python test/robustness/avx2_smoke.py
"""

import json

import torch_mlir_flex  # first (torch_mlir_flex._load_order)

import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex.backend import blas, cpu_features


class CausalAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: torch.where(qi >= ki, s, -float("inf")))


def attention_error(dtype) -> float:
    """Max abs error of the compiled attention against eager in f32 on the
    same (rounded) inputs."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 16, generator=g).to(dtype) for _ in range(3))
    got = torch_mlir_flex.compile(CausalAttention(), (q, k, v))(q, k, v)
    expected = CausalAttention()(q.float(), k.float(), v.float())
    return (got.float() - expected).abs().max().item()


def linear_error(dtype) -> float:
    """Max abs error of a one-row Linear (64 -> 96, no bias) against the
    exact product of its (rounded) operands, relative to its largest
    output."""
    g = torch.Generator().manual_seed(1)
    lin = torch.nn.Linear(64, 96, bias=False).to(dtype)
    x = torch.randn(1, 64, generator=g).to(dtype)
    got = torch_mlir_flex.compile(lin, (x,))(x).double()
    exact = x.double() @ lin.weight.detach().double().t()
    return ((got - exact).abs().max() / exact.abs().max()).item()


def main():
    report = {
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "host_vector_isa": cpu_features.host_vector_isa(),
        "bf16_dot_default": cpu_features.bf16_dot_default(),
        "amx_default": cpu_features.amx_default(),
        "runtime_isas": list(blas.runtime_isas()),
        "gemv_kernel": {"f32": blas.gemv_kernel(torch.float32), "bf16": blas.gemv_kernel(torch.bfloat16)},
        "attention_error": {"f32": attention_error(torch.float32), "bf16": attention_error(torch.bfloat16)},
        "linear_error": {"f32": linear_error(torch.float32), "bf16": linear_error(torch.bfloat16)},
        "gemv_products": {isa: blas.gemv_products(isa) for isa in blas.runtime_isa_names()},
    }
    print("AVX2_SMOKE " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
