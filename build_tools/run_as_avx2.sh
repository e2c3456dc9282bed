#!/usr/bin/env bash
# Runs pytest (or any Python command) of this project as on an AVX2-only
# CPU, for developers without one: the venv's Python under qemu-user's
# emulation of an Intel Haswell (AVX2 + FMA, no AVX-512, no AVX512-BF16,
# no AMX). CI runs only a small smoke program under it
# (test/robustness/test_avx2_emulation.py): the emulator runs code 10-50x
# slower than the host (about 15 s just to import torch).
#
#   build_tools/run_as_avx2.sh test/python/backend/test_dense_matmul.py -k small
#   build_tools/run_as_avx2.sh --python examples/hf_tiny_llama.py
#
# Without --python the arguments go to `python -m pytest -q -p no:cacheprovider`
# (add `-n 2` for two emulated workers). Environment:
#   FLEX_VENV          the venv (default: .venv of the repository)
#   FLEX_QEMU_CPU      qemu's CPU model (default Haswell-v4; `qemu-x86_64 -cpu help`)
#   FLEX_QEMU          the emulator binary (default qemu-x86_64 on PATH)
# qemu-user is installed with apt-get (as root or with sudo) when missing.
#
# What the emulated process sees (docs/robustness.md, "Running as on an
# AVX2-only CPU"):
#   - CPUID is the emulated CPU's: torch's dispatch, LLVM's host CPU (the
#     JIT compiles for `haswell`) and the runtime's __builtin_cpu_supports
#     see AVX2 only; an AVX-512 instruction raises SIGILL.
#   - qemu-user passes the host's /proc/cpuinfo through, AVX-512 flags and
#     all, which cpu_features.py reads. So the guest gets its own copy
#     (qemu's -L prefix: a path that exists under the prefix is opened
#     there first) with the flags of vector extensions newer than AVX2
#     removed and "(qemu <cpu>)" added to the model name, which keeps the
#     compile cache's entries apart from the host's.
#   - A child process started with sys.executable (pytest-xdist workers,
#     the codegen child of large modules, CLI tests) would run natively,
#     on the host's ISA. sys.executable is set (sitecustomize.py on
#     PYTHONPATH) to a wrapper that starts the venv's Python under the
#     same emulation; other programs (cc, flex-opt, objdump) run natively,
#     which is right for tools whose output does not depend on the CPU;
#     Inductor's C++ compiler, which would use -march=native, is given the
#     emulated CPU's architecture (TORCHINDUCTOR_CPP_MARCH).
#   - The compile cache and Inductor's are fresh directories per run
#     unless TORCH_MLIR_FLEX_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR are set.
#   - System features qemu's TCG lacks (pcid, x2apic...) are switched off
#     in the CPU model: qemu would warn about them on every start, into
#     the stderr of children that tests read.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FLEX_VENV:-$ROOT/.venv}"
MODEL="${FLEX_QEMU_CPU:-Haswell-v4}"
CPU="$MODEL" # the model and the features switched off (below)
QEMU="${FLEX_QEMU:-qemu-x86_64}"

if [ "$(uname -m)" != "x86_64" ]; then
  echo "error: run_as_avx2.sh emulates an x86-64 CPU on an x86-64 host; this is $(uname -m)" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "error: no venv at $VENV: run build_tools/setup_venv.sh first (or set FLEX_VENV)" >&2
  exit 2
fi
if ! command -v "$QEMU" >/dev/null 2>&1; then
  echo "== installing qemu-user (apt-get)" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: $QEMU not found and no apt-get: install qemu-user (it provides qemu-x86_64)" >&2
    exit 2
  fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq qemu-user >/dev/null
fi
QEMU="$(command -v "$QEMU")"
CPUS="$("$QEMU" -cpu help || true)"  # (it exits 1 after listing them)
if ! grep "^x86 *$MODEL " >/dev/null <<<"$CPUS"; then
  echo "error: $QEMU has no CPU model $MODEL (see: $QEMU -cpu help)" >&2
  exit 2
fi
# qemu's TCG emulates AVX, AVX2 and FMA from qemu 7.2 on; older ones warn
# that it lacks them and the guest runs SSE code only. The other features
# it warns about (qemu 7.2 on Haswell: pcid, x2apic, tsc-deadline, invpcid,
# spec-ctrl) are the kernel's, not a program's: they are switched off in
# the CPU model, which silences the warnings (a child's stderr is read by
# some tests).
LACKING="$("$QEMU" -cpu "$CPU" /bin/true 2>&1 \
  | sed -n -E "s/.*TCG doesn't support requested feature: CPUID\.[0-9A-Fa-f]+H:[A-Z]+\.([a-z0-9_.-]+) .*/\1/p" \
  | sort -u)"
for f in $LACKING; do
  case "$f" in
  avx | avx2 | fma | f16c | bmi1 | bmi2 | movbe)
    echo "error: $("$QEMU" --version | head -1) does not emulate $f of $MODEL: qemu 7.2 or later needed" >&2
    exit 2
    ;;
  esac
  CPU="$CPU,-$f"
done
ulimit -c 0 # qemu writes a core file of a guest killed by a signal otherwise

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ -z "${TORCH_MLIR_FLEX_CACHE_DIR:-}" ]; then
  mkdir -m 700 "$WORK/cache"
  export TORCH_MLIR_FLEX_CACHE_DIR="$WORK/cache"
fi
# Inductor's too (torch.compile: transformers' create_block_mask): its
# cache in /tmp, shared with the host's runs, handed the emulated process
# kernels compiled for the host's AVX-512 (SIGILL in test_whole_model).
if [ -z "${TORCHINDUCTOR_CACHE_DIR:-}" ]; then
  export TORCHINDUCTOR_CACHE_DIR="$WORK/inductor"
fi
# Inductor compiles its C++ kernels with `-march=native`, and the compiler
# runs natively: name the emulated CPU's architecture instead.
if [ -z "${TORCHINDUCTOR_CPP_MARCH:-}" ]; then
  case "$MODEL" in
  Haswell*) TORCHINDUCTOR_CPP_MARCH=haswell ;;
  Broadwell*) TORCHINDUCTOR_CPP_MARCH=broadwell ;;
  Skylake-Client*) TORCHINDUCTOR_CPP_MARCH=skylake ;;
  *) TORCHINDUCTOR_CPP_MARCH=x86-64-v3 ;;
  esac
  export TORCHINDUCTOR_CPP_MARCH
fi

# The guest's /proc/cpuinfo: the host's without vector extensions newer than
# AVX2 (what cpu_features.py asks about: AVX-512 in all its parts, AMX,
# AVX-VNNI and the other VEX extensions of later cores, AVX10).
mkdir -p "$WORK/guest/proc"
sed -E \
  -e '/^flags/ s/ (avx512[a-z0-9_]*|amx[a-z0-9_]*|avx_vnni[a-z0-9_]*|avx_ne_convert|avx_ifma|avx10[a-z0-9_.]*|vaes|vpclmulqdq|gfni)\b//g' \
  -e "/^model name/ s/\$/ (qemu $MODEL)/" \
  /proc/cpuinfo >"$WORK/guest/proc/cpuinfo"

# sys.executable for children: the venv's Python under the same emulation.
mkdir -p "$WORK/bin" "$WORK/site"
cat >"$WORK/bin/python" <<EOF
#!/bin/sh
exec "$QEMU" -cpu "$CPU" -L "$WORK/guest" "$VENV/bin/python" "\$@"
EOF
chmod +x "$WORK/bin/python"
cat >"$WORK/site/sitecustomize.py" <<'EOF'
# Written by build_tools/run_as_avx2.sh: children started with
# sys.executable run under the same CPU emulation as this process.
import os
import sys

sys.executable = os.environ.get("FLEX_AVX2_PYTHON", sys.executable)
EOF
export FLEX_AVX2_PYTHON="$WORK/bin/python"
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$VENV/bin:$PATH"  # tools found next to the venv's Python
export VIRTUAL_ENV="$VENV"

cd "$ROOT"
echo "== as on an AVX2-only CPU: qemu-user $("$QEMU" --version | head -1 | awk '{print $3}') -cpu $CPU" >&2
if [ "${1:-}" = "--python" ]; then
  shift
  "$WORK/bin/python" "$@"
else
  "$WORK/bin/python" -m pytest -q -p no:cacheprovider "$@"
fi
