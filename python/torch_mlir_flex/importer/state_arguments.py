"""Parameters and buffers as function arguments instead of literals.

torch-mlir's `import_frozen_program` replaces every parameter, buffer and
lifted constant placeholder by its tensor (a `torch.vtensor.literal`), so a
model's weights end up in the module: compile time and memory grow with
their bytes, and the compiled code holds one checkpoint. With
`state_as_arguments`, parameters and buffers stay placeholders and become
leading arguments of the imported function, in placeholder order
(`StateArguments.targets` names them as the program's state_dict/constants
keys, for the caller to pass the tensors at run time).

Kept as literals: lifted tensor constants (values written in the model's
code, e.g. `torch.tensor([...])`), and state that a flex_attention modifier
captures (score_mod/mask_mod buffers: ALiBi slopes, bias tables), whose
values the block classification of masks reads at compile time.
"""

from typing import Dict, List

from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from .block_mask import is_flex_node
from .hop_layout import layout_of

# flex_attention HOP arguments 7 and 8: the score_mod and mask_mod buffers.


def modifier_captures(graph: fx.Graph) -> set:
    """Names of the placeholders a flex_attention modifier reads."""
    names = set()
    for node in graph.nodes:
        if not is_flex_node(node):
            continue
        lay = layout_of(node)
        for i in (lay.score_bufs, lay.mask_bufs):
            if i < len(node.args):
                for a in node.args[i] or ():
                    if isinstance(a, fx.Node) and a.op == "placeholder":
                        names.add(a.name)
    return names


class StateArguments:
    """Which state placeholders of `prog` stay arguments, and a view of the
    program for import_frozen_program that freezes only the others."""

    def __init__(self, prog: ExportedProgram):
        captured = modifier_captures(prog.graph)
        kinds = {s.arg.name: s for s in prog.graph_signature.input_specs if hasattr(s.arg, "name")}
        self.names: List[str] = []  # placeholder names, in argument order
        self.targets: List[str] = []  # state_dict / constants keys
        for node in prog.graph.nodes:
            if node.op != "placeholder":
                continue
            spec = kinds.get(node.name)
            if spec is None or spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER):
                continue
            if node.name in captured:
                continue
            self.names.append(node.name)
            self.targets.append(spec.target)

    def signature_view(self, sig):
        return _SignatureView(sig, set(self.names))


class _SignatureView:
    """A graph signature whose parameter/buffer maps omit the kept names."""

    def __init__(self, sig, kept: set):
        self._sig = sig
        self.inputs_to_parameters: Dict[str, str] = {
            k: v for k, v in sig.inputs_to_parameters.items() if k not in kept}
        self.inputs_to_buffers: Dict[str, str] = {
            k: v for k, v in sig.inputs_to_buffers.items() if k not in kept}

    def __getattr__(self, name):
        return getattr(self._sig, name)
