"""`torch_mlir_flex.compile`: a PyTorch model with flex_attention -> a JIT callable.

    import torch_mlir_flex                      # before anything imports torch_mlir
    fn = torch_mlir_flex.compile(model, (q, k, v), backend="tiled")
    out = fn(q, k, v)                           # torch tensors in, torch tensors out
    print(fn.flex_ir)                           # IR of every stage is kept

Stages (each one a function here, reused by the CLI):

1. `import_model`: `torch.export` + our importer -> Torch IR (``.torch_ir``);
2. `to_linalg`: our frontend -> linalg-on-tensors with every flex call outlined
   as ``func.call @__flex_attention_N`` (``.linalg_ir``);
3. `materialize`: parse that text in OUR MLIR context and run
   ``flex-materialize``, which rebuilds ``flex.attention`` ops (``.flex_ir``);
4. `JitFunction` with a named lowering pipeline (``.lowered_ir``, LLVM
   dialect); `loops_ir()` stops that pipeline before ``convert-scf-to-cf``.

Every failure is a `FlexCompileError` (a `FlexBackendError`) whose message
starts with the stage, e.g. ``frontend: op 'tm_tensor.sort' (from aten.sort)
has no lowering ...``; the original exception is chained as ``__cause__``.
"""

import contextlib
from typing import Any, Optional, Sequence

from .. import _load_order  # noqa: F401  (our LLVM first)
from .block_mask_args import flatten_block_masks
from .errors import FlexBackendError, FlexCompileError, FlexMemoryError
from .jit import JitFunction
from ..log import get_logger, timed
from .pipelines import DEFAULT_BACKEND
from .report import log_flash_choices

MATERIALIZE_PASS = "flex-materialize"
MATERIALIZE_QUANT_PASS = "flex-materialize-quant-matmul"
log = get_logger("compile")
# The textual pipeline that `loops_ir` truncates (see `pipeline_until`).
LOOPS_STOP_BEFORE = "convert-scf-to-cf"


# --------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------


@timed("export")
def export_model(model, example_args: Sequence[Any], dynamic_shapes=None):
    """torch.export.export, with errors as FlexCompileError('export')."""
    import torch

    from ..importer.direct_flex_trace import direct_flex_tracing
    from .export_meta import symbolic_stride_metadata

    if not isinstance(model, torch.nn.Module):
        if callable(model):
            model = _wrap_callable(model)
        else:
            raise FlexCompileError("export", f"expected a torch.nn.Module or a callable, got {type(model).__name__}")
    for i, a in enumerate(example_args):
        if not isinstance(a, (torch.Tensor, int, float)):
            raise FlexCompileError(
                "export", f"example argument {i} is a {type(a).__name__}; only torch.Tensor arguments, "
                          "dynamic ints and floats are supported (and BlockMask ones, which compile() "
                          "flattens)")
    try:
        # Inference only: flex_attention refuses to trace a backward on CPU
        # when parameters require grad. flex_attention calls trace without
        # Dynamo (importer/direct_flex_trace.py).
        with torch.no_grad(), direct_flex_tracing(), symbolic_stride_metadata():
            return torch.export.export(model, tuple(example_args), dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:  # torch raises many types here
        raise FlexCompileError("export", f"torch.export failed: {type(e).__name__}: {_first_lines(e)}") from e


@timed("import", dump="torch")
def import_model(exported, func_name: str = "main", state_targets: Optional[list] = None,
                 imported: Optional[list] = None):
    """Our importer on an ExportedProgram -> a torch-mlir Module (raw Torch IR).

    With a list as `state_targets`, parameters and buffers become the
    function's leading arguments (importer/state_arguments.py) and their
    state_dict/constants keys are appended to that list in argument order;
    else they are literals in the module. With a list as `imported`, the
    program imported (after decompositions: functional, its mutations are
    outputs) is appended to it."""
    from torch_mlir import ir as tm_ir
    from torch_mlir.dialects import torch as torch_d

    from ..importer import FlexImportError, export_and_import
    from ..importer.fx_importer import FlexFxImporter

    try:
        context = tm_ir.Context()
        torch_d.register_dialect(context)
        importer = FlexFxImporter(context=context)
        module = export_and_import(exported, output_type="raw", func_name=func_name, fx_importer=importer,
                                   state_as_arguments=state_targets is not None)
    except FlexImportError as e:
        raise FlexCompileError("import", str(e)) from e
    except Exception as e:
        raise FlexCompileError("import", f"{type(e).__name__}: {_first_lines(e)}") from e
    if state_targets is not None:
        state_targets.extend(importer.state_arguments.targets)
    if imported is not None:
        imported.append(importer.imported_program)
    return module


@timed("to_linalg", dump="linalg")
def to_linalg(torch_module) -> str:
    """Our frontend (lowers `torch_module` in place) -> linalg-on-tensors text."""
    from ..frontend import FlexFrontendError, lower_to_linalg_with_flex_outlined

    try:
        return lower_to_linalg_with_flex_outlined(torch_module)
    except FlexFrontendError as e:
        raise FlexCompileError("frontend", str(e)) from e


def _parse(text: str, context, what: str):
    from ..mlir import ir
    from .prechecks import check_known_parser_aborts

    try:
        check_known_parser_aborts(text)
    except FlexBackendError as e:
        raise FlexCompileError(what, str(e)) from None
    try:
        return ir.Module.parse(text, context)
    except ir.MLIRError as e:
        raise FlexCompileError(what, f"cannot parse the module in torch_mlir_flex.mlir: {e}") from None


def _run_pipeline(module, pipeline: str, stage: str, unshare_in=None):
    """Runs `pipeline` on `module` (with calling.unshare_inits on the
    function `unshare_in` before eliminate-empty-tensors, when given)."""
    from ..mlir import ir, passmanager

    from .jit import run_with_unshared_inits

    try:
        passmanager.PassManager.parse(pipeline, module.context)
    except (ir.MLIRError, ValueError) as e:
        raise FlexCompileError(stage, f"invalid pass pipeline {pipeline!r}: {e}") from None
    try:
        run_with_unshared_inits(module, pipeline, unshare_in)
    except ir.MLIRError as e:
        msg = str(e).replace("Failure while executing pass pipeline:", "").strip()
        raise FlexCompileError(stage, msg.removeprefix("error: ")) from None


def has_outlined_flex_calls(text: str) -> bool:
    return ("@__flex_attention_" in text or "@__flex_backward_" in text
            or "@__flex_quant_matmul_" in text)


@timed("materialize", dump="flex")
def materialize(linalg_text: str) -> str:
    """Frontend text -> flex IR (`flex.attention` ops) in our MLIR context."""
    from ..mlir import ir

    ctx = ir.Context()
    module = _parse(linalg_text, ctx, "materialize")
    if not has_outlined_flex_calls(linalg_text):
        return str(module)  # nothing to rebuild (or already flex IR)
    if not materialize_available():
        raise FlexCompileError(
            "materialize",
            f"the '{MATERIALIZE_PASS}' pass is not registered in this build of "
            "torch_mlir_flex.mlir (rebuild the bindings)")
    # The quantized matmuls right after (the pipelines' first stage runs it
    # again, finding nothing): the shape probe of JitFunction sees the ops.
    _run_pipeline(module, f"builtin.module({MATERIALIZE_PASS},{MATERIALIZE_QUANT_PASS})",
                  "materialize")
    return str(module)


_MATERIALIZE_AVAILABLE = None


def materialize_available() -> bool:
    global _MATERIALIZE_AVAILABLE
    if _MATERIALIZE_AVAILABLE is None:
        from ..mlir import ir, passmanager

        with ir.Context():
            try:
                passmanager.PassManager.parse(f"builtin.module({MATERIALIZE_PASS})")
                _MATERIALIZE_AVAILABLE = True
            except (ir.MLIRError, ValueError):
                _MATERIALIZE_AVAILABLE = False
    return _MATERIALIZE_AVAILABLE


def pipeline_until(backend: str, stop_before: str = LOOPS_STOP_BEFORE) -> str:
    """The named pipeline truncated before the first pass called `stop_before`
    (the whole pipeline if it has none)."""
    from .pipelines import get_pipeline

    full = get_pipeline(backend)
    i = full.find(stop_before)
    if i < 0:
        return full
    prefix = full[:i].rstrip(",")
    return prefix + ")" * (prefix.count("(") - prefix.count(")"))


def lower_to_loops(flex_text: str, backend: str = DEFAULT_BACKEND, func_name: str = "main",
                   in_place=None) -> str:
    """flex IR -> the backend's pipeline up to scf loops (for inspection), with
    the calling convention of JitFunction (results as out-params, those of
    `in_place` written into their input)."""
    from ..mlir import ir

    from .calling import to_destination_passing

    ctx = ir.Context()
    module = _parse(flex_text, ctx, "lower")
    entry = func_name
    with ctx, ir.Location.unknown():
        try:
            to_destination_passing(module, func_name, in_place)
        except FlexBackendError:
            entry = None  # no such entry function (or not a tensor one): lower as is
        _run_pipeline(module, pipeline_until(backend), "lower", unshare_in=entry)
    return str(module)


@timed("lower+jit", dump="llvm", before=log_flash_choices)
def jit(flex_text: str, func_name: str = "main", backend: str = DEFAULT_BACKEND,
        arg_names=None, shape_checks=None, opt_level: int = 2, in_place=None) -> JitFunction:
    from .pipelines import PIPELINES

    if backend not in PIPELINES:
        raise FlexCompileError("lower", f"unknown backend {backend!r}; known: {sorted(PIPELINES)}")
    try:
        return JitFunction(flex_text, func_name, pipeline=backend, arg_names=arg_names,
                           shape_checks=shape_checks, opt_level=opt_level, in_place=in_place)
    except FlexMemoryError:
        raise  # a FlexCompileError already, and a MemoryError (shapes.py)
    except FlexBackendError as e:
        raise FlexCompileError("lower", str(e)) from e


# --------------------------------------------------------------------------
# The compiled object
# --------------------------------------------------------------------------


class CompiledModule:
    """Callable result of `compile`. Attributes: `torch_ir`, `linalg_ir`,
    `flex_ir`, `lowered_ir` (text of each stage), `backend`, `func_name`,
    `exported_program` (None when the stage cache made the export
    unnecessary: pre_export_cache.py), `jit_function`, `input_ranges`
    ([(input, dim, lo, hi)]: the exported program's range of each dynamic
    dim of the inputs, hi None when unbounded); `loops_ir()`
    computes the IR after the lowering pipeline up to scf."""

    def __init__(self, *, jit_function: JitFunction, backend: str, func_name: str,
                 torch_ir: Optional[str], linalg_ir: Optional[str], flex_ir: str,
                 exported_program=None, arg_specs=None, out_spec=None, arg_layout=None,
                 state=(), mutations=None, constant_args=None, input_ranges=()):
        self.jit_function = jit_function
        self.input_ranges = list(input_ranges)
        # The model's parameters and buffers, the function's leading
        # arguments (weights as runtime arguments): the tensors themselves,
        # so in-place updates of the model are seen by later calls.
        self.state = tuple(state)
        if self.state:
            jit_function.bind_leading(self.state)
        self.backend = backend
        self.func_name = func_name
        self.torch_ir = torch_ir
        self.linalg_ir = linalg_ir
        self.flex_ir = flex_ir
        self.lowered_ir = jit_function.lowered_text
        self.exported_program = exported_program
        self._arg_specs = arg_specs  # [(name, torch.dtype)]
        self._out_spec = out_spec
        # An out_spec that is a plain tuple or list of results: no pytree
        # call per call.
        self._leaves, self._out_type = _plain_sequence(out_spec)
        self._arg_layout = arg_layout  # BlockMask arguments (block_mask_args.py)
        self._mutations = mutations if mutations else None  # mutations.py
        # {position: value}: int arguments export made constants; calls must repeat them
        self._constant_args = constant_args or None
        self._loops_ir = None

    def loops_ir(self) -> str:
        if self._loops_ir is None:
            self._loops_ir = lower_to_loops(self.flex_ir, self.backend, self.func_name,
                                            self.jit_function.in_place)
        return self._loops_ir

    @property
    def num_inputs(self) -> int:
        """The tensors a call takes (the model's state is bound)."""
        return len(self.jit_function.arg_types) - len(self.state)

    def __call__(self, *args):
        if self._arg_layout is not None:
            args = self._arg_layout.flatten_call(args)
        if self._constant_args is not None:
            self._check_constants(args)
        # JitFunction checks the arguments (count, dtype, shape, shared dims)
        # and raises FlexCompileError('call', ...) itself.
        try:
            res = self.jit_function(*args)
        except FlexCompileError:
            raise
        except FlexBackendError as e:
            raise FlexCompileError("call", str(e)) from e
        if self._mutations is None and self._leaves is not None:
            # a tuple or list of the results themselves (a Dynamo graph's)
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) == self._leaves:
                return res if self._out_type is tuple else self._out_type(res)
            return res[0] if len(res) == 1 else res
        flat = list(res) if isinstance(res, tuple) else [res]
        if self._mutations is not None:
            flat = self._mutations.apply(flat, args, self.state)
            res = flat[0] if len(flat) == 1 else tuple(flat)
        if self._out_spec is not None and self._out_spec.num_leaves == len(flat):
            import torch.utils._pytree as pytree

            return pytree.tree_unflatten(flat, self._out_spec)
        return res

    def _check_constants(self, args):
        for i, v in self._constant_args.items():
            if i < len(args) and args[i] != v:
                raise FlexCompileError("call", f"argument {i} is {args[i]!r}, but the function was compiled "
                                               f"for {v!r} (torch.export made it a constant; mark it dynamic "
                                               "to vary it)")

    def __repr__(self):
        return f"<CompiledModule @{self.func_name} backend={self.backend!r} inputs={self.num_inputs}>"


def _plain_sequence(spec):
    """(number of leaves, tuple or list) when `spec` is a tuple or list of
    leaves, else (None, None)."""
    if spec is None or getattr(spec, "type", None) not in (tuple, list):
        return None, None
    children = getattr(spec, "children_specs", None)
    if children is None or not all(c.is_leaf() for c in children):
        return None, None
    return len(children), spec.type


def compile(model, example_args, backend: str = DEFAULT_BACKEND, dynamic_shapes=None,
            func_name: str = "main", opt_level: int = 2,
            weights_as_arguments: bool = True, exported_check=None, train: bool = False):
    """Compile `model` (an nn.Module or a callable) for `example_args` (a tuple
    of tensors and BlockMasks, or one tensor) with the lowering pipeline `backend`
    ("reference", "tiled", ... see `backend.pipelines.PIPELINES`).

    `dynamic_shapes` is passed to `torch.export.export`, e.g.
    ``{"q": {2: Dim("S")}, ...}``; dims that stay dynamic become ``?`` in the
    IR and the callable accepts any size there.
    A BlockMask argument is flattened: its tensors and the tensors its
    mask_mod closes over are runtime inputs; the callable takes a BlockMask
    there whose seq_lengths, BLOCK_SIZE and mask_mod match (docs/runtime.md).
    `opt_level` is LLVM's optimization level for the JIT (0-3).
    `weights_as_arguments` (default): the model's parameters and buffers are
    arguments of the compiled function, bound to the model's own tensors
    (no copy; compile time and code independent of their values), except
    those a flex_attention modifier captures; False freezes them into the
    module as constants.
    In-place updates of inputs and buffers (a KV cache's `index_copy_`)
    are written into the caller's tensors by the compiled code, in place
    (mutations.py).
    `exported_check(ep)`, when given, sees the ExportedProgram before any
    lowering and may raise FlexCompileError to refuse it.
    A model that holds a transformers model is exported with the fixes of
    `torch_mlir_flex.hf.compile` (hf/patches.py: the data-dependent mask
    check, MoE `grouped_mm_fallback`), restored after the call.
    `train=True`: a callable that supports autograd (`loss.backward()`), the
    model through `torch.compile(model, backend="torch_mlir_flex")`, whose
    forward and backward graphs (flex_attention's backward included) are
    compiled at the first call and at the first backward (docs/training.md);
    `example_args` are not used then.
    Returns a `CompiledModule`; raises `FlexCompileError`."""
    import torch

    from .pipelines import PIPELINES

    if backend not in PIPELINES:
        raise FlexCompileError("lower", f"unknown backend {backend!r}; known: {sorted(PIPELINES)}")
    if train:
        from .. import dynamo

        dynamo.register()
        return torch.compile(model, backend=dynamo.NAME, options={"backend": backend})
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    from ..hf.patches import patches_for

    # A transformers model gets hf.compile's export fixes, for this call only.
    with _older_objects_frozen(), patches_for(model):
        return _compile(model, example_args, backend, dynamic_shapes, func_name, opt_level,
                        weights_as_arguments, exported_check)


def _compile(model, example_args, backend, dynamic_shapes, func_name, opt_level,
             weights_as_arguments=True, exported_check=None):
    import torch

    from .pre_export_cache import PreExport
    from .subclass_state import state_tensor

    original = model
    # BlockMask arguments become tensors (block_mask_args.py).
    model, example_args, dynamic_shapes, layout = flatten_block_masks(model, example_args, dynamic_shapes)
    example_args = unalias(example_args)
    # A model compiled before (same code, attributes, shapes): the stages up
    # to materialize from the stage cache, without torch.export
    # (pre_export_cache.py). Not for plain callables or BlockMask arguments;
    # an exported_check is part of the key (stored only after it passed).
    usable = model is original and isinstance(model, torch.nn.Module)
    pre = PreExport(model, example_args, dynamic_shapes, func_name, weights_as_arguments,
                    check=exported_check) if usable else None
    hit = pre.load(model) if pre is not None else None
    if hit is not None:
        ep, out_spec, arg_specs, constants = None, hit["out_spec"], hit["arg_specs"], hit["constants"]
        torch_ir, linalg_ir, flex_ir, targets, mutations = hit["imported"]
        state, checks = hit["state"], hit["checks"]
    else:
        ep = export_model(model, example_args, dynamic_shapes)
        if exported_check is not None:
            exported_check(ep)
        out_spec = ep.call_spec.out_spec
        arg_specs, constants = _user_input_specs(ep, example_args)
        (torch_ir, linalg_ir, flex_ir, targets, mutations), imported_key = _import_stages(
            ep, func_name, weights_as_arguments)
        state = [state_tensor(ep, t) for t in targets or ()]
        checks = _export_checks(ep, [n for n, _ in arg_specs] if arg_specs else None, len(state))
        if pre is not None:
            pre.store(ep, model, imported_key=imported_key, out_spec=out_spec, arg_specs=arg_specs,
                      constants=constants, targets=targets, checks=checks)
    names = [n for n, _ in arg_specs] if arg_specs else None
    if names is not None:
        names = list(targets or ()) + names
    fn = jit(flex_ir, func_name, backend, arg_names=names, shape_checks=checks, opt_level=opt_level,
             in_place=mutations.in_place(len(state)))
    if arg_specs is not None and len(arg_specs) + len(state) != len(fn.arg_types):
        arg_specs = None
    # No checks when export named no user inputs (_export_checks).
    ranges = [(i - len(state), d, lo, hi) for i, d, lo, hi in (checks.ranges if checks is not None else ())]
    return CompiledModule(jit_function=fn, backend=backend, func_name=func_name, torch_ir=torch_ir,
                          linalg_ir=linalg_ir, flex_ir=flex_ir, exported_program=ep,
                          arg_specs=arg_specs, out_spec=out_spec, arg_layout=layout, state=state,
                          mutations=mutations, constant_args=constants, input_ranges=ranges)


def _import_stages(ep, func_name, weights_as_arguments):
    """((Torch IR, linalg IR, flex IR, state targets, Mutations), stage
    cache key or None) of the exported program `ep`: import, frontend and
    materialize, or their results from the stage cache (stage_cache.py)."""
    from . import stage_cache
    from .mutations import Mutations

    fingerprint = stage_cache.program_fingerprint(ep)
    key = fingerprint and stage_cache.key("imported", fingerprint, func_name, weights_as_arguments)
    hit = stage_cache.load(key) if key else None
    if hit is not None:
        log.info("stage import..materialize: from the stage cache")
        return hit, key
    targets = [] if weights_as_arguments else None
    imported = []
    torch_module = import_model(ep, func_name, state_targets=targets, imported=imported)
    # Refuses, before lowering, what a call cannot write back.
    mutations = Mutations(imported[0], targets)
    torch_ir = str(torch_module)
    linalg_ir = to_linalg(torch_module)
    flex_ir = materialize(linalg_ir)
    result = (torch_ir, linalg_ir, flex_ir, targets, mutations)
    if key:
        stage_cache.store(key, result)
    return result, key


def compile_mlir(text: str, backend: str = DEFAULT_BACKEND, func_name: str = "main",
                 opt_level: int = 2, state=()) -> CompiledModule:
    """Compile linalg-on-tensors frontend output or flex IR text. `state`:
    tensors bound to the function's leading arguments (a compiled model's
    `.state`), which calls then leave out."""
    flex_ir = materialize(text)
    fn = jit(flex_ir, func_name, backend, opt_level=opt_level)
    return CompiledModule(jit_function=fn, backend=backend, func_name=func_name, torch_ir=None,
                          linalg_ir=text if has_outlined_flex_calls(text) else None, flex_ir=flex_ir,
                          state=state)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


@contextlib.contextmanager
def _older_objects_frozen():
    """The objects that exist when a compile starts (torch's modules alone
    are about 420k tracked objects) kept out of the cyclic GC's full
    collections for its duration: export and import allocate enough to
    trigger them, and each took 0.23-0.36 s, in about one compile in three
    (measured: causal bf16 S=1024 compiled in 0.45 s instead of 0.76 s).
    They are unfrozen after, so later collections see them as before; left
    alone when the caller froze objects or disabled the GC."""
    import gc

    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _wrap_callable(fn):
    """A plain function as an nn.Module (torch.export needs a module)."""
    import torch

    class FunctionModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fn = fn

        def forward(self, *args):
            return self.fn(*args)

    return FunctionModule()


def unalias(args):
    """`args` with every tensor that shares memory with an earlier one cloned:
    torch.export traces `f(x, x)` as one input used twice, and the compiled
    function would then ignore all but the last such argument."""
    import torch

    out, storages = [], set()
    for a in args:
        if isinstance(a, torch.Tensor) and a.numel():
            ptr = a.untyped_storage().data_ptr()
            if ptr in storages:
                a = a.clone()
                ptr = a.untyped_storage().data_ptr()
            storages.add(ptr)
        out.append(a)
    return tuple(out)


def _export_checks(ep, names, offset=0):
    from .shapes import export_checks

    if names is None:
        return None
    try:
        return export_checks(ep, names, offset)
    except Exception as e:  # an ExportedProgram layout this torch does not have
        raise FlexCompileError("export", f"cannot read the shape constraints of the exported program: "
                                         f"{type(e).__name__}: {e}") from e


def _user_input_specs(ep, example_args):
    """([(name, dtype)] of the compiled function's user arguments, or None;
    {position: value} of the example arguments torch.export specialized to
    constants (ints not marked dynamic): the function still takes them, and
    a call must pass the same values)."""
    import torch
    from torch.export.graph_signature import ConstantArgument, InputKind

    specs = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if len(specs) != len(example_args):
        return None, {}
    constants = {i: a for i, (s, a) in enumerate(zip(specs, example_args)) if isinstance(s.arg, ConstantArgument)}
    dtype = lambda a: a.dtype if isinstance(a, torch.Tensor) else (  # noqa: E731
        torch.float64 if isinstance(a, float) else torch.int64)
    return [(s.arg.name, dtype(a)) for s, a in zip(specs, example_args)], constants


def _dynamic_size():
    from ..mlir import ir

    return ir.ShapedType.get_dynamic_size()


def _mlir_to_torch_dtype(t):
    import torch

    return {
        "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
        "i1": torch.bool, "i8": torch.int8, "i32": torch.int32, "i64": torch.int64,
    }.get(str(t.element_type))


def _first_lines(e, n: int = 12) -> str:
    lines = str(e).strip().splitlines()
    s = "\n".join(lines[:n])
    return s + ("\n..." if len(lines) > n else "")
