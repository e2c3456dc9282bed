"""`torch.compile(model, backend="torch_mlir_flex")`: our pipeline as a
TorchDynamo backend.

Installed packages register it through the `torch_dynamo_backends` entry
point (pyproject.toml); from a source checkout call `register()` once.
Each graph that Dynamo captures (an `fx.GraphModule`, flex_attention calls
included as higher-order ops) goes through `torch.export` and the stages of
`backend.compile` (import, to_linalg, materialize, lower + JIT). Graphs the
pipeline cannot take run in eager PyTorch, with a warning on the
`torch_mlir_flex.dynamo` logger that names the reason.

Inference only: a graph that would need autograd (grad mode on and an
input that requires grad) runs eagerly. Shapes are static: when Dynamo
marks sizes dynamic (after a shape change) the graph runs eagerly; pass
`dynamic=False` to torch.compile to get one compilation per shape instead.

`stats` counts graphs seen, compiled and run eagerly in this process.
"""

import collections
from typing import Callable, List, Optional

from . import _load_order  # noqa: F401  (our LLVM first)
from .log import get_logger

NAME = "torch_mlir_flex"

log = get_logger("dynamo")
stats = collections.Counter()


def flex_backend(gm, example_inputs: List, backend: Optional[str] = None) -> Callable:
    """The Dynamo backend: returns a callable for `gm`, ours or `gm.forward`."""
    from .backend.compile import FlexCompileError, compile
    from .backend.pipelines import DEFAULT_BACKEND

    stats["graphs"] += 1
    reason = unsupported_reason(example_inputs)
    if reason is None:
        try:
            compiled = compile(gm, tuple(example_inputs), backend=backend or DEFAULT_BACKEND,
                               func_name=f"graph{stats['graphs'] - 1}")
            reason = _output_mismatch(compiled)
        except FlexCompileError as e:
            reason = str(e)
        except Exception as e:  # a bug of ours must not break the user's model
            reason = f"internal error: {type(e).__name__}: {e}"
    if reason is not None:
        stats["eager"] += 1
        log.warning("torch_mlir_flex: running a captured graph (%d ops) in eager PyTorch: %s",
                    _num_ops(gm), reason)
        return gm.forward
    stats["compiled"] += 1
    return compiled


def unsupported_reason(example_inputs) -> Optional[str]:
    """Why Dynamo's inputs cannot go through our pipeline, or None."""
    import torch

    for i, x in enumerate(example_inputs):
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) or (
                isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape)):
            return (f"input {i} has a dynamic size (Dynamo marked shapes dynamic); "
                    "use torch.compile(..., dynamic=False) to compile each shape")
        if not isinstance(x, torch.Tensor):
            return f"input {i} is a {type(x).__name__}; only tensor inputs are supported"
        if torch.is_grad_enabled() and x.requires_grad:
            return (f"input {i} requires grad and grad mode is on; the backend is "
                    "inference only (run under torch.no_grad() or torch.inference_mode())")
    return None


def _output_mismatch(compiled) -> Optional[str]:
    """Export may add outputs (mutated inputs or buffers); we only return
    user outputs, so such graphs run eagerly."""
    from torch.export.graph_signature import OutputKind

    kinds = {s.kind for s in compiled.exported_program.graph_signature.output_specs}
    extra = kinds - {OutputKind.USER_OUTPUT}
    if extra:
        return "the graph mutates its inputs or buffers (" + ", ".join(sorted(k.name for k in extra)) + ")"
    if compiled._out_spec is None or compiled._out_spec.num_leaves != len(compiled.jit_function.result_types):
        return "its outputs are not all tensors computed by the graph"
    return None


def _num_ops(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def register() -> None:
    """Makes backend=NAME available when the entry point is not installed
    (e.g. PYTHONPATH=python in a source checkout); no-op otherwise."""
    from torch._dynamo.backends import registry

    registry._lazy_import()  # entry points first, so both paths agree
    if NAME not in registry._BACKENDS:
        registry.register_backend(flex_backend, name=NAME)
