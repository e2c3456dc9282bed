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
python -m pytest -q -p no:cacheprovider test/python projects/e2e projects/hf_e2e test/robustness
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
