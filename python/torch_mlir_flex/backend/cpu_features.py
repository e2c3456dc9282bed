"""Host CPU features that choose code paths of the lowering.

`bf16_dot_default()` decides flex-to-flash's `bf16-dot` (AVX512-BF16 dot
products for bf16 inputs) for the default tiled pipelines: on when the host
has avx512_bf16 (Linux: the `flags` line of /proc/cpuinfo; elsewhere the
feature is not detected and the generic path is used), off when
TORCH_MLIR_FLEX_BF16_DOT=0 (the named pipelines are built when
torch_mlir_flex is imported; `tiled_pipeline()` reads it on each call).
The JIT compiles for the host CPU, so the instructions it selects are the
host's.
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


def host_cpu_flags() -> frozenset:
    """The feature flags of the first CPU in /proc/cpuinfo."""
    return frozenset(_first_cpu().get("flags", "").split())


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


def bf16_dot_default() -> bool:
    """Whether the default pipelines use flex-to-flash's bf16-dot."""
    if os.environ.get(BF16_DOT_ENV, "").strip() == "0":
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
    TORCH_MLIR_FLEX_AMX=0."""
    if os.environ.get(AMX_ENV, "").strip() == "0":
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
