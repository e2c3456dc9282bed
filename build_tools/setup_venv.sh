#!/usr/bin/env bash
# Sets up a fresh machine: a virtual environment with every pinned package,
# then builds the C++ and installs torch_mlir_flex (editable) into it through
# pyproject.toml's PEP 517 build (setup.py runs CMake + Ninja).
#   FLEX_VENV       where the venv goes (default: .venv in the repo)
#   FLEX_BUILD_DIR  the CMake build directory (default: build in the repo),
#                   reused by later runs and by `ninja -C build`
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FLEX_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
echo "== installing pinned requirements"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -r "$ROOT/requirements.txt"
python "$ROOT/build_tools/check_versions.py"
# transformers without dependency resolution (see requirements-hf.txt)
python -m pip install --quiet -r "$ROOT/requirements-hf.txt"
python -m pip install --quiet --no-deps transformers==5.25.0
# transformers serve and the openai client (docs/serving.md)
python -m pip install --quiet -r "$ROOT/requirements-serve.txt"
# peft for LoRA fine-tuning, every dependency pinned (see requirements-train.txt)
python -m pip install --quiet --no-deps -r "$ROOT/requirements-train.txt"
echo "== building C++ and installing torch_mlir_flex"
# The venv already holds pyproject.toml's build requirements (requirements.txt
# pins the same versions; pip checks them), so the build runs in it and the
# build directory stays valid for incremental rebuilds.
python -m pip install --quiet --no-build-isolation --check-build-dependencies -e "$ROOT"
echo "== ready: source $VENV/bin/activate"
