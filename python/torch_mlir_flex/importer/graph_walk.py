"""Walking the call nodes of an exported graph module and of its submodules
(the flex_attention score_mod / mask_mod graphs among them)."""

from typing import Callable, Iterator, Tuple

from torch import fx


def call_nodes(gm: fx.GraphModule) -> Iterator[Tuple[fx.GraphModule, fx.Node]]:
    """(graph module, node) for every call_function node of ``gm`` and of its
    submodules; a list of each graph's nodes is taken first, so ``rewrite``
    callers may erase nodes they have passed."""
    for sub in gm.modules():
        if isinstance(sub, fx.GraphModule):
            for n in list(sub.graph.nodes):
                if n.op == "call_function":
                    yield sub, n


def rewrite_calls(gm: fx.GraphModule, rewrite: Callable[[fx.GraphModule, fx.Node], bool]) -> int:
    """Calls ``rewrite(sub, node)`` on every call node (it edits the node in
    place and says whether it did); recompiles the graph modules it edited and
    returns how many nodes it edited."""
    edited, touched = 0, {}
    for sub, n in call_nodes(gm):
        if rewrite(sub, n):
            edited += 1
            touched[id(sub)] = sub
    for sub in touched.values():
        sub.recompile()
    return edited
