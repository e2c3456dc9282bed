"""The BLAS behind `flex-matmul-to-blas` (docs/dense-ops.md).

Compiled modules call `flex_gemm_f32` / `flex_gemm_bf16` of our runtime
library (`_bin/libflex_runtime.so`, lib/Runtime/FlexGemm.c), which runs each
product on a BLAS found here at run time, as the OpenMP runtime is:

- `$FLEX_BLAS_LIB`: a shared library exporting the Fortran `sgemm` and
  `cblas_gemm_bf16bf16f32` (LP64), e.g. a oneMKL `libmkl_rt.so`;
- else the oneMKL that the pinned torch wheel links into `libtorch_cpu.so`
  and exports: the very GEMM `torch.matmul` runs on this CPU, so the dense
  ops of a compiled model run at torch's GEMM speed.

`runtime_library()` is what the JIT loads (`JitFunction._shared_libs`);
loading it through here hands the BLAS functions over once per process.
"""

import ctypes
import os

from .errors import FlexBackendError

# The runtime functions that flex-matmul-to-blas emits calls of.
GEMM_FUNCTIONS = ("flex_gemm_f32", "flex_gemm_bf16")
BLAS_ENV = "FLEX_BLAS_LIB"

_runtime = None


def runtime_library_path() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_bin",
                        "libflex_runtime.so")


def blas_library_path() -> str:
    env = os.environ.get(BLAS_ENV)
    if env:
        return env
    import torch

    return os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")


def _function_address(lib, name: str, path: str) -> int:
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        raise FlexBackendError(f"the BLAS library {path} has no function {name!r} "
                               f"(set {BLAS_ENV} to a library with sgemm and "
                               "cblas_gemm_bf16bf16f32)") from None


def runtime_library() -> str:
    """Path of the runtime library, loaded (global, for the JIT's symbol
    lookup) with its BLAS functions set; FlexBackendError if either is
    missing."""
    global _runtime
    path = runtime_library_path()
    if _runtime is None:
        if not os.path.exists(path):
            raise FlexBackendError(f"the runtime library {path} is missing (rebuild the package)")
        blas_path = blas_library_path()
        try:
            blas = ctypes.CDLL(blas_path)
        except OSError as e:
            raise FlexBackendError(f"cannot load the BLAS library {blas_path}: {e}") from None
        sgemm = _function_address(blas, "sgemm", blas_path)
        bf16 = _function_address(blas, "cblas_gemm_bf16bf16f32", blas_path)
        rt = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        rt.flex_runtime_set_blas.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        rt.flex_runtime_set_blas(sgemm, bf16)
        _runtime = rt
    return path


def calls_gemm(module) -> bool:
    """Whether the lowered `module` (LLVM dialect) declares a runtime GEMM."""
    for op in module.body.operations:
        if op.operation.name in ("llvm.func", "func.func"):
            name = str(op.attributes["sym_name"]).strip('"')
            if name in GEMM_FUNCTIONS:
                return True
    return False
