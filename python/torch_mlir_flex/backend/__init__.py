"""Our linalg-on-tensors backend: lowering pipelines, a JIT runner and
`compile` (model -> callable, see compile.py)."""

from .errors import (FlexBackendError, FlexCompileError, FlexIndexError, FlexMemoryError,
                     FlexRangeError, FlexRuntimeError)
from .jit import JitFunction
from .pipelines import PIPELINES, get_pipeline
from .compile import CompiledModule, compile, compile_mlir

__all__ = [
    "FlexBackendError",
    "FlexCompileError",
    "FlexRuntimeError",
    "FlexIndexError",
    "FlexMemoryError",
    "FlexRangeError",
    "JitFunction",
    "PIPELINES",
    "get_pipeline",
    "CompiledModule",
    "compile",
    "compile_mlir",
]
