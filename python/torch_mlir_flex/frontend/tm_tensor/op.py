"""Generic view of a tm_tensor op (the wheel has no Python classes for the
TMTensor dialect): its ``ins``/``outs`` operand groups, attributes, region
and the aten op it came from."""

from typing import List

from torch_mlir import ir

from ..errors import FlexFrontendError


class TmOp:
    def __init__(self, op, origin: str):
        self.op = op.operation if hasattr(op, "operation") else op
        self.name = self.op.name
        self.origin = origin
        operands = list(self.op.operands)
        n_in, n_out = self._segments(len(operands))
        self.ins: List[ir.Value] = operands[:n_in]
        self.outs: List[ir.Value] = operands[n_in:n_in + n_out]
        self.region = self.op.regions[0]
        self.location = self.op.location

    def _segments(self, n: int):
        attrs = self.op.attributes
        if "operandSegmentSizes" in attrs:
            sizes = list(ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"]))
            return sizes[0], sizes[1]
        return 0, n

    def attr(self, name: str):
        if name not in self.op.attributes:
            raise self.error(f"has no '{name}' attribute")
        return self.op.attributes[name]

    def int_attr(self, name: str) -> int:
        return ir.IntegerAttr(self.attr(name)).value

    def bool_attr(self, name: str) -> bool:
        return bool(ir.BoolAttr(self.attr(name)).value)

    def i64_array_attr(self, name: str) -> List[int]:
        return list(ir.DenseI64ArrayAttr(self.attr(name)))

    def error(self, what: str) -> FlexFrontendError:
        return FlexFrontendError(f"op '{self.name}' (from {self.origin}) {what}")
