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

echo "== lit"
lit -v "$BUILD/test"

echo "== pytest"
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
python -m pytest -q -p no:cacheprovider -n "$WORKERS" \
  test/python projects/e2e projects/hf_e2e test/robustness
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
