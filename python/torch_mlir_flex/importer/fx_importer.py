"""FlexFxImporter: torch_mlir's FxImporter plus complete flex_attention import.

Hooks used (no copy of upstream's importer):
* ``graph_node_importer_cls`` -> FlexGraphNodeImporter overriding the
  ``_import_hop_flex_attention`` handler (see flex_hop.py);
* entry points (import_program / import_frozen_program / import_stateless_graph)
  wrap upstream's: strip dead block-mask graphs first (block_mask.py), record
  which placeholders are constants, erase dead literals, verify (verify.py);
* ``_import_all_child_modules`` skips flex modifier submodules, which are
  imported on demand with their captures bound (modifiers.py).
"""

import copy
from typing import Any, Callable, Dict, Optional, Set, Tuple, Union

import torch
import torch.export
from torch import fx
from torch.export import ExportedProgram

from torch_mlir import ir
from torch_mlir.compiler_utils import BackendLoweringOptions, OutputType, lower_mlir_module
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_importer import FxImporter, FxImporterHooks, GraphNodeImporter

from .block_mask import flex_nodes, strip_block_mask_tensors
from .hop_layout import layout_of
from .flex_backward_hop import import_flex_attention_backward
from .flex_hop import import_flex_attention
from .cleanups import run_cleanups
from .custom_ops import custom_op_decompositions
from .direct_flex_trace import direct_flex_tracing
from .decompositions import flex_decomposition_table, with_flex_decompositions
from .modifiers import ModifierCache
from .pipeline import lower_to_torch_backend
from .state_arguments import StateArguments
from .verify import verify_flex_calls


class FlexGraphNodeImporter(GraphNodeImporter):
    """GraphNodeImporter whose flex_attention handler implements the flex IR contract."""

    def _import_hop_flex_attention(self, loc, node: fx.Node, hop):
        import_flex_attention(self, loc, node)

    def _import_hop_flex_attention_backward(self, loc, node: fx.Node, hop):
        import_flex_attention_backward(self, loc, node)

    @property
    def flex_grad_tuples(self):
        """getitem(backward call, 3) -> {j: gradient of captured tensor j}."""
        if not hasattr(self, "_flex_grad_tuples"):
            self._flex_grad_tuples = {}
        return self._flex_grad_tuples

    def _import_getitem(self, loc, node: fx.Node):
        ref, index = node.args
        if ref in self.flex_grad_tuples:
            self.bind_node_value(node, self.flex_grad_tuples[ref][index])
        elif node in self.flex_grad_tuples:
            pass  # the gradient tuple itself: its items are bound above
        else:
            super()._import_getitem(loc, node)


def _flex_modifier_targets(graph: fx.Graph) -> Set[str]:
    targets = set()
    for n in flex_nodes(graph):
        lay = layout_of(n)
        bm = n.args[lay.block_mask]
        refs = [n.args[lay.score_mod], bm[-1] if isinstance(bm, tuple) else None]
        if lay.joint is not None:
            refs.append(n.args[lay.joint])
        for a in refs:
            if isinstance(a, fx.Node) and a.op == "get_attr":
                targets.add(a.target)
    return targets


class FlexFxImporter(FxImporter):
    """FxImporter that imports ``torch.ops.higher_order.flex_attention`` completely.

    Usable with import_program, import_frozen_program, import_graph_module and
    import_stateless_graph.  After each top-level import the module's flex calls
    are checked with ``verify_flex_calls`` (disable with ``verify=False``).
    Note: like upstream's importer, importing mutates the FX graph (here: the
    BlockMask tensor slots of flex nodes are set to None and their producers
    erased).
    """

    def __init__(self, *, verify: bool = True, graph_node_importer_cls=None, **kwargs):
        cls = graph_node_importer_cls or FlexGraphNodeImporter
        if not issubclass(cls, FlexGraphNodeImporter):
            raise TypeError(
                "FlexFxImporter requires graph_node_importer_cls to subclass "
                f"FlexGraphNodeImporter, got {cls.__name__}"
            )
        super().__init__(graph_node_importer_cls=cls, **kwargs)
        self.flex_modifiers = ModifierCache(self)
        self.verify = verify
        self._flex_constants: Dict[fx.Node, torch.Tensor] = {}
        self._flex_depth = 0
        self.state_arguments: Optional[StateArguments] = None

    # ---- hooks used by flex_hop -------------------------------------------
    def flex_constant_resolver(self) -> Callable[[fx.Node], Optional[torch.Tensor]]:
        constants = self._flex_constants

        def resolve(node: fx.Node) -> Optional[torch.Tensor]:
            if node.op == "placeholder":
                return constants.get(node)
            if node.op == "get_attr":
                obj = getattr(node.graph.owning_module, node.target, None)
                if isinstance(obj, torch.Tensor):
                    return obj
            return None

        return resolve

    # ---- entry points -------------------------------------------------------
    def import_program(self, prog: ExportedProgram, **kwargs) -> ir.Operation:
        from torch.export.graph_signature import InputKind

        def run():
            strip_block_mask_tensors(prog.graph)
            by_name = {n.name: n for n in prog.graph.nodes if n.op == "placeholder"}
            for spec in prog.graph_signature.input_specs:
                node = by_name.get(getattr(spec.arg, "name", None))
                if node is None:
                    continue
                if spec.kind == InputKind.CONSTANT_TENSOR:
                    self._flex_constants[node] = prog.constants[spec.target]
                elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                    value = prog.state_dict.get(spec.target)
                    if value is None:
                        value = prog.constants.get(spec.target)
                    if value is not None:
                        self._flex_constants[node] = value
            return super(FlexFxImporter, self).import_program(prog, **kwargs)

        return self._top_level(run)

    def import_frozen_program(self, prog: ExportedProgram, *, state_as_arguments: bool = False,
                              **kwargs) -> ir.Operation:
        """`state_as_arguments`: parameters and buffers become leading
        function arguments (state_arguments.py); their keys are then in
        ``self.state_arguments.targets``."""
        def run():
            strip_block_mask_tensors(prog.graph)
            view = _WithConstantBuffers(prog)
            if state_as_arguments:
                self.state_arguments = StateArguments(prog)
                view.graph_signature = self.state_arguments.signature_view(prog.graph_signature)
            return super(FlexFxImporter, self).import_frozen_program(view, **kwargs)

        return self._top_level(run)

    def import_graph_module(self, gm: fx.GraphModule, **kwargs) -> ir.Operation:
        return self._top_level(
            lambda: super(FlexFxImporter, self).import_graph_module(gm, **kwargs)
        )

    def import_stateless_graph(self, g: fx.Graph, **kwargs) -> ir.Operation:
        def run():
            strip_block_mask_tensors(g)
            root = g.owning_module
            if root is not None:
                # Upstream's stateless entry does not import HOP children.
                self._import_all_child_modules(
                    root, kwargs.get("func_name", "main"),
                    kwargs.get("import_symbolic_shape_expressions", False),
                )
            return super(FlexFxImporter, self).import_stateless_graph(g, **kwargs)

        return self._top_level(run)

    def _import_all_child_modules(
        self, module: fx.GraphModule, parent_name: str, import_symbolic_shape_expressions: bool = False
    ):
        skip = _flex_modifier_targets(module.graph)
        for name, child in module.named_children():
            if name in skip or id(child) in self._graph_module_to_func_name:
                continue
            if isinstance(child, fx.GraphModule):
                self.import_graph_module(
                    child,
                    func_name=name,
                    func_visibility="private",
                    import_symbolic_shape_expressions=import_symbolic_shape_expressions,
                )

    def _top_level(self, run):
        self._flex_depth += 1
        try:
            func_op = run()
        finally:
            self._flex_depth -= 1
        _erase_unused_literals(func_op)
        if self._flex_depth == 0:
            self._flex_constants.clear()
            if self.verify:
                verify_flex_calls(self.module)
        return func_op


class _WithConstantBuffers:
    """A view of an ExportedProgram whose ``state_dict`` also holds the
    non-persistent buffers (rotary ``inv_freq``, BERT ``position_ids``):
    torch.export keeps those in ``constants``, where upstream's
    import_frozen_program does not look for buffers.  Every other attribute
    is the program's own."""

    def __init__(self, prog: ExportedProgram):
        self._prog = prog
        state = dict(prog.state_dict)
        for name in prog.graph_signature.inputs_to_buffers.values():
            if name not in state and name in prog.constants:
                state[name] = prog.constants[name]
        self.state_dict = state

    def __getattr__(self, name):
        return getattr(self._prog, name)


def _erase_unused_literals(func_op):
    """Erases ``torch.vtensor.literal`` ops left without uses (e.g. BlockMask
    constants that import_program binds eagerly)."""
    op = func_op.operation if hasattr(func_op, "operation") else func_op
    if not op.regions or not op.regions[0].blocks:
        return
    changed = True
    while changed:
        changed = False
        for o in list(op.regions[0].blocks[0].operations):
            if o.operation.name == "torch.vtensor.literal" and not list(o.results[0].uses):
                o.operation.erase()
                changed = True


def export_and_import(
    f: Union[torch.nn.Module, ExportedProgram],
    *args,
    output_type: Union[str, OutputType] = OutputType.RAW,
    fx_importer: Optional[FlexFxImporter] = None,
    dynamic_shapes=None,
    strict: bool = False,
    experimental_support_mutation: bool = False,
    import_symbolic_shape_expressions: bool = False,
    hooks: Optional[FxImporterHooks] = None,
    decomposition_table: Optional[Dict[Any, Callable]] = None,
    func_name: str = "main",
    enable_graph_printing: bool = False,
    verbose: bool = False,
    enable_ir_printing: bool = False,
    backend_legal_ops: Optional[list] = None,
    allow_non_finites: bool = True,
    state_as_arguments: bool = False,
    **kwargs,
) -> ir.Module:
    """Like torch_mlir.fx.export_and_import, with complete flex_attention import.

    ``experimental_support_mutation=True`` selects import_program, otherwise
    import_frozen_program.  ``f`` is exported under ``torch.no_grad()``; the
    default decompositions are ``flex_decomposition_table()``; custom ops with
    a registered decomposition are decomposed too (custom_ops.py).  For output types other than "raw" the module is
    lowered with the flex-aware pipeline (see pipeline.py).
    ``state_as_arguments`` (import_frozen_program only): parameters and
    buffers become leading function arguments instead of literals; their
    keys are in ``fx_importer.state_arguments.targets``
    (state_arguments.py)."""
    if fx_importer is None:
        context = ir.Context()
        torch_d.register_dialect(context)
        fx_importer = FlexFxImporter(context=context, hooks=hooks)
    elif not isinstance(fx_importer, FlexFxImporter):
        raise TypeError("fx_importer must be a FlexFxImporter")
    if isinstance(f, ExportedProgram):
        prog = f
    else:
        # Inference graphs (like compile()): flex_attention refuses to trace
        # a backward on CPU when parameters require grad.
        # Non-strict: flex_attention calls trace without Dynamo
        # (direct_flex_trace.py).
        with torch.no_grad(), direct_flex_tracing(active=not strict):
            prog = torch.export.export(f, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
    if decomposition_table is None:
        decomposition_table = flex_decomposition_table()
    else:
        decomposition_table = with_flex_decompositions(decomposition_table)
    decomposition_table = {**custom_op_decompositions(prog.graph_module), **decomposition_table}
    if prog is f:
        prog = _graph_copy(prog)  # importing edits the graph: keep the caller's
    # The FX clean-ups, in order (cleanups.py: each entry says why it runs where it does).
    prog = run_cleanups(prog, decomposition_table, print_graph=enable_graph_printing)
    fx_importer.imported_program = prog  # after decompositions: mutations are outputs
    if experimental_support_mutation:
        fx_importer.import_program(prog, func_name=func_name,
                                   import_symbolic_shape_expressions=import_symbolic_shape_expressions)
    else:
        fx_importer.import_frozen_program(prog, func_name=func_name, state_as_arguments=state_as_arguments,
                                          import_symbolic_shape_expressions=import_symbolic_shape_expressions)
    return _lower(fx_importer.module, output_type, verbose, enable_ir_printing, backend_legal_ops, allow_non_finites)


def _graph_copy(prog: ExportedProgram) -> ExportedProgram:
    """``prog`` with a copy of its graph module (state and constants shared).
    The copy may rename nodes (a placeholder called ``input``, as in
    nn.Linear's forward, shadows a builtin and becomes ``input_1``): the
    signature follows the new names."""
    gm = copy.deepcopy(prog.graph_module)
    renamed = {old.name: new.name for old, new in zip(prog.graph.nodes, gm.graph.nodes)
               if old.name != new.name}
    signature = copy.deepcopy(prog.graph_signature)
    for spec in list(signature.input_specs) + list(signature.output_specs):
        name = getattr(spec.arg, "name", None)
        if name in renamed:
            spec.arg.name = renamed[name]
    return ExportedProgram(
        root=gm, graph=gm.graph, graph_signature=signature,
        state_dict=prog.state_dict, range_constraints=prog.range_constraints,
        module_call_graph=prog.module_call_graph, example_inputs=prog.example_inputs,
        constants=prog.constants, verifiers=prog.verifiers)


def stateless_fx_import(
    gm: fx.GraphModule,
    output_type: Union[str, OutputType] = OutputType.RAW,
    fx_importer: Optional[FlexFxImporter] = None,
    hooks: Optional[FxImporterHooks] = None,
    model_name: str = "main",
    enable_graph_printing: bool = False,
    verbose: bool = False,
    enable_ir_printing: bool = False,
    backend_legal_ops: Optional[list] = None,
    allow_non_finites: bool = True,
) -> ir.Module:
    """Like torch_mlir.fx.stateless_fx_import (torch.compile / aot_autograd graphs)."""
    if enable_graph_printing:
        gm.print_readable()
    if fx_importer is None:
        context = ir.Context()
        torch_d.register_dialect(context)
        fx_importer = FlexFxImporter(context=context, hooks=hooks)
    fx_importer.import_stateless_graph(gm.graph, func_name=model_name)
    return _lower(fx_importer.module, output_type, verbose, enable_ir_printing, backend_legal_ops, allow_non_finites)


def _lower(module, output_type, verbose, enable_ir_printing, backend_legal_ops, allow_non_finites):
    output_type = OutputType.get(output_type)
    if verbose:
        print("\n====================\nTorchFX IR")
        print(module)
    if output_type == OutputType.RAW:
        return module
    lower_to_torch_backend(
        module, backend_legal_ops=backend_legal_ops, enable_ir_printing=enable_ir_printing
    )
    return lower_mlir_module(
        verbose, output_type, module, BackendLoweringOptions(allow_non_finites=allow_non_finites)
    )
