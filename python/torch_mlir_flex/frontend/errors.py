"""Errors raised by the torch-mlir-flex frontend."""


class FlexFrontendError(Exception):
    """Raised when a model cannot be lowered to linalg-on-tensors with flex
    attention outlined (unsupported op, malformed flex call, failed pass)."""
