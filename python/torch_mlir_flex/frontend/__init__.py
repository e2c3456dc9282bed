"""torch-mlir-flex frontend: Torch IR -> linalg-on-tensors with flex outlined."""

from .errors import FlexFrontendError
from .outline import FlexCallInfo, outline_flex_calls
from .pipeline import (
    lower_to_linalg_with_flex_outlined,
    lower_to_linalg_with_flex_outlined_module,
)

__all__ = [
    "FlexFrontendError",
    "FlexCallInfo",
    "outline_flex_calls",
    "lower_to_linalg_with_flex_outlined",
    "lower_to_linalg_with_flex_outlined_module",
]
