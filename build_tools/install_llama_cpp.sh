#!/usr/bin/env bash
# Installs llama.cpp as the optional peer of the quantized serving
# benchmark (`python -m benchmarks.serve --quant`, benchmarks/llama_cpp_peer.py)
# into a venv: llama-cpp-python built from its sdist for THIS CPU
# (GGML_NATIVE=ON: build it on the host that benchmarks; a wheel built on
# another CPU would be reused silently from pip's cache, hence
# --no-cache-dir), the gguf and sentencepiece packages its converter
# needs, and llama.cpp's own converter (convert_hf_to_gguf.py and its
# gguf-py, from the same sdist) under <venv>/share/llama.cpp, where
# llama_cpp_peer.py looks for it. Never run by CI or the tests.
#
#   build_tools/install_llama_cpp.sh [VENV]          # default: .venv of the repository
#
# The build compiles llama.cpp with CMake: about 30 minutes on two busy
# cores. Environment:
#   FLEX_NICE=1      build under `nice -n 19` (a shared host)
#   CMAKE_ARGS       replaces -DGGML_NATIVE=ON
set -euo pipefail

LLAMA_CPP_PYTHON=0.3.36
GGUF=0.19.0
SENTENCEPIECE=0.2.3

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
    echo "install_llama_cpp.sh: no python in venv '$VENV'" >&2
    exit 2
fi
NICE=()
if [ "${FLEX_NICE:-0}" = 1 ]; then
    NICE=(nice -n 19)
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== gguf $GGUF, sentencepiece $SENTENCEPIECE"
"$PY" -m pip install --quiet "gguf==$GGUF" "sentencepiece==$SENTENCEPIECE"

echo "== llama-cpp-python $LLAMA_CPP_PYTHON: the sdist"
"${NICE[@]}" "$PY" -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$WORK"
SDIST="$(ls "$WORK"/llama_cpp_python-*.tar.gz)"

echo "== llama.cpp's converter -> $VENV/share/llama.cpp"
mkdir -p "$WORK/src"
tar -xzf "$SDIST" -C "$WORK/src"
VENDOR="$(ls -d "$WORK"/src/*/vendor/llama.cpp)"
DEST="$VENV/share/llama.cpp"
rm -rf "$DEST"
mkdir -p "$DEST"
cp "$VENDOR"/convert_hf_to_gguf*.py "$DEST"/
cp -r "$VENDOR/gguf-py" "$DEST"/
# Python packages beside the converter that it imports (newer llama.cpp
# splits the converter's model classes into a package).
for d in "$VENDOR"/*/; do
    if [ -f "$d/__init__.py" ]; then
        cp -r "$d" "$DEST"/
    fi
done

echo "== llama-cpp-python $LLAMA_CPP_PYTHON: building llama.cpp for this CPU (${CMAKE_ARGS:--DGGML_NATIVE=ON})"
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" "${NICE[@]}" "$PY" -m pip install --no-cache-dir "$SDIST"

"$PY" - <<'EOF'
import llama_cpp
info = llama_cpp.llama_print_system_info()
print("llama_cpp", llama_cpp.__version__, "built for:", (info.decode() if isinstance(info, bytes) else info).strip())
EOF
