"""`torch.compile(model, backend="torch_mlir_flex")`: our pipeline as a
TorchDynamo backend.

Installed packages register it through the `torch_dynamo_backends` entry
point (pyproject.toml); from a source checkout call `register()` once.
Each graph that Dynamo captures (an `fx.GraphModule`, flex_attention calls
included as higher-order ops) goes through `torch.export` and the stages of
`backend.compile` (import, to_linalg, materialize, lower + JIT). Graphs the
pipeline cannot take run in eager PyTorch, with a warning on the
`torch_mlir_flex.dynamo` logger that names the reason. torch.compile's
`mode` and `options` reach `flex_backend` (backend_args.py).

A graph that needs autograd (grad mode on and an input that requires
grad) goes through AOTAutograd: its forward and backward graphs are
compiled here too (training.py), flex_attention's backward included
(device_check.py lets Dynamo trace it on CPU for this backend). So does
a graph whose inputs include tensor subclasses (torchao's quantized
weights): AOTAutograd passes their inner tensors (`has_subclass_inputs`). Dynamic shapes (Dynamo's automatic
dynamic after a shape change, `dynamic=True`, `mark_dynamic`) compile once
for the range of sizes (graph_inputs.py); sizes torch.export refuses to
keep dynamic, and Python floats Dynamo made dynamic where an op needs a
number, are compiled at the example's values, with Dynamo guards
(specialize.py), never left to eager. Graphs that update inputs in
place (a KV cache's `index_copy_`) write the new values into the caller's
tensors (backend/mutations.py). What a graph cannot be compiled for is
decided from its exported program, before any lowering. A call whose
sizes give a temporary larger than the process can have (a
FlexMemoryError, raised before anything runs: SDPA's scores at the
8192-token warmup of transformers' continuous batching) runs that call in
eager PyTorch, with a warning, as a graph refused for it when compiling
does. SDPA calls become flex_attention calls first (sdpa_as_flex.py).

`stats` counts graphs seen, compiled and run eagerly in this process, and
(`eager_calls`) calls run eagerly.
"""

import collections
from typing import Callable, List, Optional

from .. import _load_order  # noqa: F401  (our LLVM first)
from ..log import get_logger
from . import device_check
from .graph_inputs import _node_value

NAME = "torch_mlir_flex"

log = get_logger("dynamo")
stats = collections.Counter()


def flex_backend(gm, example_inputs: List, backend: Optional[str] = None,
                 options: Optional[dict] = None, mode: Optional[str] = None, **other) -> Callable:
    """The Dynamo backend: returns a callable for `gm`, ours or `gm.forward`.

    Takes what `torch.compile(fn, backend="torch_mlir_flex", mode=...,
    options=...)` passes a registered backend (backend_args.py):
    `options={"backend": "reference"}` picks the lowering pipeline
    (default: the tiled one), `options={"opt_level": 0}` the JIT's LLVM
    level (0-3, default 2); Inductor's options and every `mode` ("default",
    "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs": CUDA
    graphs and autotuning) are accepted and ignored, with a DEBUG record.
    An unknown mode or option raises ValueError, as torch does for
    Inductor. Keywords a later torch may add are ignored (DEBUG)."""
    from .backend_args import parse

    for key in sorted(other):
        log.debug("torch_mlir_flex: backend argument %s=%r ignored", key, other[key])
    args = parse(mode, options, backend)
    stats["graphs"] += 1
    from .sdpa_regions import prepare

    # SDPA calls -> flex_attention (sdpa_as_flex.py; in checkpointed layers
    # and under autocast too: sdpa_regions.py), before export and AOTAutograd
    prepare(gm)
    if needs_autograd(example_inputs):
        from .training import aot_backend

        return aot_backend(gm, example_inputs, args.pipeline, args.opt_level)
    if has_subclass_inputs(example_inputs):
        from .training import aot_backend

        try:
            return aot_backend(gm, example_inputs, args.pipeline, args.opt_level)
        except Exception as e:  # a subclass AOTAutograd cannot unwrap: the user's model must still run
            stats["eager"] += 1
            log.warning("torch_mlir_flex: running a captured graph (%d ops) in eager PyTorch: AOTAutograd "
                        "cannot unwrap its tensor-subclass inputs: %s: %s", _num_ops(gm), type(e).__name__,
                        str(e).splitlines()[0] if str(e) else "")
            return gm.forward
    return compile_graph(gm, example_inputs, args.pipeline, f"graph{stats['graphs'] - 1}",
                         opt_level=args.opt_level)


def needs_autograd(example_inputs) -> bool:
    import torch

    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


def has_subclass_inputs(example_inputs) -> bool:
    """A tensor subclass among the inputs (a torchao quantized weight, which
    Dynamo passes as the subclass itself): AOTAutograd then hands us a graph
    of its inner tensors (qdata, scales), and unwraps the model's subclass
    at each call (no copy)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return any(is_traceable_wrapper_subclass(x) for x in example_inputs)


def compile_graph(gm, example_inputs: List, backend: Optional[str], func_name: str,
                  kind: str = "compiled", keep_strides: bool = False, opt_level: int = 2) -> Callable:
    """Our compiled function for `gm`, or `gm.forward` with a warning that
    names the reason; `stats[kind]` or `stats["eager"]` counts it.
    `keep_strides`: export with the examples' strides (AOTAutograd's
    graphs view tensors whose layout the forward fixed, e.g. a flex output
    in its query's stride order) instead of contiguous copies."""
    from ..backend.compile import FlexCompileError

    import torch

    from .graph_inputs import GraphInputs, GraphOutputs, UnsupportedInputs

    reason = unsupported_reason(example_inputs)
    if reason is None:
        try:
            inputs = GraphInputs(gm, example_inputs)
            outputs = GraphOutputs(gm, inputs)
            if not _has_tensor_ops(gm):
                stats["python"] += 1  # arithmetic on sizes only: nothing to compile
                return gm.forward
            # Contiguous examples: the compiled function takes contiguous
            # tensors (the call copies others), and export would read a
            # view's strides as relations between its symbolic sizes (a
            # sliding-window cache slice: "specialized to a constant").
            examples = tuple(x.contiguous() if isinstance(x, torch.Tensor) and not keep_strides else x
                             for x in inputs.examples)
            compiled, dynamic = _compile_specializing_refused(outputs.tensor_graph(gm), examples, inputs,
                                                              backend, func_name, opt_level)
            if dynamic:
                stats["dynamic"] += 1
            if not (inputs.is_identity and outputs.all_tensors):
                compiled = _ArgumentsOf(compiled, inputs, outputs)
            compiled = _EagerWhenTooLarge(compiled, gm)
        except UnsupportedInputs as e:
            reason = str(e)
        except FlexCompileError as e:
            reason = str(e)
        except Exception as e:  # a bug of ours must not break the user's model
            reason = f"internal error: {type(e).__name__}: {e}"
    if reason is not None:
        stats["eager"] += 1
        log.warning("torch_mlir_flex: running a captured graph (%d ops) in eager PyTorch: %s",
                    _num_ops(gm), reason)
        return gm.forward
    stats[kind] += 1
    return compiled


def _compile_specializing_refused(graph, examples, inputs, backend, func_name, opt_level):
    """(compiled function, whether a size stays dynamic) for Dynamo's
    `graph`. When torch.export refuses dynamic sizes (specialize.py), the
    sizes it names are fixed to the example's, with Dynamo guards for them,
    and the export is retried; likewise, once, the `.item()`s of dynamic
    Python floats when export fails on a data-dependent guard. Each retry
    is logged at INFO with what export refused."""
    from ..backend.compile import FlexCompileError, compile
    from ..backend.pipelines import DEFAULT_BACKEND

    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from . import specialize

    static, pinned = set(), None
    module = inputs.module(graph)
    if inputs.is_dynamic and not specialize.fix_small_sizes(inputs.small_sizes):
        raise FlexCompileError("export", "sizes of 0 or 1 that torch.export fixes are dynamic in Dynamo's graph "
                                         "and its guards are final: " +
                               ", ".join(str(s.node.expr) for s in inputs.small_sizes))
    while True:
        dynamic = inputs.dynamic_shapes(static) if inputs.is_dynamic else None
        try:
            # Outside Dynamo's tracing context: torch.export would otherwise
            # trace in Dynamo's fake mode and add guards on our wrapper's
            # arguments to the frame's shape environment.
            # AOTAutograd calls its compilers with Dynamo's fake mode active.
            with torch._guards.tracing(None), unset_fake_temporarily():
                compiled = compile(module, examples, backend=backend or DEFAULT_BACKEND,
                                   func_name=func_name, dynamic_shapes=dynamic, opt_level=opt_level,
                                   exported_check=_check_outputs)
            guards = specialize.guard_export_ranges(compiled.input_ranges, inputs.fake_shapes)
            if guards:
                stats["narrowed"] += 1
                log.info("torch_mlir_flex: %s: torch.export narrowed the range of dynamic sizes; "
                         "guards for Dynamo (it recompiles outside them): %s", func_name, ", ".join(guards))
            return compiled, dynamic is not None
        except FlexCompileError as e:
            if pinned is None and specialize.data_dependent(e):
                pinned_graph, pinned = specialize.pin_input_items(graph)
                if pinned_graph is None:
                    raise
                module = inputs.module(pinned_graph)
                stats["specialized"] += 1
                log.info("torch_mlir_flex: %s: torch.export cannot trace a dynamic Python number (%s); "
                         "compiling with %s fixed to the example's values (Dynamo recompiles for others)",
                         func_name, str(e).splitlines()[0],
                         ", ".join(f"{k}={v!r}" for k, v in pinned.items()))
                continue
            message = specialize.refusal(e) if dynamic is not None else None
            if message is None:
                raise
            named = inputs.symbols_at(specialize.refused_positions(message)) - static
            fixed = named or set(inputs.symbols) - static  # unreadable: all of them
            if not fixed or not specialize.guard_equal_to_examples(inputs.sym_ints[s] for s in fixed):
                raise
            static |= fixed
            stats["specialized"] += 1
            log.info("torch_mlir_flex: %s: torch.export refused dynamic sizes (%s); compiling with "
                     "%s fixed to the example's values (Dynamo recompiles for others)", func_name,
                     specialize.constraint_lines(message),
                     ", ".join(f"{s}={int(inputs.sym_ints[s].node.hint)}" for s in sorted(fixed, key=str)))


def unsupported_reason(example_inputs) -> Optional[str]:
    """Why Dynamo's inputs cannot go through our pipeline, or None."""
    import torch

    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt):
            continue  # a size (graph_inputs.py)
        if not isinstance(x, torch.Tensor):
            return f"input {i} is a {type(x).__name__}; only tensor inputs are supported"
        if type(x) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) and \
                not isinstance(x, torch._subclasses.FakeTensor):
            return (f"input {i} is a tensor subclass ({type(x).__name__}); only plain tensors "
                    "are supported")
    return None


def _check_outputs(ep) -> None:
    """Refuses, before lowering, a graph whose outputs are not all tensors
    (a size, None) or that returns an input itself: the compiled function
    returns new tensors only."""
    import torch
    from torch.export.graph_signature import OutputKind

    from ..backend.compile import FlexCompileError

    out = next(n for n in ep.graph.nodes if n.op == "output")
    user = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    values = [a for a, s in zip(out.args[0], ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    for i, (spec, v) in enumerate(zip(user, values)):
        val = getattr(v, "meta", {}).get("val") if isinstance(v, torch.fx.Node) else v
        if not isinstance(val, torch.Tensor):
            raise FlexCompileError("export", f"output {i} of the graph is a {type(val).__name__} "
                                             f"({spec.arg}), not a tensor")
        if isinstance(v, torch.fx.Node) and v.op == "placeholder":
            raise FlexCompileError("export", f"output {i} of the graph is its input {v.name} itself")


class _ArgumentsOf:
    """Dynamo's calls pass sizes and specialized ints as graph inputs; ours
    take the tensors and dynamic ints alone (graph_inputs.py)."""

    def __init__(self, compiled, inputs, outputs):
        self.compiled = compiled
        self.inputs = inputs
        self.outputs = outputs

    def __call__(self, *args):
        args = self.inputs.select(args)
        res = self.compiled(*args)
        if self.outputs.all_tensors:
            return res
        return self.outputs.merge(res, args)


class _EagerWhenTooLarge:
    """Runs a call in eager PyTorch when ours refuses it for a temporary
    larger than the process can have (FlexMemoryError: raised by the shape
    checks, before the compiled code runs or writes anything), as torch's
    kernels may not materialise it (SDPA's CPU flash kernel tiles), or
    for a size outside the range torch.export narrowed where Dynamo could
    not be given a guard for it (FlexRangeError: a backward graph)."""

    def __init__(self, compiled, gm):
        from ..backend.errors import FlexMemoryError, FlexRangeError

        self.compiled = compiled
        self.gm = gm
        self.error = (FlexMemoryError, FlexRangeError)

    def __call__(self, *args):
        try:
            return self.compiled(*args)
        except self.error as e:
            stats["eager_calls"] += 1
            log.warning("torch_mlir_flex: running this call of a captured graph (%d ops) in eager "
                        "PyTorch: %s", _num_ops(self.gm), e)
            return self.gm.forward(*args)


def _has_tensor_ops(gm) -> bool:
    import torch

    return any(n.op in ("call_function", "call_method", "call_module")
               and isinstance(_node_value(n), torch.Tensor) for n in gm.graph.nodes)


def _num_ops(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def register() -> None:
    """Makes backend=NAME available when the entry point is not installed
    (e.g. PYTHONPATH=python in a source checkout); no-op otherwise."""
    from torch._dynamo.backends import registry

    registry._lazy_import()  # entry points first, so both paths agree
    if NAME not in registry._BACKENDS:
        registry.register_backend(flex_backend, name=NAME)


# Both ways in (the entry point, register()) import this module first.
device_check.install()
from . import traceable_block_mask  # noqa: E402  (one graph for transformers' flex masks)
traceable_block_mask.install()
from . import paged_cache_update  # noqa: E402  (one graph per step of transformers' paged cache)
paged_cache_update.install()
from . import broadcast_masks  # noqa: E402  (create_block_mask traced without vmap)
broadcast_masks.install()
