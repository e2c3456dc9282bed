"""`after_import(name, callback)`: run `callback(module)` on a module of
transformers (or any package) now if it is loaded, else right after its
first import executes it. The Dynamo integration patches transformers'
functions for our backend's frames; a user may import transformers before
or after `torch_mlir_flex.dynamo`, and both orders must see the patch."""

import importlib.abc
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """A one-shot finder: wraps the module's loader so `callback` runs after
    the module's code, then leaves `sys.meta_path`."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        execute = getattr(spec.loader, "exec_module", None)
        if execute is None:
            return spec
        callback = self.callback

        def exec_module(module):
            execute(module)
            callback(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, callback) -> None:
    """`callback(module)` now, or once `name` is imported (idempotent per
    name: one pending hook at a time)."""
    if name in sys.modules:
        callback(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))
