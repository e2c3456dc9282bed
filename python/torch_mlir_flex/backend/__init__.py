"""Our linalg-on-tensors backend: lowering pipelines and a JIT runner."""

from .jit import FlexBackendError, JitFunction
from .pipelines import PIPELINES, get_pipeline

__all__ = ["FlexBackendError", "JitFunction", "PIPELINES", "get_pipeline"]
