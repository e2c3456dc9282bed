"""What to do when torch.export refuses the dynamic sizes that Dynamo's
symbols imply: compile with those sizes fixed to the example's values,
and tell Dynamo, so that its guards recompile the graph for other sizes.

torch.export with `Dim.DYNAMIC` fails ("Constraints violated
(L['args'][0].size()[2])! ... your code specialized it to be a constant")
when its own trace pins a size that Dynamo's trace left symbolic (a
library function that takes another path under export, an `int()` of a
size). `refusal(error)` recognises that failure and `refused_positions`
reads which arguments and dims it names; `guard_equal_to_examples` adds
`size == example` guards to Dynamo's shape environment for their symbols
(as Inductor adds its guards while it compiles), so a call with another
size fails the guard and Dynamo recompiles instead of handing our
specialized function sizes it was not compiled for. The other symbols
stay dynamic.

A dynamic size whose example is 0 or 1 (a block count `(s0 + 127) //
128` of a short sequence) is one torch.export always fixes ("0/1
specialized"): graph_inputs leaves it static and `fix_small_sizes`
guards it, so that a sequence with more blocks recompiles.

torch.export may also narrow a dynamic size's range without refusing it:
a guard its trace adds (whether `ceil(L / 128)` is 1, in a block table
computed from a mask) becomes the range [2, 128] of L in the exported
program, where Dynamo's symbol has [2, inf]. `guard_export_ranges` adds
the exported ranges to Dynamo's guards, so that a call outside them
recompiles (one compilation per range) instead of reaching a function
that refuses its sizes (backend.errors.FlexRangeError).

Likewise a Python float Dynamo made dynamic (an attribute such as
`self.scaling` that differed in an earlier model sharing the frame) is
passed as a 0-d tensor and read with `.item()`; where an op needs a
number (`scaled_dot_product_attention(scale=...)`) torch.export fails on
a data-dependent guard. `pin_input_items` puts the example's value in
the graph instead, with a Dynamo guard on it.
"""

import re
from typing import Iterable, List, Optional, Tuple

_VIOLATED = re.compile(r"Constraints violated \((.*?)\)!")
_SOURCE = re.compile(r"\['args'\]\[(\d+)\](?:\.size\(\)\[(\d+)\]|\.shape\[(\d+)\])?")


def refusal(error) -> Optional[str]:
    """The message of torch.export's constraint violation behind `error`
    (a FlexCompileError of the export stage and its causes), or None when
    export failed for another reason."""
    from torch._dynamo.exc import UserError, UserErrorType
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    seen = set()
    e = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ConstraintViolationError) or \
                (isinstance(e, UserError) and e.error_type == UserErrorType.CONSTRAINT_VIOLATION):
            return str(e)
        e = e.__cause__ or e.__context__
    return None


def refused_positions(message: str) -> List[Tuple[int, Optional[int]]]:
    """(argument k, dim d) of each size the message names as violated (d
    None for an int argument); every size it mentions when it has no
    "Constraints violated (...)" list."""
    head = _VIOLATED.search(message)
    text = head.group(1) if head else message
    out = []
    for m in _SOURCE.finditer(text):
        d = m.group(2) or m.group(3)
        pos = (int(m.group(1)), None if d is None else int(d))
        if pos not in out:
            out.append(pos)
    return out


def constraint_lines(message: str) -> str:
    """The lines of the message that say what was violated, one string."""
    lines = [ln.strip()[2:] for ln in message.splitlines() if ln.strip().startswith("- ")]
    head = _VIOLATED.search(message)
    return "; ".join(lines) if lines else (head.group(0) if head else message.splitlines()[0])


def guard_equal_to_examples(sym_ints: Iterable) -> bool:
    """Adds `size == its example value` guards for these SymInts of
    Dynamo's to its shape environment; False (nothing added) when the
    environment no longer takes guards (a backward graph compiled after
    Dynamo built the frame's guards)."""
    sym_ints = list(sym_ints)
    envs = {id(s.node.shape_env): s.node.shape_env for s in sym_ints}
    if not sym_ints or any(env is None or getattr(env, "frozen", False) for env in envs.values()):
        return False
    import torch

    for s in sym_ints:
        # guard_int / guard_float: records Eq(symbol, hint) as a guard of the frame
        float(s) if isinstance(s, torch.SymFloat) else int(s)
    return True


def guard_export_ranges(ranges, fake_shapes) -> List[str]:
    """Adds `lo <= size <= hi` guards to Dynamo's shape environment for the
    exported program's `ranges` ([(argument k, dim d, lo, hi)], hi None:
    unbounded) that its symbols do not already imply; `fake_shapes[k]`:
    Dynamo's sizes of argument k. The guards added, as text; those it
    could not add (the environment is final: a backward graph) start with
    "not guarded: "."""
    import torch
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    done = []
    for k, d, lo, hi in ranges:
        shape = fake_shapes[k] if 0 <= k < len(fake_shapes) else None
        size = shape[d] if shape is not None and d < len(shape) else None
        if not isinstance(size, torch.SymInt):
            continue
        env = size.node.shape_env
        for bound, cond, text in ((lo, lambda: size >= lo, f"{size.node.expr} >= {lo}"),
                                  (hi, lambda: size <= hi, f"{size.node.expr} <= {hi}")):
            if bound is None or statically_known_true(cond()):
                continue
            if env is None or getattr(env, "frozen", False):
                done.append("not guarded: " + text)
                continue
            bool(cond())  # guard_bool: records the comparison as a guard of the frame
            done.append(text)
    return done


def fix_small_sizes(sizes) -> bool:
    """Makes Dynamo's SymInts `sizes` (dynamic sizes whose example is 0 or
    1, which torch.export fixes) equal to their examples for the frame:
    already implied by its guards (a backward graph, whose sizes the
    forward's guards fixed), or guarded now. False when a size is neither
    implied nor can be guarded (the environment is final)."""
    import sympy

    loose = []
    for s in sizes:
        env, expr = s.node.shape_env, s.node.expr
        implied = env is not None and env._maybe_evaluate_static(sympy.Eq(expr, int(s.node.hint)))
        if not (implied is not None and bool(implied)):
            loose.append(s)
    return not loose or guard_equal_to_examples(loose)


def data_dependent(error) -> bool:
    """Whether torch.export failed on a guard over a value it cannot know
    while tracing (an `.item()` of an input: a Python float that Dynamo
    made dynamic and passes as a 0-d tensor, used where an op needs a
    number, as `scaled_dot_product_attention(scale=...)`)."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    seen = set()
    e = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, GuardOnDataDependentSymNode):
            return True
        e = e.__cause__ or e.__context__
    return False


def pin_input_items(gm):
    """A copy of Dynamo's graph `gm` in which each `.item()` of a graph
    input whose example value Dynamo knows (a backed SymFloat or SymInt)
    is that value, with a Dynamo guard on it (the frame recompiles for
    another value); and the values pinned, {node name: value}. ({}, None)
    when there is none or Dynamo's guards are final."""
    import copy

    import torch
    from torch.fx.node import map_aggregate

    from .graph_inputs import _node_value

    def pinnable(n):
        v = _node_value(n)
        return (n.op == "call_method" and n.target == "item" or n.target is torch.ops.aten.item.default) \
            and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder" \
            and isinstance(v, (torch.SymFloat, torch.SymInt)) and v.node.hint is not None

    examples = {n.name: _node_value(n) for n in gm.graph.nodes if pinnable(n)}
    if not examples or not guard_equal_to_examples(examples.values()):
        return None, {}
    gm = copy.copy(gm)
    gm.graph = copy.deepcopy(gm.graph)
    pinned = {}
    for n in list(gm.graph.nodes):
        if n.name not in examples:
            continue
        v = examples[n.name]
        value = float(v.node.hint) if isinstance(v, torch.SymFloat) else int(v.node.hint)
        swap = lambda a: value if a is n else a  # noqa: E731
        for user in list(n.users):
            user.args = map_aggregate(user.args, swap)
            user.kwargs = map_aggregate(user.kwargs, swap)
        gm.graph.erase_node(n)
        pinned[n.name] = value
    gm.recompile()
    return gm, pinned
