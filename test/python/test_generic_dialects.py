"""Operations of dialects our bindings have no Python classes for (linalg,
scf, ...) are looked up once per process, not once per operation
(torch_mlir_flex/_generic_dialects.py).

    PYTHONPATH=python pytest -q test/python/test_generic_dialects.py
"""

import sys

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
from torch_mlir_flex.mlir import ir

IR = """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tensor.empty() : tensor<4xf32>
  %1 = linalg.copy ins(%a : tensor<4xf32>) outs(%0 : tensor<4xf32>) -> tensor<4xf32>
  %2 = bufferization.alloc_tensor() : tensor<4xf32>
  %3 = linalg.copy ins(%1 : tensor<4xf32>) outs(%2 : tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""


class _Spy:
    """A meta-path finder that records the imports tried and finds nothing."""

    def __init__(self):
        self.names = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torch_mlir_flex."):
            self.names.append(fullname)
        return None


def _names(module):
    return [op.name for op in module.body.operations[0].regions[0].blocks[0].operations]


def test_dialects_without_classes_are_imported_once():
    spy = _Spy()
    sys.meta_path.insert(0, spy)
    try:
        with ir.Context() as ctx:
            m = ir.Module.parse(IR, ctx)
            assert _names(m) == ["tensor.empty", "linalg.copy", "bufferization.alloc_tensor", "linalg.copy",
                                 "func.return"]
            first = list(spy.names)
            for _ in range(3):
                _names(m)
    finally:
        sys.meta_path.remove(spy)
    assert spy.names == first  # nothing looked up again
    assert all(first.count(n) <= 1 for n in first)
    ops = list(m.body.operations[0].regions[0].blocks[0].operations)
    assert type(ops[1]).__name__ == "OpView"  # generic: no linalg classes
    assert type(ops[0]).__name__ == "EmptyOp"  # ours keep theirs


def test_the_real_dialect_package_stays_without_them():
    import importlib

    import pytest

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("torch_mlir_flex.mlir.dialects.linalg")
