# Our MLIR/LLVM must load before torch-mlir's (see torch_mlir_flex._load_order).
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import torch_mlir_flex  # noqa: F401  (first)
except ImportError:  # not pip-installed: use the source tree (bindings built in place)
    sys.path.insert(0, os.path.join(_ROOT, "python"))
    import torch_mlir_flex  # noqa: F401

# `test.robustness.*` imports (helpers, fuzz, differential) from the repo root.
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
