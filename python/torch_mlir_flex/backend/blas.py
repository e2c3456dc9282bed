"""The BLAS behind `flex-matmul-to-blas` (docs/dense-ops.md).

Compiled modules call `flex_gemm_f32` / `flex_gemm_bf16` of our runtime
library (`_bin/libflex_runtime.so`, lib/Runtime/FlexGemm.c), which runs each
product on a BLAS found here at run time, as the OpenMP runtime is:

- `$FLEX_BLAS_LIB`: a shared library exporting the Fortran `sgemm` and
  `cblas_gemm_bf16bf16f32` (LP64), e.g. a oneMKL `libmkl_rt.so`;
- else the oneMKL that the pinned torch wheel links into `libtorch_cpu.so`
  and exports: the very GEMM `torch.matmul` runs on this CPU, so the dense
  ops of a compiled model run at torch's GEMM speed.

bf16 products run on oneDNN's matmul primitive instead where the host has
bf16 dot-product instructions (`avx512_bf16` or `amx_bf16`): there MKL's
bf16 GEMM reaches 0.4-0.5 of oneDNN's rate.
oneDNN is the pinned `onednn-cpu-gomp` wheel (its C API only, found through
the wheel's file list); `$FLEX_BF16_GEMM` = `onednn` / `blas` forces the
choice. `bf16_gemm_library()` says which one this process uses.

f32 products run on oneDNN too where the host has AVX-512 (AVX512F, BW,
VL, DQ: oneDNN's `avx512_core` kernels, AMX hosts included) and the runtime
ISA is not capped below it: torch's MKL picks its AVX2 kernel on AMD hosts
(1.8-2.9x slower there on the models' shapes, docs/dense-ops.md). AVX2-only
hosts keep MKL's `sgemm`. `$FLEX_F32_GEMM` = `onednn` / `blas` forces the
choice; `f32_gemm_library()` says which one this process uses.

Products of up to four rows by a weight with contiguous rows (decode) run
on the runtime's own kernels instead (lib/Runtime/Gemv/), f32 and bf16, on
every CPU: one kernel file per ISA, chosen from the CPU's features.
`$TORCH_MLIR_FLEX_RUNTIME_ISA` (`generic`, `avx2`, `avx512`) or
`set_runtime_isa()` caps them at a lower ISA (for tests and comparisons);
`runtime_isa()` says which one is in effect, `gemv_products()` counts the
products by ISA and dtype. Products by quantized weights (flex.quant_matmul,
lib/Runtime/Quant/) run on the same ISA switch: `quant_kernel()`,
`quant_products()`. Int4 products of 8 rows or more (prefill) take int8
activations and integer dot products where `$TORCH_MLIR_FLEX_QUANT_ACTIVATIONS`
is `int8` or after `set_quant_activations("int8")` (default `f32`: weight-only
numerics; docs/quantization.md): `quant_activations()`,
`quant_int8_activation_products()`.

`runtime_library()` is what the JIT loads (`JitFunction._shared_libs`);
loading it through here hands the BLAS functions over once per process.
"""

import ctypes
import os

from .cpu_features import ISA_ENV, host_has_bf16_dot
from .errors import FlexBackendError

# The runtime functions that flex-matmul-to-blas emits calls of, and the
# heap functions of finalize-memref-to-llvm's use-generic-functions
# (lib/Runtime/FlexAlloc.c: large blocks kept between calls).
GEMM_FUNCTIONS = ("flex_gemm_f32", "flex_gemm_bf16")
# The calls of flex-quant-matmul-to-calls (lib/Runtime/Quant/), and the
# counter index of each flex.quant_matmul format.
QUANT_FUNCTIONS = ("flex_quant_matmul_i8", "flex_quant_matmul_i4")
QUANT_FORMATS = {"int8": 0, "int4_cpu": 1}
# The call of flex-int-matmul-to-calls (lib/Runtime/Quant/FlexQuantInt8Gemm.c).
INT8_GEMM_FUNCTIONS = ("flex_gemm_u8s8",)
ALLOC_FUNCTIONS = ("_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_aligned_alloc",
                   "_mlir_memref_to_llvm_free")
BLAS_ENV = "FLEX_BLAS_LIB"
BF16_ENV = "FLEX_BF16_GEMM"
F32_ENV = "FLEX_F32_GEMM"
# The CPU flags of oneDNN's AVX-512 f32 matmul kernels (its avx512_core).
AVX512_CORE_FLAGS = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})
RUNTIME_ISA_ENV = "TORCH_MLIR_FLEX_RUNTIME_ISA"
QUANT_ACTIVATIONS_ENV = "TORCH_MLIR_FLEX_QUANT_ACTIVATIONS"
QUANT_ACTIVATIONS = ("f32", "int8")
DNNL_DIST = "onednn-cpu-gomp"
# oneDNN's C API functions that lib/Runtime/FlexDnnl.c calls, in its order.
DNNL_FUNCTIONS = (
    "dnnl_engine_create", "dnnl_stream_create", "dnnl_memory_desc_create_with_strides",
    "dnnl_memory_desc_destroy", "dnnl_primitive_attr_create", "dnnl_primitive_attr_destroy",
    "dnnl_post_ops_create", "dnnl_post_ops_destroy", "dnnl_post_ops_append_sum",
    "dnnl_primitive_attr_set_post_ops", "dnnl_matmul_primitive_desc_create",
    "dnnl_primitive_desc_query", "dnnl_primitive_desc_destroy", "dnnl_primitive_create",
    "dnnl_memory_create", "dnnl_memory_destroy", "dnnl_primitive_execute", "dnnl_stream_wait")

_runtime = None
_bf16_library = None
_f32_library = None
_dnnl_handed = None  # None: not tried; else (handed over?, why not)


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


def dnnl_library_path():
    """libdnnl.so.3 of the installed `onednn-cpu-gomp` wheel, or None."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DNNL_DIST)
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == "libdnnl.so.3":
            path = str(f.locate())
            return path if os.path.exists(path) else None
    return None


def _hand_over_dnnl():
    """Gives the runtime oneDNN's functions once per process; returns
    (handed over?, why not)."""
    global _dnnl_handed
    if _dnnl_handed is None:
        path = dnnl_library_path()
        try:
            if path is None:
                raise OSError(f"the {DNNL_DIST} wheel is not installed")
            lib = ctypes.CDLL(path)
            fns = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in DNNL_FUNCTIONS]
        except (OSError, AttributeError) as e:
            _dnnl_handed = (False, str(e))
        else:
            table = (ctypes.c_void_p * len(fns))(*fns)
            _runtime.flex_runtime_set_dnnl.argtypes = [ctypes.c_void_p, ctypes.c_int]
            ok = bool(_runtime.flex_runtime_set_dnnl(table, len(fns)))
            _dnnl_handed = (ok, "" if ok else "its CPU engine could not be created")
    return _dnnl_handed


def _choose(env: str, default_onednn) -> str:
    """'onednn' or 'blas' for the products whose choice `$env` forces;
    `default_onednn()` decides without it. oneDNN is handed over when
    chosen; a forced oneDNN that cannot be used is an error, a default one
    falls back to the BLAS."""
    choice = os.environ.get(env, "").strip().lower()
    if choice not in ("", "onednn", "blas"):
        raise FlexBackendError(f"{env}={choice!r}: expected 'onednn' or 'blas'")
    if choice == "blas" or (choice == "" and not default_onednn()):
        return "blas"
    ok, why = _hand_over_dnnl()
    if not ok and choice == "onednn":
        raise FlexBackendError(f"{env}=onednn but oneDNN cannot be used: {why}")
    return "onednn" if ok else "blas"


def _enable_dnnl() -> None:
    """Tells the runtime which input types oneDNN runs (those chosen so far)."""
    if _dnnl_handed and _dnnl_handed[0]:
        fn = _runtime.flex_runtime_dnnl_use
        fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], None
        fn(int(_f32_library == "onednn"), int(_bf16_library == "onednn"))


def bf16_gemm_library() -> str:
    """'onednn' or 'blas': what runs this process's bf16 products. oneDNN
    is loaded then, at the latest (else by the first module with a bf16
    product)."""
    global _bf16_library
    runtime_library()
    if _bf16_library is None:
        _bf16_library = _choose(BF16_ENV, host_has_bf16_dot)
        _enable_dnnl()
    return _bf16_library


def host_has_avx512_f32() -> bool:
    """Whether oneDNN runs f32 products here with AVX-512 (its avx512_core
    kernels): the CPU's flags, and the runtime ISA not capped below
    AVX-512 (`$TORCH_MLIR_FLEX_RUNTIME_ISA`, `$TORCH_MLIR_FLEX_ISA`)."""
    from .cpu_features import host_cpu_flags

    return AVX512_CORE_FLAGS <= host_cpu_flags() and runtime_isa() == "avx512"


def f32_gemm_library() -> str:
    """'onednn' or 'blas': what runs this process's f32 products (but the
    few-row ones, on the runtime's own kernels). Chosen once per process,
    at the latest by the first module with an f32 product."""
    global _f32_library
    runtime_library()
    if _f32_library is None:
        _f32_library = _choose(F32_ENV, host_has_avx512_f32)
        _enable_dnnl()
    return _f32_library


def dnnl_products(dtype=None) -> int:
    """How many products oneDNN has run in this process: all, or those of
    one input dtype (torch.float32 or torch.bfloat16)."""
    if dtype is None:
        return _runtime_count("flex_runtime_dnnl_products")
    fn = _runtime_fn("flex_runtime_dnnl_products_of", ctypes.c_int64, [ctypes.c_int])
    return fn(_bf16_flag(dtype))


def gemv_products(isa=None, dtype=None) -> int:
    """How many few-row products the runtime's own kernels (Gemv/) have run
    in this process: all of them, or those of one ISA's kernels (`isa`,
    e.g. "avx2") and one weight dtype (`dtype`: torch.float32 or
    torch.bfloat16; None: both)."""
    if isa is None and dtype is None:
        return _runtime_count("flex_runtime_gemv_products")
    isas = runtime_isa_names() if isa is None else (_known_isa(isa),)
    fn = _runtime_fn("flex_runtime_gemv_products_on", ctypes.c_int64, [ctypes.c_char_p, ctypes.c_int])
    flags = (0, 1) if dtype is None else (_bf16_flag(dtype),)
    return sum(fn(name.encode(), flag) for name in isas for flag in flags)


def quant_products(isa=None, fmt=None) -> int:
    """How many quantized-weight products (lib/Runtime/Quant/) have run in
    this process: all, or those of one ISA's kernels (`isa`) and one format
    (`fmt`: "int8" or "int4_cpu"; None: both)."""
    if isa is None and fmt is None:
        return _runtime_count("flex_runtime_quant_products")
    if fmt is not None and fmt not in QUANT_FORMATS:
        raise FlexBackendError(f"unknown quantized format {fmt!r}: expected int8 or int4_cpu")
    isas = runtime_isa_names() if isa is None else (_known_isa(isa),)
    fn = _runtime_fn("flex_runtime_quant_products_on", ctypes.c_int64, [ctypes.c_char_p, ctypes.c_int])
    formats = QUANT_FORMATS.values() if fmt is None else (QUANT_FORMATS[fmt],)
    return sum(fn(name.encode(), f) for name in isas for f in formats)


def quant_kernel() -> str:
    """The ISA whose kernels run quantized-weight products now."""
    return _runtime_fn("flex_runtime_quant_kernel", ctypes.c_char_p, [])().decode()


def quant_rejected():
    """(calls refused for bad arguments, the last one's message or None)."""
    error = _runtime_fn("flex_runtime_quant_error", ctypes.c_char_p, [])()
    return _runtime_count("flex_runtime_quant_rejected"), error.decode() if error else None


def quant_activations() -> str:
    """The activations of int4 products of many rows: "f32" (weight-only
    numerics) or "int8" (x quantized per row and group, int8 dot products)."""
    return _runtime_fn("flex_runtime_quant_activations", ctypes.c_char_p, [])().decode()


def set_quant_activations(mode) -> str:
    """Sets quant_activations() for this process ("int8", "f32"; None:
    "f32"); returns the mode then in effect. FlexBackendError for another."""
    if mode is not None and mode not in QUANT_ACTIVATIONS:
        raise FlexBackendError(f"unknown quantized-product activations {mode!r}: expected "
                               f"{' or '.join(QUANT_ACTIVATIONS)}")
    fn = _runtime_fn("flex_runtime_quant_set_activations", ctypes.c_char_p, [ctypes.c_char_p])
    return fn(mode.encode() if mode else None).decode()


def quant_int8_activation_kernel() -> str:
    """The kernel variant ("generic", "avx2", "avx512_vnni") the int8
    activations' int4 products would run on now (from quant_kernel())."""
    return _runtime_fn("flex_runtime_quant_i8act_kernel", ctypes.c_char_p, [])().decode()


def quant_int8_activation_products(variant=None) -> int:
    """How many int4 products ran with int8 activations in this process:
    all, or those of one kernel variant."""
    fn = _runtime_fn("flex_runtime_quant_i8act_products", ctypes.c_int64, [ctypes.c_char_p])
    n = fn(variant.encode() if variant else None)
    if n < 0:
        raise FlexBackendError(f"unknown int8-activation kernel {variant!r}")
    return n


def int8_gemm_variants() -> tuple:
    """The kernel variants of the uint8 x int8 product (flex_gemm_u8s8),
    lowest first, whether this CPU runs them or not."""
    fn = _runtime_fn("flex_runtime_int8_gemm_variant_name", ctypes.c_char_p, [ctypes.c_int])
    names = []
    while (name := fn(len(names))) is not None:
        names.append(name.decode())
    return tuple(names)


def int8_gemm_available(variant: str) -> bool:
    """Whether this CPU runs the int8 product's kernel `variant`."""
    fn = _runtime_fn("flex_runtime_int8_gemm_available", ctypes.c_int, [ctypes.c_char_p])
    return bool(fn(variant.encode()))


def int8_gemm_kernel() -> str:
    """The int8 product's kernel variant in effect."""
    return _runtime_fn("flex_runtime_int8_gemm_kernel", ctypes.c_char_p, [])().decode()


def set_int8_gemm_kernel(variant) -> str:
    """Forces the int8 product's kernel `variant` (None: the best at or
    below the runtime ISA in effect again); returns the one in effect."""
    fn = _runtime_fn("flex_runtime_int8_gemm_set_kernel", ctypes.c_char_p, [ctypes.c_char_p])
    got = fn(variant.encode() if variant else None)
    if got is None:
        raise FlexBackendError(f"int8 GEMM kernel {variant!r} is unknown or this CPU lacks its ISA "
                               f"(variants: {', '.join(int8_gemm_variants())})")
    return got.decode()


def int8_gemm_products(variant=None) -> int:
    """How many uint8 x int8 products have run in this process: all, or
    those of one kernel variant."""
    fn = _runtime_fn("flex_runtime_int8_gemm_products", ctypes.c_int64, [ctypes.c_char_p])
    n = fn(variant.encode() if variant else None)
    if n < 0:
        raise FlexBackendError(f"unknown int8 GEMM kernel {variant!r}")
    return n


def int8_gemm_rejected():
    """(int8 products refused for bad arguments, the last one's message or None)."""
    error = _runtime_fn("flex_runtime_int8_gemm_error", ctypes.c_char_p, [])()
    return _runtime_count("flex_runtime_int8_gemm_rejected"), error.decode() if error else None


def _bf16_flag(dtype) -> int:
    import torch

    if dtype not in (torch.float32, torch.bfloat16):
        raise FlexBackendError(f"the few-row kernels take float32 or bfloat16 weights, not {dtype}")
    return int(dtype == torch.bfloat16)


def runtime_isa_names() -> tuple:
    """The ISAs the runtime has kernels for, lowest first ("generic", and on
    x86-64 "avx2", "avx512"), whether this CPU runs them or not."""
    fn = _runtime_fn("flex_runtime_isa_name", ctypes.c_char_p, [ctypes.c_int])
    names = []
    while (name := fn(len(names))) is not None:
        names.append(name.decode())
    return tuple(names)


def runtime_isas() -> tuple:
    """The ISAs whose kernels this CPU runs, lowest first."""
    fn = _runtime_fn("flex_runtime_isa_available", ctypes.c_int, [ctypes.c_char_p])
    return tuple(name for name in runtime_isa_names() if fn(name.encode()))


def _known_isa(name: str) -> str:
    names = runtime_isa_names()
    if name not in names:
        raise FlexBackendError(f"unknown runtime ISA {name!r}: expected one of {', '.join(names)}")
    return name


def runtime_isa() -> str:
    """The ISA of the few-row kernels in effect: the CPU's highest, or the
    highest up to the cap of `$TORCH_MLIR_FLEX_RUNTIME_ISA` /
    `set_runtime_isa()`."""
    return _runtime_fn("flex_runtime_isa", ctypes.c_char_p, [])().decode()


def gemv_kernel(dtype) -> str:
    """The ISA whose kernel runs few-row products of `dtype` weights now
    (below `runtime_isa()` where that ISA has none for the dtype: bf16 on
    an AVX-512 CPU without AVX512-BF16 runs the AVX2 kernel)."""
    fn = _runtime_fn("flex_runtime_gemv_kernel", ctypes.c_char_p, [ctypes.c_int])
    return fn(_bf16_flag(dtype)).decode()


def set_runtime_isa(name) -> str:
    """Caps the few-row kernels at the ISA `name` ("generic", "avx2",
    "avx512"; None: the CPU's highest) for this process; returns the ISA
    then in effect (the highest this CPU has up to `name`).
    FlexBackendError for an unknown name."""
    if name is not None:
        _known_isa(name)
    fn = _runtime_fn("flex_runtime_set_isa", ctypes.c_char_p, [ctypes.c_char_p])
    return fn(None if name is None else name.encode()).decode()


def _runtime_fn(name: str, restype, argtypes):
    """The runtime's function `name`, typed."""
    runtime_library()
    fn = getattr(_runtime, name)
    fn.restype, fn.argtypes = restype, argtypes
    return fn


def _runtime_count(name: str) -> int:
    """The value of the runtime's int64 counter function `name`."""
    runtime_library()
    fn = getattr(_runtime, name)
    fn.restype = ctypes.c_int64
    return fn()


def runtime_loaded() -> bool:
    return _runtime is not None


def guarded_call():
    """The runtime's `flex_guarded_call(fn, args) -> int64` (FlexGuard.c):
    calls a compiled function's packed wrapper and returns the size of an
    allocation that failed in it (0: none), instead of letting the code
    write through NULL. None without the runtime library."""
    try:
        runtime_library()
    except FlexBackendError:
        return None
    fn = _runtime.flex_guarded_call
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int64
    return fn


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
        # The library read $TORCH_MLIR_FLEX_RUNTIME_ISA too (a bad name is an
        # error here); without it, the compiled code's cap
        # ($TORCH_MLIR_FLEX_ISA) caps the runtime kernels as well, so that one
        # variable runs everything as on a host of that ISA.
        env = RUNTIME_ISA_ENV if os.environ.get(RUNTIME_ISA_ENV, "").strip() else ISA_ENV
        isa = os.environ.get(env, "").strip().lower()
        if isa:
            try:
                set_runtime_isa(isa)
            except FlexBackendError as e:
                _runtime = None  # every use says so, not only the first
                raise FlexBackendError(f"{env}={isa!r}: {e}") from None
        # The library reads $TORCH_MLIR_FLEX_QUANT_ACTIVATIONS itself; a bad
        # value is an error here.
        mode = os.environ.get(QUANT_ACTIVATIONS_ENV, "")
        if mode and mode not in QUANT_ACTIVATIONS:
            _runtime = None
            raise FlexBackendError(f"{QUANT_ACTIVATIONS_ENV}={mode!r}: expected "
                                   f"{' or '.join(QUANT_ACTIVATIONS)}")
    return path


def _declared(module) -> set:
    """Names of the functions the lowered `module` (LLVM dialect) declares."""
    return {str(op.attributes["sym_name"]).strip('"') for op in module.body.operations
            if op.operation.name in ("llvm.func", "func.func")}


def calls_runtime(module) -> bool:
    """Whether the lowered `module` (LLVM dialect) declares a function of the
    runtime library (a GEMM, a quantized product or the heap functions);
    for a bf16 or f32 GEMM, the library behind it (oneDNN or the BLAS) is
    chosen now."""
    declared = _declared(module)
    if "flex_gemm_bf16" in declared:
        bf16_gemm_library()
    if "flex_gemm_f32" in declared:
        f32_gemm_library()
    return not declared.isdisjoint(GEMM_FUNCTIONS + QUANT_FUNCTIONS + INT8_GEMM_FUNCTIONS +
                                   ALLOC_FUNCTIONS)


def release_memory() -> None:
    """Frees the large blocks the compiled code's heap keeps for its next
    calls (bounded by $FLEX_ALLOC_CACHE_MB, default 1024)."""
    if _runtime is not None:
        _runtime.flex_runtime_release_memory()


HEAP_SCOPES = ("function", "call", "process")  # FlexAlloc.c's FLEX_HEAP_SCOPE_* in order


def heap_scope(name=None) -> str:
    """Which calls the compiled code's kept blocks serve (FlexAlloc.c;
    $FLEX_ALLOC_CACHE_SCOPE): "function" (the next call of the function
    that freed them; a call of another function frees them), "call" (none
    after the call), "process" (any call). Sets it when `name` is given
    (kept blocks are freed on a change); returns the scope in effect."""
    if name is not None and name not in HEAP_SCOPES:
        raise FlexBackendError(f"unknown heap scope {name!r}: expected one of {HEAP_SCOPES}")
    fn = _runtime_fn("flex_runtime_set_heap_scope", ctypes.c_int, [ctypes.c_int])
    return HEAP_SCOPES[fn(-1 if name is None else HEAP_SCOPES.index(name))]


def live_peak_bytes(reset: bool = False) -> int:
    """Peak of the bytes the compiled code held in live allocations (its
    temporaries) since the last reset; `reset` starts a new peak."""
    runtime_library()
    _runtime.flex_runtime_live_peak_bytes.restype = ctypes.c_int64
    return _runtime.flex_runtime_live_peak_bytes(int(reset))


def kept_bytes() -> int:
    """Bytes the compiled code's heap keeps between calls."""
    runtime_library()
    _runtime.flex_runtime_kept_bytes.restype = ctypes.c_int64
    return _runtime.flex_runtime_kept_bytes()


def heap_functions():
    """(aligned_alloc(alignment, bytes) -> address, free(address)) of the
    compiled code's heap (FlexAlloc.c) for results (not counted in
    `live_peak_bytes`), typed for ctypes; loads the runtime library
    (FlexBackendError if it is missing)."""
    runtime_library()
    alloc, free = _runtime.flex_runtime_result_alloc, _runtime._mlir_memref_to_llvm_free
    alloc.argtypes, alloc.restype = [ctypes.c_uint64, ctypes.c_uint64], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    return alloc, free
