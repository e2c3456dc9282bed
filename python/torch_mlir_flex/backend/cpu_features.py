"""Host CPU features that choose code paths of the lowering.

`bf16_dot_default()` decides flex-to-flash's `bf16-dot` (AVX512-BF16 dot
products for bf16 inputs) for the default tiled pipelines: on when the host
has avx512_bf16 (Linux: the `flags` line of /proc/cpuinfo; elsewhere the
feature is not detected and the generic path is used), off when
TORCH_MLIR_FLEX_BF16_DOT=0 (the named pipelines are built when
torch_mlir_flex is imported; `tiled_pipeline()` reads it on each call).
The JIT compiles for the host CPU, so the instructions it selects are the
host's.

`vector_isa()` is the vector ISA the JIT's code is made for: "avx512" when
the host has avx512f, else "avx2", capped by TORCH_MLIR_FLEX_ISA=avx2|avx512
(a cap above the host's is lowered to the host's). `vector_bits_default()`
gives flex-to-flash's / flex-backward-to-flash's `vector-bits` from it (512
or 256: the micro-kernels block for 32 zmm or 16 ymm registers), and with
the cap at avx2 on an AVX-512 host `jit_target_cpu()` names the CPU the
JIT's functions are compiled for instead of the host ("x86-64-v3": AVX2,
FMA, no AVX-512), so that the AVX2 code paths run (and are testable) on any
x86-64 host; bf16-dot and AMX are then off.
"""

import functools
import os

BF16_DOT_ENV = "TORCH_MLIR_FLEX_BF16_DOT"


@functools.lru_cache(maxsize=None)
def _first_cpu() -> dict:
    """The `key: value` lines of the first CPU in /proc/cpuinfo (empty when
    there is none to read)."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first CPU only
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return {}
    return fields


# Flags of instruction sets beyond AVX2 (prefixes).
_BEYOND_AVX2 = ("avx512", "amx", "avx10")


@functools.lru_cache(maxsize=None)
def _cpuid_stops_at_avx2() -> bool:
    """Whether the CPU as torch detects it (CPUID) has AVX2 at most while
    /proc/cpuinfo may say more: under an emulator (qemu-user passes the
    host's file through) or a VM whose CPUID hides what the host kernel
    reports. LLVM, torch, oneDNN and our runtime go by CPUID; so must we, or
    the pipelines would ask LLVM for instructions its target lacks (it then
    aborts the process)."""
    try:
        import torch

        return torch.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "NO AVX")
    except Exception:  # no torch, or an old one: /proc/cpuinfo alone
        return False


def host_cpu_flags() -> frozenset:
    """The feature flags of the first CPU in /proc/cpuinfo, less those
    beyond AVX2 when CPUID (as torch reads it) stops at AVX2."""
    flags = frozenset(_first_cpu().get("flags", "").split())
    if _cpuid_stops_at_avx2():
        flags = frozenset(f for f in flags if not f.startswith(_BEYOND_AVX2))
    return flags


def host_cpu_signature() -> str:
    """What the JIT's code depends on of the host CPU (it compiles for it):
    vendor, family, model and feature flags of the first CPU in
    /proc/cpuinfo (empty when there is none to read)."""
    fields = _first_cpu()
    if not fields:
        return ""
    parts = [fields.get(k, "") for k in ("vendor_id", "cpu family", "model", "model name")]
    return "|".join(parts + [" ".join(sorted(host_cpu_flags()))])


def host_has_avx512_bf16() -> bool:
    return "avx512_bf16" in host_cpu_flags()


ISA_ENV = "TORCH_MLIR_FLEX_ISA"
_ISA_RANK = {"avx2": 0, "avx512": 1}
# The x86-64 micro-architecture level of an AVX2+FMA host (LLVM's CPU name).
AVX2_TARGET_CPU = "x86-64-v3"


def host_vector_isa() -> str:
    """The host's widest vector ISA the kernels have: "avx512" (avx512f)
    or "avx2" (everything else on x86-64; the AVX2 blocking is also what
    LLVM's generic x86-64 code does best with)."""
    return "avx512" if "avx512f" in host_cpu_flags() else "avx2"


def vector_isa() -> str:
    """The vector ISA of the JIT's code: the host's, capped by
    $TORCH_MLIR_FLEX_ISA (avx2 | avx512; a cap above the host's is the
    host's). Raises ValueError for another value."""
    host = host_vector_isa()
    cap = os.environ.get(ISA_ENV, "").strip().lower()
    if not cap:
        return host
    if cap not in _ISA_RANK:
        raise ValueError(f"{ISA_ENV}={cap!r}: expected one of {sorted(_ISA_RANK)}")
    return cap if _ISA_RANK[cap] < _ISA_RANK[host] else host


def vector_bits_default() -> int:
    """flex-to-flash's and flex-backward-to-flash's `vector-bits`: 512 with
    AVX-512 (vector_isa), else 256."""
    return 512 if vector_isa() == "avx512" else 256


def jit_target_cpu():
    """The CPU the JIT's functions are compiled for when it is not the host
    (their `target_cpu`): AVX2_TARGET_CPU when $TORCH_MLIR_FLEX_ISA caps an
    AVX-512 host at avx2; None: the host's CPU."""
    if vector_isa() == "avx2" and host_vector_isa() == "avx512":
        return AVX2_TARGET_CPU
    return None


def bf16_dot_default() -> bool:
    """Whether the default pipelines use flex-to-flash's bf16-dot (never
    with the ISA capped at avx2)."""
    if os.environ.get(BF16_DOT_ENV, "").strip() == "0" or vector_isa() != "avx512":
        return False
    return host_has_avx512_bf16()


AMX_ENV = "TORCH_MLIR_FLEX_AMX"
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18
_SYS_ARCH_PRCTL = 158  # x86-64


@functools.lru_cache(maxsize=None)
def request_amx_permission() -> bool:
    """Asks Linux for this process's permission to use AMX tile data
    (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the
    first tile instruction faults). True when granted (idempotent; torch's
    oneDNN asks the same when it uses AMX)."""
    if "amx_tile" not in host_cpu_flags():
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def host_has_amx_bf16() -> bool:
    """AMX bf16 tiles usable here: the CPU flags and the permission."""
    flags = host_cpu_flags()
    return "amx_bf16" in flags and "amx_tile" in flags and request_amx_permission()


def host_has_bf16_dot() -> bool:
    """bf16 dot-product instructions here: AVX512-BF16 or AMX bf16 tiles
    (what oneDNN's bf16 matmul kernels run on)."""
    return host_has_avx512_bf16() or host_has_amx_bf16()


def amx_default() -> bool:
    """Whether the default pipelines run the backward's contractions on AMX
    tiles (bf16 inputs): when the host has them, unless
    TORCH_MLIR_FLEX_AMX=0 (or the ISA capped at avx2)."""
    if os.environ.get(AMX_ENV, "").strip() == "0" or vector_isa() != "avx512":
        return False
    return host_has_amx_bf16()


def spread_workers_default() -> bool:
    """Whether the default pipelines run flex-omp-spread-workers: when
    FLEX_SPREAD_WORKERS is set, as it says (0: off); else only on AMD
    family 23 (Zen 1 / Zen 2), where it was measured to help. On a 2-core
    AMD Zen 1 host, where Linux woke the worker on the caller's CPU, it
    made decode attention 3x faster; on a 2-core Intel Xeon (2026-12-05)
    it was neutral for attention and cost 4 ms of a 15 ms Qwen2-shaped
    decode step (many small parallel regions, each moving the worker); on
    a 2-core AMD EPYC Zen 4 (family 25, 2026-12-05) neutral for decode
    attention and 1.18x the time of a 24-layer Qwen2-shaped forward."""
    env = os.environ.get("FLEX_SPREAD_WORKERS", "").strip()
    if env:
        return env != "0"
    cpu = _first_cpu()
    return cpu.get("vendor_id", "") == "AuthenticAMD" and cpu.get("cpu family", "") == "23"
