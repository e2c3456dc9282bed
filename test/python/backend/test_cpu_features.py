"""backend/cpu_features.py: /proc/cpuinfo and CPUID (as torch reads it)
must agree on what the JIT may use; where CPUID stops at AVX2 (an
emulator, a VM) the flags beyond it are dropped, so no pipeline asks LLVM
for AVX-512 or AVX512-BF16 code its target cannot hold.

    PYTHONPATH=python pytest -q test/python/backend/test_cpu_features.py
"""

import torch_mlir_flex  # noqa: F401  (before torch_mlir)

import torch

from torch_mlir_flex.backend import cpu_features

AVX512_HOST = {"flags": "fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16 avx_vnni"}


def test_flags_beyond_avx2_dropped_when_cpuid_stops_there(monkeypatch):
    monkeypatch.setattr(cpu_features, "_first_cpu", lambda: AVX512_HOST)
    monkeypatch.setattr(cpu_features, "_cpuid_stops_at_avx2", lambda: True)
    monkeypatch.delenv(cpu_features.ISA_ENV, raising=False)
    monkeypatch.delenv(cpu_features.BF16_DOT_ENV, raising=False)
    flags = cpu_features.host_cpu_flags()
    assert {"avx2", "fma", "avx_vnni"} <= flags
    assert not {f for f in flags if f.startswith(("avx512", "amx"))}
    assert cpu_features.vector_isa() == "avx2"
    assert cpu_features.vector_bits_default() == 256
    assert not cpu_features.bf16_dot_default()
    assert cpu_features.jit_target_cpu() is None  # the host's CPU is an AVX2 one


def test_flags_kept_when_cpuid_agrees(monkeypatch):
    monkeypatch.setattr(cpu_features, "_first_cpu", lambda: AVX512_HOST)
    monkeypatch.setattr(cpu_features, "_cpuid_stops_at_avx2", lambda: False)
    monkeypatch.delenv(cpu_features.ISA_ENV, raising=False)
    assert {"avx512f", "avx512_bf16", "amx_tile"} <= cpu_features.host_cpu_flags()
    assert cpu_features.vector_isa() == "avx512"


def test_this_host_agrees_with_torch():
    # What the pipelines will use never exceeds what torch's CPUID check saw.
    cap = torch.backends.cpu.get_cpu_capability()
    if cap in ("DEFAULT", "AVX2", "NO AVX"):
        assert not {f for f in cpu_features.host_cpu_flags() if f.startswith("avx512")}
        assert cpu_features.vector_isa() == "avx2"
