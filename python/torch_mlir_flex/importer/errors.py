"""Errors raised by the flex_attention importer."""


class FlexImportError(Exception):
    """An FX graph or imported module cannot be represented by the flex IR contract.

    Raised for unsupported HOP argument layouts (other torch versions),
    modifiers with unsupported signatures or results, non-tensor captured
    values, and post-import verification failures (see ``verify.py``).
    """


def node_where(node) -> str:
    """A short human readable description of an FX node for error messages."""
    try:
        trace = node.meta.get("stack_trace") or ""
        last = [line.strip() for line in trace.strip().splitlines() if line.strip()]
        src = f" (source: {last[-1]})" if last else ""
    except Exception:  # pragma: no cover - best effort only
        src = ""
    return f"node '{node.name}' in graph{src}"
