#!/usr/bin/env bash
# The main job: set up, then compile and run the example transformer block
# with flex attention and a tiny Hugging Face Llama (flex_attention), and
# check them against eager PyTorch / HF eager attention.
# Arguments (e.g. --backend reference) go to both examples.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/build_tools/setup_venv.sh"
VENV="${FLEX_VENV:-$ROOT/.venv}"
"$VENV/bin/python" "$ROOT/examples/transformer_block.py" "$@"
"$VENV/bin/python" "$ROOT/examples/hf_tiny_llama.py" "$@"
