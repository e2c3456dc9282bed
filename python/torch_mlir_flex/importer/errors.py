"""Errors raised by the flex_attention importer."""


class FlexImportError(Exception):
    """An FX graph or imported module cannot be represented by the flex IR contract.

    Raised for unsupported HOP argument layouts (other torch versions),
    modifiers with unsupported signatures or results, non-tensor captured
    values, and post-import verification failures (see ``verify.py``).
    """


import os
import re

SOURCE_CHARS = 100  # the source line of a node is cut to this many characters
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\s*$')


def _user_frame(trace: str) -> str:
    """'file.py:LINE: code' of the innermost frame of ``trace`` that is user
    code (not torch's, not generated ``<eval_with_key>`` code); else ''."""
    lines = trace.strip().splitlines()
    best = ""
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if not m or m["file"].startswith("<") or f"{os.sep}torch{os.sep}" in m["file"]:
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
        best = f"{os.path.basename(m['file'])}:{m['line']}: {code}"
    if len(best) > SOURCE_CHARS:
        best = best[:SOURCE_CHARS] + "..."
    return best


def node_where(node) -> str:
    """A short, one-line description of an FX node for error messages."""
    try:
        src = _user_frame(node.meta.get("stack_trace") or "")
        src = f" (source: {src})" if src else ""
    except Exception:  # pragma: no cover - best effort only
        src = ""
    return f"node '{node.name}' in graph{src}"
