"""torch-mlir-flex: PyTorch flex_attention through torch-mlir, end to end.

Import this package before `torch_mlir` (see `_load_order`). Entry points:

- `export_and_import` / `FlexFxImporter`: a complete flex_attention import
  into Torch-dialect IR (importer/);
- `compile(model, example_args, backend=...)`: Torch IR -> linalg with flex
  outlined (frontend/) -> `flex.attention` -> loops or tiled code -> LLVM JIT
  (backend/);
- `hf.compile`, `hf.generator` (transformers models), `dynamo` (the
  `torch.compile` backend "torch_mlir_flex"): submodules imported on first
  use.
"""

from . import _load_order  # noqa: F401  (must stay first)


def __getattr__(name):
    # Lazy: importing torch/torch_mlir is slow and not needed for bindings.
    if name in ("export_and_import", "FlexFxImporter", "FlexImportError"):
        from . import importer

        return getattr(importer, name)
    if name in ("FlexBackendError", "FlexCompileError", "FlexRuntimeError", "FlexIndexError",
                "FlexMemoryError", "FlexRangeError"):
        from .backend import errors  # no torch import

        return getattr(errors, name)
    if name == "compile":
        from . import backend

        return getattr(backend, name)
    if name in ("hf", "dynamo", "log", "backend", "frontend", "importer"):
        # `torch_mlir_flex.hf.compile(...)` after `import torch_mlir_flex`.
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'torch_mlir_flex' has no attribute {name!r}")
