"""The host a benchmark ran on, described once per run: its CPU (model name,
vendor, family / model, the microarchitecture where known), the ISA level
our kernels choose from (AMX, AVX512-BF16, AVX-512, AVX2+FMA or generic,
from the CPU's flags as torch_mlir_flex.backend.cpu_features reads them),
its cores, and its peaks measured in the same run: f32 GEMM GFLOP/s through
torch, bf16 GEMM GFLOP/s where the CPU has bf16 dot-product instructions,
copy GB/s (timing.copy_bandwidth_gbs).

`kind` is what the README's headline table and the benchmark pages keep
one row set for (CPU and ISA level, e.g. "AMD EPYC Zen 4 (AVX-512,
AVX512-BF16)"); `line` is the line printed above each table; `compact` the
peaks as a headline row shows them."""

import os
import time

from torch_mlir_flex.backend import cpu_features

from .peak import matmul_peak_gflops
from .timing import copy_bandwidth_gbs

# ISA levels, best first: (level, the CPU flags it needs, how tables name it).
ISA_LEVELS = (
    ("amx", ("amx_bf16", "amx_tile", "avx512_bf16"), "AVX-512, AVX512-BF16, AMX"),
    ("avx512_bf16", ("avx512f", "avx512_bf16"), "AVX-512, AVX512-BF16"),
    ("avx512f", ("avx512f",), "AVX-512"),
    ("avx2+fma", ("avx2", "fma"), "AVX2+FMA"),
)
GENERIC = ("generic", (), "no AVX2")
# GEMM size of the peak measurement: 17 GFLOP a call, about 0.1 s in f32 on
# two Zen 4 cores and 0.35 s on two Zen 1 cores; the best of REPS calls.
GEMM_N, GEMM_REPS = 2048, 5
UNKNOWN = "host not recorded"


def isa_level(flags) -> tuple:
    """(level, label) of the best ISA level whose flags are all in `flags`."""
    flags = set(flags)
    for level, needs, label in ISA_LEVELS:
        if flags.issuperset(needs):
            return level, label
    return GENERIC[0], GENERIC[2]


def microarchitecture(vendor: str, family: int, model: int) -> str:
    """AMD's Zen generation from the family and model numbers ("" where not
    known: other vendors name theirs in the model name)."""
    if vendor != "AuthenticAMD":
        return ""
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen 1"
    if family == 25:
        zen4 = 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF
        return "Zen 4" if zen4 else "Zen 3"
    if family == 26:
        return "Zen 5"
    return ""


def cpu_name(model_name: str, microarch: str = "") -> str:
    """The model name without its marks, clock and core count, with the
    microarchitecture appended when the name does not carry it."""
    words = []
    for w in model_name.replace("(R)", "").replace("(TM)", "").replace("(tm)", "").split():
        if w == "@" or w.endswith("GHz") or w.endswith("-Core") or w in ("CPU", "Processor"):
            continue
        words.append(w)
    name = " ".join(words) or "unknown CPU"
    return f"{name} {microarch}" if microarch and microarch not in name else name


def _number(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return -1


def cpu(fields: dict, flags) -> dict:
    """The CPU part of a host description from /proc/cpuinfo's fields of
    one CPU and its flags (no measurement)."""
    vendor = fields.get("vendor_id", "unknown")
    family, model = _number(fields.get("cpu family")), _number(fields.get("model"))
    arch = microarchitecture(vendor, family, model)
    level, label = isa_level(flags)
    name = cpu_name(fields.get("model name", ""), arch)
    return {"kind": f"{name} ({label})", "cpu": fields.get("model name", "unknown CPU"), "name": name,
            "vendor": vendor, "family": family, "model": model, "microarch": arch, "isa": level,
            "isa_label": label, "cores": os.cpu_count() or 1}


def _this_cpu():
    """(fields, flags) of this host's first CPU, from cpu_features'
    signature ("vendor|family|model|model name|flags"; empty off Linux)."""
    parts = cpu_features.host_cpu_signature().split("|")
    if len(parts) < 5:
        return {}, frozenset()
    fields = dict(zip(("vendor_id", "cpu family", "model"), parts[:3]), **{"model name": "|".join(parts[3:-1])})
    return fields, frozenset(parts[-1].split())


def isa_caps() -> str:
    """The ISA caps this process runs under, "" when none: the JIT's
    vector ISA below the host's ($TORCH_MLIR_FLEX_ISA, cpu_features), the
    runtime kernels' ISA set ($TORCH_MLIR_FLEX_RUNTIME_ISA, backend/blas)."""
    from torch_mlir_flex.backend.blas import RUNTIME_ISA_ENV

    caps = []
    try:
        if cpu_features.vector_isa() != cpu_features.host_vector_isa():
            caps.append(f"JIT ISA {cpu_features.vector_isa()}")
    except ValueError as e:  # a bad cap: the run fails on it anyway, say so here too
        caps.append(str(e))
    runtime = os.environ.get(RUNTIME_ISA_ENV, "").strip()
    if runtime:
        caps.append(f"runtime ISA {runtime}")
    return ", ".join(caps)


def describe(measure: bool = True, gemm_n: int = GEMM_N, reps: int = GEMM_REPS) -> dict:
    """This host: its CPU (see `cpu`), torch's threads and, with `measure`,
    its peaks measured now (a few seconds): f32_gflops, bf16_gflops (None
    without bf16 instructions), copy_gbs; and when (UTC)."""
    import torch

    desc = cpu(*_this_cpu())
    desc["caps"] = isa_caps()
    if desc["caps"]:  # not this kind's kernels: rows of their own
        desc["kind"] += f" [{desc['caps']}]"
    desc.update(torch_threads=torch.get_num_threads(), f32_gflops=None, bf16_gflops=None, copy_gbs=None,
                measured=time.strftime("%Y-%m-%d %H:%M", time.gmtime()), load=os.getloadavg()[0])
    if measure:
        desc["f32_gflops"] = matmul_peak_gflops(torch.float32, gemm_n, reps)
        if cpu_features.host_has_bf16_dot():
            desc["bf16_gflops"] = matmul_peak_gflops(torch.bfloat16, gemm_n, reps)
        desc["copy_gbs"] = copy_bandwidth_gbs()
    return desc


def kind(desc) -> str:
    """The host kind of a description (or of a row's "host" entry: an older
    row's host string is its own kind)."""
    if isinstance(desc, dict):
        return desc.get("kind") or UNKNOWN
    return desc or UNKNOWN


def _fmt(value, spec=".0f"):
    return "not measured" if value is None else format(value, spec)


def compact(desc) -> str:
    """Cores, the load average when the peaks were measured (a shared
    host's neighbours slow the run down too) and the measured peaks in a
    few words, as a headline row shows them."""
    if not isinstance(desc, dict):
        return kind(desc)
    gemm = f"f32 {_fmt(desc.get('f32_gflops'))}"
    if desc.get("bf16_gflops") is not None:
        gemm += f" / bf16 {_fmt(desc['bf16_gflops'])}"
    load = "" if desc.get("load") is None else f" (load {desc['load']:.1f})"
    return (f"{desc.get('cores', '?')} cores{load}, GEMM {gemm} GFLOP/s, "
            f"copy {_fmt(desc.get('copy_gbs'), '.1f')} GB/s")


def line(desc) -> str:
    """The line above each table: kind, CPU, cores and the run's peaks."""
    if not isinstance(desc, dict):
        return f"Host: {kind(desc)}."
    bf16 = ("no bf16 instructions" if desc.get("bf16_gflops") is None and desc.get("f32_gflops") is not None
            else f"bf16 GEMM {_fmt(desc.get('bf16_gflops'))} GFLOP/s")
    return (f"Host: {kind(desc)}: {desc.get('cpu', '?')}, {desc.get('vendor', '?')} family "
            f"{desc.get('family', '?')} model {desc.get('model', '?')}, ISA level {desc.get('isa', '?')}"
            f"{' (capped: ' + desc['caps'] + ')' if desc.get('caps') else ''}, {desc.get('cores', '?')} cores (torch threads {desc.get('torch_threads', '?')}); "
            f"measured in this run ({desc.get('measured', '?')} UTC, load average "
            f"{_fmt(desc.get('load'), '.1f')}): f32 GEMM "
            f"{_fmt(desc.get('f32_gflops'))} GFLOP/s, {bf16}, copy {_fmt(desc.get('copy_gbs'), '.1f')} GB/s.")


def main():
    """`python -m benchmarks.host`: this host's description line."""
    print(line(describe()))


if __name__ == "__main__":
    main()
