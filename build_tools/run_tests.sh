#!/usr/bin/env bash
# Sets up (if needed) and runs every test: the lit suite (dialect, passes,
# importer, frontend) and pytest (reference numerics, backend, e2e suite).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/build_tools/setup_venv.sh"
VENV="${FLEX_VENV:-$ROOT/.venv}"
# shellcheck disable=SC1091
source "$VENV/bin/activate"
BUILD="${FLEX_BUILD_DIR:-$ROOT/build}"
cd "$ROOT"

# CI (as root, Debian): qemu-user lets test/robustness/test_avx2_emulation.py
# run our code as on an AVX2-only CPU (build_tools/run_as_avx2.sh); without
# it that test skips. Best effort: a failed install changes nothing else.
if [ "${CI:-}" = "true" ] && ! command -v qemu-x86_64 >/dev/null 2>&1 \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing qemu-user (AVX2 emulation test)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user; } \
    >/dev/null 2>&1 || echo "note: qemu-user not installed; the AVX2 emulation test will skip"
fi

echo "== lit (setup and build took ${SECONDS} s)"
lit -v "$BUILD/test"

echo "== pytest (after ${SECONDS} s)"
start=$SECONDS
set +e
# Two pytest workers (pytest-xdist; the machine's two cores): compilation,
# single-threaded in LLVM, dominates the suite. FLEX_TEST_WORKERS=0 runs in
# one process. Compiled code is cached in a fresh directory per run, so no
# run reuses another's object files.
WORKERS="${FLEX_TEST_WORKERS:-2}"
if [ -z "${TORCH_MLIR_FLEX_CACHE_DIR:-}" ]; then
  TORCH_MLIR_FLEX_CACHE_DIR="$(mktemp -d)"
  trap 'rm -rf "$TORCH_MLIR_FLEX_CACHE_DIR"' EXIT
  export TORCH_MLIR_FLEX_CACHE_DIR
fi
# --durations: the slowest tests, to keep the suite within CI's time on a
# Zen 1 (about three times a Zen 4's or Zen 5's time); every test's time in
# $BUILD/pytest-times.xml (`python build_tools/test_times.py` sums it by file).
python -m pytest -q -p no:cacheprovider -n "$WORKERS" --durations=40 --durations-min=10 \
  --junitxml="$BUILD/pytest-times.xml" test/python projects/e2e projects/hf_e2e test/robustness
rc=$?
set -e
echo "== pytest took $((SECONDS - start)) s (all: ${SECONDS} s)"
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
