"""The project on an AVX2-only CPU, on any x86-64 host: avx2_smoke.py run
under build_tools/run_as_avx2.sh (qemu-user's Haswell: AVX2 + FMA, no
AVX-512, no AVX512-BF16, no AMX) compiles flex attention and one-row
Linears and runs them without an illegal instruction, with eager's
results, on the AVX2 paths: torch's AVX2 kernels, the 256-bit pipelines
without bf16-dot or AMX, the runtime's AVX2 few-row kernels.

Skipped where qemu-x86_64 is not installed (Debian/Ubuntu: apt-get install
qemu-user; the script installs it itself when run by hand) or is older than
7.2 (no AVX2 in its TCG: Ubuntu 22.04's 6.2). About a minute
on an idle Zen 4 core: the emulator runs code 10-50x slower.
"""

import json
import os
import platform
import re
import shutil
import signal
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "build_tools", "run_as_avx2.sh")
SMOKE = os.path.join(ROOT, "test", "robustness", "avx2_smoke.py")


def _run_smoke(tmp_path):
    env = dict(os.environ, TORCH_MLIR_FLEX_CACHE_DIR=str(tmp_path / "cache"))
    for name in ("TORCH_MLIR_FLEX_ISA", "TORCH_MLIR_FLEX_RUNTIME_ISA", "TORCH_MLIR_FLEX_BF16_DOT",
                 "TORCH_MLIR_FLEX_AMX", "FLEX_BF16_GEMM", "FLEX_F32_GEMM", "FLEX_GEMV"):
        env.pop(name, None)
    (tmp_path / "cache").mkdir(mode=0o700)
    return subprocess.run(["bash", SCRIPT, "--python", SMOKE], env=env, capture_output=True, text=True,
                          timeout=900)


def _qemu_version():
    """qemu-x86_64's (major, minor), or None when it is not installed."""
    if shutil.which("qemu-x86_64") is None:
        return None
    out = subprocess.run(["qemu-x86_64", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


QEMU = _qemu_version()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="emulates an x86-64 CPU on an x86-64 host")
@pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 not installed (apt-get install qemu-user)")
@pytest.mark.skipif(QEMU is not None and QEMU < (7, 2),
                    reason=f"qemu-x86_64 {QEMU} emulates no AVX2 (qemu 7.2 or later needed)")
def test_avx2_only_cpu_runs_attention_and_decode_products(tmp_path):
    proc = _run_smoke(tmp_path)
    assert proc.returncode != 128 + signal.SIGILL and proc.returncode != -signal.SIGILL, \
        "illegal instruction on an AVX2-only CPU:\n" + proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("AVX2_SMOKE ")][-1]
    seen = json.loads(line.split(" ", 1)[1])
    # The process saw an AVX2 CPU through CPUID (torch) and /proc/cpuinfo
    # (cpu_features.py), so the pipelines chose no AVX-512 code.
    assert seen["torch_cpu_capability"] == "AVX2"
    assert seen["host_vector_isa"] == "avx2"
    assert not seen["bf16_dot_default"] and not seen["amx_default"]
    # The runtime's dispatch (__builtin_cpu_supports): AVX2 kernels, and
    # both one-row products ran on them.
    assert seen["runtime_isas"] == ["generic", "avx2"]
    assert seen["gemv_kernel"] == {"f32": "avx2", "bf16": "avx2"}
    assert seen["gemv_products"].get("avx2") == 2 and seen["gemv_products"].get("generic") == 0
    err = seen["attention_error"]
    assert err["f32"] < 1e-5 and err["bf16"] < 2e-2, err
    err = seen["linear_error"]
    assert err["f32"] < 1e-6 and err["bf16"] < 1e-2, err
