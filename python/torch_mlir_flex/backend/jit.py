"""A small JIT: compile a tensor-level MLIR function and call it on tensors.

    fn = JitFunction(module_text, "main", pipeline="reference")
    outs = fn(q, k, v)            # torch tensors or numpy arrays in, torch out

Arguments and results are ranked tensors of f32/f16/bf16/f64/i1/i32/i64.
Results are returned as torch tensors (a tuple when there are several).
"""

import ctypes
import os
import re

import numpy as np

from .. import _load_order
from ..mlir import execution_engine, ir, passmanager
from ..mlir.runtime import np_to_memref as _np_memref
from . import cache as compile_cache

_MLIR_TO_NP = {
    "f32": np.float32,
    "f64": np.float64,
    "f16": np.float16,
    "bf16": np.uint16,  # carried as raw bits, viewed as torch.bfloat16
    "i1": np.bool_,
    "i8": np.int8,
    "i32": np.int32,
    "i64": np.int64,
}


class FlexBackendError(RuntimeError):
    """A module could not be compiled or called by our backend."""


def _element_name(t: ir.RankedTensorType) -> str:
    s = str(t.element_type)
    if s not in _MLIR_TO_NP:
        raise FlexBackendError(f"unsupported tensor element type {s}")
    return s


def _to_numpy(x, elt: str):
    import torch

    if isinstance(x, torch.Tensor):
        x = x.detach().contiguous().cpu()
        if elt == "bf16":
            if x.dtype != torch.bfloat16:
                raise FlexBackendError(f"expected a bfloat16 tensor, got {x.dtype}")
            return x.view(torch.int16).numpy().view(np.uint16)
        x = x.numpy()
    x = np.ascontiguousarray(x)
    want = _MLIR_TO_NP[elt]
    if x.dtype != want:
        raise FlexBackendError(
            f"expected an argument of element type {elt} ({np.dtype(want)}), "
            f"got {x.dtype}"
        )
    return x


def _to_torch(arr, elt: str):
    import torch

    t = torch.from_numpy(np.array(arr, copy=True))
    if elt == "bf16":
        t = t.view(torch.bfloat16)
    return t


# Inputs that abort (not diagnose) this MLIR's parser; rejected before parsing.
_PARSER_ABORTS = [
    # parseDenseArrayAttr asserts "only integers and floats have a bitwidth".
    (re.compile(r"array\s*<\s*index\b"), "a dense array attribute of index elements (array<index: ...>)"),
]


def check_known_parser_aborts(text: str):
    """Raises FlexBackendError if `text` holds a construct on which the MLIR
    22.1.8 parser asserts and kills the process instead of reporting an error."""
    for pattern, what in _PARSER_ABORTS:
        m = pattern.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            raise FlexBackendError(
                f"cannot parse module: line {line}: {what} is not supported "
                "(it crashes the MLIR 22.1.8 parser); use array<i32: ...> or array<i64: ...>")


def _split_before(pipeline: str, pass_name: str):
    """`builtin.module(A,P,B)` -> [`builtin.module(A)`, `builtin.module(P,B)`]
    when the pass P is a direct child of builtin.module; else [pipeline]."""
    head = "builtin.module("
    i = pipeline.find(pass_name)
    if not pipeline.startswith(head) or i < 0:
        return [pipeline]
    prefix = pipeline[len(head):i].rstrip(",")
    if not prefix or prefix.count("(") != prefix.count(")") or pipeline[i - 1] != ",":
        return [pipeline]
    return [head + prefix + ")", head + pipeline[i:]]


def _check_memref_element_types(module):
    """MLIR 22.1.8's finalize-memref-to-llvm asserts (and kills the process)
    on memref.load/store of integers narrower than 8 bits, e.g. i1 from a
    bool tensor; reject such IR with an error instead. The named pipelines
    run flex-widen-i1-memrefs (i1 -> i8) first, so this is a safety net for
    custom pipelines and other sub-byte types."""
    bad = []

    def visit(op):
        op = op.operation
        idx = {"memref.load": 0, "memref.store": 1}.get(op.name)
        if idx is not None and len(op.operands) > idx:
            t = op.operands[idx].type
            if isinstance(t, ir.MemRefType):
                elt = t.element_type
                if isinstance(elt, ir.IntegerType) and elt.width < 8:
                    bad.append((op, t))
                    return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if bad:
        op, t = bad[0]
        raise FlexBackendError(
            f"cannot lower '{op.name}' on {t} ({op.location}): element types narrower "
            "than 8 bits are not supported by this MLIR's finalize-memref-to-llvm; "
            "for i1 (bool tensors) run flex-widen-i1-memrefs before it (the named "
            "pipelines do), otherwise use an integer dtype of at least 8 bits")


class JitFunction:
    """Lowers `module_text` with a named pipeline and JIT-compiles `func_name`."""

    def __init__(self, module_text: str, func_name: str = "main",
                 pipeline: str = "reference", opt_level: int = 2,
                 shared_libs=()):
        if not _load_order.LOADED_FIRST:
            raise FlexBackendError(_load_order.LOAD_ORDER_MESSAGE)
        from .pipelines import get_pipeline

        self.func_name = func_name
        self.context = ir.Context()
        with self.context, ir.Location.unknown():
            check_known_parser_aborts(module_text)
            try:
                module = ir.Module.parse(module_text)
            except ir.MLIRError as e:
                raise FlexBackendError(f"cannot parse module: {e}") from None
            func = self._find_func(module, func_name)
            ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
            self.arg_types = [self._ranked(t, "argument") for t in ftype.inputs]
            self.result_types = [self._ranked(t, "result") for t in ftype.results]
            func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            text = get_pipeline(pipeline) if "(" not in pipeline else pipeline
            try:
                # Two halves around finalize-memref-to-llvm so that IR it would
                # assert on is rejected first (see _check_memref_element_types).
                for i, part in enumerate(_split_before(text, "finalize-memref-to-llvm")):
                    if i:
                        _check_memref_element_types(module)
                    passmanager.PassManager.parse(part).run(module.operation)
            except (ir.MLIRError, ValueError) as e:
                raise FlexBackendError(f"lowering with pipeline {pipeline!r} failed: {e}") from None
            self.lowered = module
            try:
                self.engine = compile_cache.engine_for(  # ExecutionEngine, or cached
                    module, opt_level=opt_level,
                    shared_libs=self._shared_libs(text, shared_libs))
            except RuntimeError as e:  # e.g. ops left that LLVM IR cannot express
                raise FlexBackendError(
                    f"JIT compilation of @{func_name} (pipeline {pipeline!r}) failed: {e} "
                    "(see the diagnostics above)") from None
            if not self.engine.raw_lookup(f"_mlir_ciface_{func_name}"):
                raise FlexBackendError(f"JIT compilation of @{func_name} failed")

    @staticmethod
    def _shared_libs(pipeline_text, shared_libs):
        """Adds the OpenMP runtime when the pipeline emits OpenMP code."""
        from .pipelines import find_openmp_runtime, uses_openmp

        libs = list(shared_libs)
        if uses_openmp(pipeline_text) and not any("omp" in os.path.basename(l) for l in libs):
            rt = find_openmp_runtime()
            if rt is None:
                raise FlexBackendError(
                    "the pipeline uses OpenMP but no OpenMP runtime was found "
                    "(install intel-openmp, set FLEX_OPENMP_LIB, or use backend 'tiled-1t')")
            # Idle OpenMP threads would otherwise spin for 200 ms after each
            # call, taking the cores from the caller.
            os.environ.setdefault("KMP_BLOCKTIME", "0")
            libs.append(rt)
        return libs

    @staticmethod
    def _find_func(module, name):
        for op in module.body.operations:
            if op.operation.name == "func.func" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == name:
                return op
        raise FlexBackendError(f"no function @{name} in the module")

    @staticmethod
    def _ranked(t, what):
        if not isinstance(t, ir.RankedTensorType):
            raise FlexBackendError(f"unsupported {what} type {t}: expected a ranked tensor")
        return ir.RankedTensorType(t)

    def __call__(self, *args):
        if len(args) != len(self.arg_types):
            raise FlexBackendError(
                f"@{self.func_name} takes {len(self.arg_types)} arguments, got {len(args)}")
        arrays = []
        for i, (a, t) in enumerate(zip(args, self.arg_types)):
            arr = _to_numpy(a, _element_name(t))
            if arr.ndim != t.rank or any(
                    d != ir.ShapedType.get_dynamic_size() and d != s
                    for d, s in zip(t.shape, arr.shape)):
                raise FlexBackendError(
                    f"argument {i}: expected shape {list(t.shape)} ({t}), got {list(arr.shape)}")
            arrays.append(arr)
        arg_ptrs = [ctypes.pointer(ctypes.pointer(_np_memref.get_ranked_memref_descriptor(a)))
                    for a in arrays]
        res_descs = []
        for t in self.result_types:
            np_t = _MLIR_TO_NP[_element_name(t)]
            # f16 results are read as raw 16-bit words (numpy's float16 has no
            # ctypes type) and viewed as float16 below.
            ctype = ctypes.c_uint16 if np_t is np.float16 else \
                np.ctypeslib.as_ctypes_type(np.dtype(np_t))
            res_descs.append(_np_memref.make_nd_memref_descriptor(t.rank, ctype)())
        call_args = list(arg_ptrs)
        if len(res_descs) == 1:
            call_args.insert(0, ctypes.pointer(ctypes.pointer(res_descs[0])))
        elif res_descs:
            fields = [(f"r{i}", type(d)) for i, d in enumerate(res_descs)]
            packed = type("Results", (ctypes.Structure,), {"_fields_": fields})()
            call_args.insert(0, ctypes.pointer(ctypes.pointer(packed)))
        self.engine.invoke(self.func_name, *call_args)
        if len(res_descs) > 1:
            res_descs = [getattr(packed, f"r{i}") for i in range(len(res_descs))]
        outs = []
        for d, t in zip(res_descs, self.result_types):
            if t.rank:
                arr = _np_memref.ranked_memref_to_numpy([d])
            else:
                arr = np.array(d.aligned[0], dtype=_MLIR_TO_NP[_element_name(t)])
            if _element_name(t) == "f16":
                arr = np.asarray(arr).view(np.float16)
            outs.append(_to_torch(arr, _element_name(t)))
        return outs[0] if len(outs) == 1 else tuple(outs)
