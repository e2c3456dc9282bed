"""The importer's FX clean-ups: one ordered list, run by one loop.

``export_and_import`` runs ``CLEANUPS`` in order on the exported program
(a copy of the caller's), between ``torch.export`` and the FX import. Each
entry is a name, the step, and why it runs where it does. Three groups,
in this order:

* rewrites the re-trace of ``run_decompositions`` must not see (closure
  captures), or should not have to trace (dead BlockMask construction);
* rewrites that do exactly what the re-trace would only rename or expand,
  so that ``decompositions_change_nothing`` can skip it (~0.1-0.2 s);
* ``run_decompositions`` itself, then rewrites of what the upstream
  FxImporter cannot read, on the graph that is imported.

A new clean-up is one entry here, at the place its reason names; a
condition it runs under is tested inside its step. The importer's entry
points (``FlexFxImporter.import_*``) also strip BlockMask tensors
themselves, for graphs that do not come through ``export_and_import``.
"""

from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple

from torch.export import ExportedProgram

from .block_mask import strip_block_mask_tensors
from .closure_captures import forget_capture_constant_values, inline_scalar_constants
from .dead_code import erase_dead_code
from .decomposition_check import decompositions_change_nothing
from .errors import FlexImportError
from .factory_calls import expand_new_ones_calls
from .flat_apply_calls import inline_flat_apply_calls
from .index_dtypes import widen_mixed_indices
from .modifier_ops import explain_decomposition_failure
from .operator_aliases import retarget_operator_aliases
from .quantized_linear import rewrite_quantized_linears
from .scalar_captures import scalar_captures_to_tensors
from .symbolic_ops import retarget_symbolic_ops


@dataclass
class CleanupRun:
    """What the steps read and edit: the program (``run_decompositions``
    replaces it), the decomposition table, whether to print the graph
    (``enable_graph_printing``), and how many nodes the dead-code steps
    erased (the graph module is then recompiled once)."""

    prog: ExportedProgram
    decomposition_table: Dict[Any, Callable]
    print_graph: bool = False
    erased: int = 0


@dataclass(frozen=True)
class Cleanup:
    name: str
    run: Callable[[CleanupRun], None]
    why: str


def _on_program(step: Callable[[ExportedProgram], Any]) -> Callable[[CleanupRun], None]:
    """An entry's run that calls ``step(prog)``."""
    return lambda run: step(run.prog)


def _on_graph_module(step) -> Callable[[CleanupRun], None]:
    """An entry's run that calls ``step(prog.graph_module)``."""
    return lambda run: step(run.prog.graph_module)


def _counting_erased(step) -> Callable[[CleanupRun], None]:
    """An entry's run that calls ``step(prog.graph)`` and adds the nodes it
    erased to ``run.erased``."""
    def erase(run: CleanupRun):
        run.erased += step(run.prog.graph)

    return erase


def _recompile(run: CleanupRun):
    if run.erased:
        run.prog.graph_module.recompile()


def _decompose(run: CleanupRun):
    table = run.decomposition_table
    if table and not decompositions_change_nothing(run.prog, table):
        run.prog = run_decompositions(run.prog, table)


def _print_graph(run: CleanupRun):
    if run.print_graph:
        run.prog.graph_module.print_readable()


CLEANUPS: Tuple[Cleanup, ...] = (
    # -- before the re-trace: what it mishandles, what it need not trace ----
    Cleanup("forget_capture_constant_values", _on_program(forget_capture_constant_values),
            "before any re-trace: the real value torch recorded in a modifier-captured "
            "constant's fake tensor is replayed wrongly under vmap (offs[doc[q]] read "
            "garbage, bias[b][q] failed in setStorage); closure_captures.py"),
    Cleanup("inline_scalar_constants", _on_program(inline_scalar_constants),
            "before the re-trace: a 0-d tensor constant inside a modifier (c2[h, 2]) fails it "
            "('FunctionalTensor on its own'); aten.scalar_tensor in its place; closure_captures.py"),
    Cleanup("strip_block_mask_tensors", _counting_erased(strip_block_mask_tensors),
            "before the skip check and the re-trace: BlockMask slots the importer drops become "
            "None and the nodes computing only them are erased; block_mask.py"),
    Cleanup("erase_dead_code", _counting_erased(erase_dead_code),
            "after strip_block_mask_tensors (which leaves vmap bookkeeping and index_put_ into "
            "fresh tensors): erases what the output does not need, so the re-trace and the "
            "imported IR do not carry it; dead_code.py"),
    Cleanup("recompile", _recompile,
            "if the two steps above erased nodes: the graph module's code follows its graph "
            "before anything runs it (once for both)"),
    # -- what the re-trace would only rename or expand: done here, so that ---
    # -- decompositions_change_nothing can skip it -----------------------------
    Cleanup("retarget_operator_aliases", _on_graph_module(retarget_operator_aliases),
            "before the skip check: aten.__and__/__or__/__xor__ (masks written with &, |, ^) "
            "renamed to the aten.bitwise_* op their only kernel calls; operator_aliases.py"),
    Cleanup("inline_flat_apply_calls", _on_graph_module(inline_flat_apply_calls),
            "before the skip check: flat_apply of dynamo's ModIndex (buf[idx] in a modifier) "
            "written as the aten.index.Tensor the re-trace records; flat_apply_calls.py"),
    Cleanup("expand_new_ones_calls", _on_graph_module(expand_new_ones_calls),
            "before the skip check: new_ones (torch's noop_mask) is in the table; written as the "
            "empty_strided + full_like its decomposition records; factory_calls.py"),
    # -- the re-trace, then what the upstream FxImporter cannot read --------
    Cleanup("run_decompositions", _decompose,
            "after every rewrite above: re-traces to the post-dispatch IR the importer needs, "
            "table applied; skipped when decompositions_change_nothing proves the graph would "
            "stay the same (decomposition_check.py)"),
    Cleanup("print_graph", _print_graph,
            "with enable_graph_printing: the graph as decomposed, before the importer-only "
            "rewrites below"),
    Cleanup("rewrite_quantized_linears", _on_graph_module(rewrite_quantized_linears),
            "on the graph imported (after the re-trace, which unwraps torchao's weight "
            "subclasses into plain inner tensors; before it, our op would keep "
            "decompositions_change_nothing from skipping it): torchao's int8 / int4 "
            "weight-only linears become torch_mlir_flex::quant_matmul, imported opaque and "
            "outlined by the frontend, so the weights stay quantized; quantized_linear.py"),
    Cleanup("scalar_captures_to_tensors", _on_graph_module(scalar_captures_to_tensors),
            "on the graph imported (after the re-trace): a SymInt a modifier captures becomes a "
            "0-d int64 tensor, passed like any captured tensor; scalar_captures.py"),
    Cleanup("retarget_symbolic_ops", _on_graph_module(retarget_symbolic_ops),
            "on the graph imported: torch.sym_max/sym_min/sym_sum (dynamic sizes), which the "
            "upstream FxImporter does not map, as prim.max.int/prim.min.int/operator.add; "
            "symbolic_ops.py"),
    Cleanup("widen_mixed_indices", _on_graph_module(widen_mixed_indices),
            "on the graph imported: int32 and int64 index tensors mixed in one index/index_put "
            "(torch-mlir's index list holds one type) all int64; index_dtypes.py"),
)


def run_cleanups(prog: ExportedProgram, decomposition_table: Dict[Any, Callable], *,
                 print_graph: bool = False) -> ExportedProgram:
    """Runs ``CLEANUPS`` in order on ``prog`` (edited in place); returns the
    program to import (a new one when ``run_decompositions`` ran)."""
    run = CleanupRun(prog, decomposition_table, print_graph)
    for cleanup in CLEANUPS:
        cleanup.run(run)
    return run.prog


def run_decompositions(prog: ExportedProgram, table) -> ExportedProgram:
    """prog.run_decompositions(table); an internal failure caused by an op
    inside a flex modifier becomes a FlexImportError naming the op."""
    try:
        return prog.run_decompositions(table)
    except Exception as e:
        why = explain_decomposition_failure(prog.graph, e)
        if why is None:
            raise
        raise FlexImportError(why) from e
