#!/usr/bin/env bash
# The main job: set up, then compile and run the example transformer block
# with flex attention and check it against eager PyTorch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/build_tools/setup_venv.sh"
VENV="${FLEX_VENV:-$ROOT/.venv}"
exec "$VENV/bin/python" "$ROOT/examples/transformer_block.py" "$@"
