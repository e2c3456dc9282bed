#!/usr/bin/env bash
# Packaging acceptance in clean venvs (slow: three full C++ builds, so not in
# CI). On a clean clone of this checkout's HEAD (the builds write into the
# source tree), in WORK (default: a new temporary directory):
#   1. venv-install: `pip install <clone>`, then the README usage snippet,
#      flex-opt and torch-mlir-flex from PATH;
#   2. `pip wheel <clone>`, installed into venv-wheel (a wheel install runs no
#      compiler; no xtc-*-dev package may come along), then the snippet and
#      a torch.compile(backend="torch_mlir_flex") smoke test;
#   3. venv-editable: `pip install -e <clone>`, then the snippet.
# Usage: bash build_tools/check_install.sh [WORK]   (STEPS="1 2 3" to choose)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${1:-$(mktemp -d)}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
PY="${PYTHON:-python3}"
STEPS="${STEPS:-1 2 3}"
SRC="$WORK/src"
[ -d "$SRC" ] || git clone -q "$ROOT" "$SRC"

# The README's usage snippet, then a check of its result against eager.
SNIPPET="$(awk '/^## Using it/{u=1} u&&/^```python/{p=1;next} p&&/^```/{exit} p' "$ROOT/README.md")
print('snippet: max abs error', (out - Attn()(q, k, v)).abs().max().item())
assert torch.allclose(out, Attn()(q, k, v), atol=1e-4)"

DYNAMO='import torch_mlir_flex, torch
from torch.nn.attention.flex_attention import flex_attention
f = lambda q, k, v: flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s * 0.5)
q = k = v = torch.randn(1, 2, 64, 16)
with torch.no_grad():
    out = torch.compile(f, backend="torch_mlir_flex", dynamic=False)(q, k, v)
assert torch_mlir_flex.dynamo.stats["compiled"] == 1, dict(torch_mlir_flex.dynamo.stats)
assert torch.allclose(out, f(q, k, v), atol=1e-4)
print("torch.compile backend: ok")'

venv() {  # venv NAME -> path of a new venv with only pip
  rm -rf "${WORK:?}/$1"
  "$PY" -m venv "$WORK/$1"
  echo "$WORK/$1"
}

smoke() {  # smoke VENV: the snippet and the console scripts, from /
  (cd / && "$1/bin/python" -c "$SNIPPET")
  "$1/bin/flex-opt" --version | grep -q "LLVM version 22.1.8"
  "$1/bin/torch-mlir-flex" --help > /dev/null
}

timed() {
  local start=$SECONDS
  "$@"
  echo "   ($(( SECONDS - start )) s)"
}

for step in $STEPS; do
  case "$step" in
    1)
      echo "== 1. pip install <repo>"
      V="$(venv venv-install)"
      timed "$V/bin/pip" install -q "$SRC"
      timed smoke "$V" ;;
    2)
      echo "== 2. pip wheel <repo>, installed into a second venv"
      B="$(venv venv-build)"
      timed "$B/bin/pip" wheel -q --no-deps -w "$WORK/dist" "$SRC"
      V="$(venv venv-wheel)"
      timed "$V/bin/pip" install -q "$WORK"/dist/torch_mlir_flex-*.whl
      if "$V/bin/pip" list 2>/dev/null | grep -E "^xtc-.*-dev "; then
        echo "error: the wheel pulled in an xtc-*-dev package" >&2; exit 1
      fi
      timed smoke "$V"
      (cd / && "$V/bin/python" -c "$DYNAMO") ;;
    3)
      echo "== 3. pip install -e <repo>"
      V="$(venv venv-editable)"
      timed "$V/bin/pip" install -q -e "$SRC"
      timed smoke "$V" ;;
  esac
done
echo "== packaging checks passed ($WORK)"
