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
    for s in sym_ints:
        int(s)  # guard_int: records Eq(symbol, hint) as a guard of the frame
    return True
