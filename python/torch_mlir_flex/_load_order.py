"""Loads our MLIR/LLVM before torch-mlir's, and remembers whether it could.

torch-mlir's wheel and our MLIR 22.1.8 bindings each carry a copy of LLVM.
A few LLVM tables are C++ inline variables, which GCC exports as
process-unique (STB_GNU_UNIQUE) symbols: whichever copy is loaded first
provides them for both. One of them is the table of runtime-library call
names used by code generation, so when torch-mlir's LLVM is loaded first our
JIT emits calls to wrong symbols (seen: `pl_vtgammaq_f32` for `expf`).
torch-mlir itself only parses, transforms and prints IR, which works with
either order (tested by the importer and frontend suites). So the package
loads our copy first and the backend refuses to JIT when it came second.
"""

import sys


def _torch_mlir_llvm_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return "libTorchMLIRAggregateCAPI" in f.read()
    except OSError:  # not Linux: trust the import order
        return "torch_mlir._mlir_libs._mlir" in sys.modules


LOADED_FIRST = not _torch_mlir_llvm_loaded()

from ._native import preload_llvm  # noqa: E402

preload_llvm()
from .mlir import ir as _ir  # noqa: E402,F401  (loads our LLVM now)
from . import _generic_dialects  # noqa: E402

_generic_dialects.install()

LOAD_ORDER_MESSAGE = (
    "torch_mlir was imported before torch_mlir_flex, so its copy of LLVM "
    "provides process-unique tables that our JIT relies on; compiled code "
    "would call wrong runtime functions. Import torch_mlir_flex before "
    "torch_mlir (or any module that imports it) in this process."
)


def load_torch_mlir_before_jit():
    """Imports torch-mlir (when installed) before the first JIT compilation.

    Importing torch-mlir's libraries after one of our JIT compilations
    aborted the process ("CommandLine Error: Option 'print-inst-addrs'
    registered more than once", an LLVM fatal error) -- e.g.
    `compile_mlir(...)` then `torch_mlir_flex.compile(model, ...)`, whose
    importer loads torch-mlir. Loaded before the JIT (after our LLVM, as
    above), both work in either order of later calls. Idempotent; costs
    nothing once torch-mlir is loaded."""
    if "torch_mlir._mlir_libs._mlir" in sys.modules:
        return
    try:
        import torch_mlir.ir  # noqa: F401
    except ImportError:  # the JIT alone needs no torch-mlir
        pass
