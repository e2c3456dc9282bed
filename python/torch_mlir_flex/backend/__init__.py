"""Our linalg-on-tensors backend: lowering pipelines, a JIT runner and
`compile` (model -> callable, see compile.py)."""

from .jit import FlexBackendError, JitFunction
from .pipelines import PIPELINES, get_pipeline
from .compile import CompiledModule, FlexCompileError, compile, compile_mlir

__all__ = [
    "FlexBackendError",
    "JitFunction",
    "PIPELINES",
    "get_pipeline",
    "CompiledModule",
    "FlexCompileError",
    "compile",
    "compile_mlir",
]
