"""The last entry of MLIR's dialect search path: an empty module for any
dialect our bindings ship no Python classes for (linalg, scf, llvm, ...).

When Python code iterates operations (`block.operations`), the bindings look
for the op's class by importing `<prefix>.<dialect namespace>` for each
search prefix, and remember only the imports that succeed: a dialect with no
module is searched again for every operation (a warm training step spent a
few hundred milliseconds in 5,000 failed imports of
`torch_mlir_flex.mlir.dialects.linalg`). Found here instead, each namespace
is imported once and its operations keep the generic OpView.
`torch_mlir_flex.mlir.dialects.linalg` itself stays unknown to `import`.
"""

import importlib.abc
import importlib.machinery
import sys

__path__ = []  # a package: the finder below provides its submodules


class _EmptyDialectModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent != __name__ or not name.isidentifier():
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module):
        module.__doc__ = "No Python classes for this dialect: its operations are generic OpViews."


def install():
    """Appends this package to the search path of our MLIR bindings (idempotent)."""
    from .mlir._mlir_libs import _mlir

    if not any(isinstance(f, _EmptyDialectModules) for f in sys.meta_path):
        sys.meta_path.append(_EmptyDialectModules())
    if __name__ not in _mlir.globals.dialect_search_modules:
        _mlir.globals.append_dialect_search_prefix(__name__)
