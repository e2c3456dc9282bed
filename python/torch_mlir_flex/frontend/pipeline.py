"""Torch IR -> linalg-on-tensors text with flex attention outlined.

Pass lists mirror torch-mlir 20261001's
``torchdynamo-export-to-torch-backend-pipeline`` and
``torch-backend-to-linalg-on-tensors-backend-pipeline`` (expanded with
``str(PassManager.parse(...))``), minus the final
``torch-verify-linalg-on-tensors-backend-contract``, which rejects our
non-elementwise ``func.call @__flex_attention_N``.
"""

from typing import List

from torch_mlir import ir
from torch_mlir.compiler_utils import TorchMlirCompilerError, run_pipeline_with_repro_report

from .cleanup import prune_dead_torch_ops
from ..importer.custom_ops import CUSTOM_OP_HINT
from .errors import FlexFrontendError
from .fixups import widen_int32_index_tensors
from .outline import FlexCallInfo, outline_flex_calls
from .unsupported import check_random_ops, modifier_kinds
from .tm_tensor import lower_tm_tensor_ops

TORCH_BACKEND_PIPELINE = (
    "builtin.module(func.func(torch-match-quantized-custom-ops),"
    "torchdynamo-export-to-torch-backend-pipeline{ extra-library=})"
)


def _conversion_pipeline(allow_non_finites: bool) -> str:
    nf = "true" if allow_non_finites else "false"
    f = lambda p: f"func.func({p})"
    passes = [
        f("torch-restructure-non-constant-axes"),
        f("torch-fuse-quantized-ops"),
        f(f"convert-torch-to-tmtensor{{allow-non-finites={nf}}}"),
        f("canonicalize"),
        f(f"convert-torch-to-linalg{{allow-non-finites={nf}}}"),
        f("canonicalize"),
        f("convert-torch-to-scf"),
        f("convert-torch-to-arith"),
        f("convert-torch-to-tensor"),
        "convert-torch-conversion-to-mlprogram",
        f("memref-expand"),
        f("canonicalize"),
        f("resolve-shaped-type-result-dims"),
        f("cse"),
    ]
    return "builtin.module(" + ",".join(passes) + ")"


TYPE_CONVERSION_PIPELINE = (
    "builtin.module(torch-func-backend-type-conversion,"
    "func.func(canonicalize),func.func(torch-finalizing-backend-type-conversion))"
)


def _run(module, pipeline, description):
    diags = []

    def on_diag(d):
        diags.append(f"{d.location}: {d.message}")
        return True

    handler = module.context.attach_diagnostic_handler(on_diag)
    try:
        run_pipeline_with_repro_report(module, pipeline, description)
    except TorchMlirCompilerError as e:
        raise FlexFrontendError("\n".join(diags + [str(e)])) from None
    finally:
        handler.detach()


def _walk(module):
    ops = []

    def visit(op):
        ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops


def _torch_op_name(op) -> str:
    """'aten.sort.stable' for torch.aten.sort.stable or a torch.operator."""
    name = op.name
    if name == "torch.operator":
        name = ir.StringAttr(op.attributes["name"]).value
    return name[len("torch."):] if name.startswith("torch.") else name


def _tag_origins(module):
    """Wraps each torch op's location in NameLoc("torch-origin:<op>") so ops
    created by decompositions and conversion patterns (which reuse the
    location) name their source op.  Runs on the imported IR and again after
    the backend pipeline (for ops not tagged yet), so an op decomposed by
    torch-mlir (aten.nonzero -> aten.cumsum ...) is reported as the user's op.
    Locations are not printed in the emitted text."""
    for op in _walk(module):
        if op.name.startswith("torch.") and not op.name.startswith("torch.constant") \
                and _ORIGIN_MARKER not in str(op.location):
            op.location = ir.Location.name(
                "torch-origin:" + _torch_op_name(op), childLoc=op.location)


_ORIGIN_MARKER = 'loc("torch-origin:'


def _origin(op) -> str:
    loc = str(op.location)
    i = loc.find(_ORIGIN_MARKER)
    if i < 0:
        return "unknown torch op"
    j = loc.find('"', i + len(_ORIGIN_MARKER))
    return loc[i + len(_ORIGIN_MARKER):j]


# Torch ops that may legitimately survive the conversion passes: literals
# and constants are folded by the backend type conversion; list/tuple
# constructs only feed other (reported) torch ops.
_BENIGN_PREFIXES = ("torch.vtensor.literal", "torch.constant.", "torch.prim.ListConstruct",
                    "torch.prim.TupleConstruct")


def _check_after_conversion(module):
    leftovers = []
    for op in _walk(module):
        name = op.name
        if name.startswith("tm_tensor."):
            raise FlexFrontendError(
                f"op '{name}' (from {_origin(op)}) has no lowering in "
                "torch-mlir-flex's linalg backend")
        if name.startswith("torch.") and not name.startswith(_BENIGN_PREFIXES):
            leftovers.append(op)
    if leftovers:
        op = leftovers[0]
        raise FlexFrontendError(
            f"op '{_torch_op_name(op)}' ({op.name}) was not lowered to "
            f"linalg-on-tensors by torch-mlir ({len(leftovers)} torch op(s) left)")


def _check_known_ops(module):
    for op in _walk(module):
        if op.name == "torch.operator":
            name = _torch_op_name(op)
            hint = "" if name.startswith(("aten.", "prims.")) else f"; custom op: {CUSTOM_OP_HINT}"
            raise FlexFrontendError(
                f"op '{name}' (torch.operator) is not known to torch-mlir and cannot be lowered{hint}")


def _check_final(module):
    for op in _walk(module):
        if op.name.startswith(("torch.", "torch_c.", "tm_tensor.")):
            raise FlexFrontendError(f"op '{op.name}' remains after backend type conversion")
    text = str(module)
    if "!torch." in text:
        raise FlexFrontendError("torch dialect types remain after backend type conversion")


def lower_to_linalg_with_flex_outlined_module(
    module: ir.Module, allow_non_finites: bool = True
) -> List[FlexCallInfo]:
    """Lowers ``module`` in place; returns one FlexCallInfo per flex call."""
    with module.context:
        prune_dead_torch_ops(module)
        widen_int32_index_tensors(module)
        check_random_ops(module)  # before outlining: names score_mod/mask_mod
        modifiers = modifier_kinds(module)
        infos = outline_flex_calls(module)
        _check_known_ops(module)
        _tag_origins(module)
        _run(module, TORCH_BACKEND_PIPELINE, "Torch IR -> Torch backend IR (flex outlined)")
        _tag_origins(module)
        _run(module, _conversion_pipeline(allow_non_finites),
             "Torch backend IR -> linalg-on-tensors (flex outlined)")
        lower_tm_tensor_ops(module, _origin, modifiers)  # tm_tensor -> scf loops (tm_tensor/)
        _check_after_conversion(module)
        _run(module, TYPE_CONVERSION_PIPELINE, "Torch backend type conversion")
        _check_final(module)
    return infos


def lower_to_linalg_with_flex_outlined(
    module: ir.Module, allow_non_finites: bool = True
) -> str:
    """Imported Torch IR (raw or torch-backend level) -> textual
    linalg-on-tensors IR with every flex call outlined (see README.md).
    ``module`` is modified in place."""
    lower_to_linalg_with_flex_outlined_module(module, allow_non_finites)
    return module.operation.get_asm(print_generic_op_form=False)
