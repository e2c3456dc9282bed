"""Shared by the harness tests: the repository root on sys.path (for the
benchmarks package) and made-up host descriptions (benchmarks/host.py)
of two host kinds, with peaks as a run would have measured them."""

import os
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
from benchmarks import host as hs  # noqa: E402

ZEN1 = ({"vendor_id": "AuthenticAMD", "cpu family": "23", "model": "1",
         "model name": "AMD EPYC 7571 32-Core Processor"}, {"avx", "avx2", "fma", "sse4_2"})
XEON = ({"vendor_id": "GenuineIntel", "cpu family": "6", "model": "143",
         "model name": "Intel(R) Xeon(R) Platinum 8488C"},
        {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"})


def made_up_host(cpu, f32=50.0, bf16=None, copy=16.0):
    desc = hs.cpu(*cpu)
    desc.update(cores=2, torch_threads=2, f32_gflops=f32, bf16_gflops=bf16, copy_gbs=copy,
                measured="2026-12-06 10:00", load=1.0)
    return desc


@pytest.fixture
def zen1():
    """An AVX2-only Zen 1 host: "AMD EPYC 7571 Zen 1 (AVX2+FMA)"."""
    return made_up_host(ZEN1, f32=49.0, copy=16.0)


@pytest.fixture
def xeon():
    """An AMX Xeon: "Intel Xeon Platinum 8488C (AVX-512, AVX512-BF16, AMX)"."""
    return made_up_host(XEON, f32=150.0, bf16=900.0, copy=30.0)
