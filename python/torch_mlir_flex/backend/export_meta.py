"""A scoped fix for torch.export of graphs with symbolic sizes.

While tracing, torch records each intermediate's metadata, including
whether it is contiguous (`torch.fx.passes.shape_prop._extract_tensor_metadata`,
called by proxy_tensor's `set_meta`). For a view whose strides are symbolic
(a slice of a growing KV cache) that query evaluates `stride == size * ...`
on the example sizes and records it as a guard: when the example length
happens to make the view contiguous, export specializes the length to that
value ("You marked ... as dynamic but your code specialized it to be a
constant"). The recorded memory format is informational (our importer does
not read it), so during our export the query is skipped for tensors with
symbolic strides.
"""

import contextlib


def _has_symbolic_stride(t) -> bool:
    import torch

    try:
        return any(isinstance(s, torch.SymInt) and not s.node.is_constant() for s in t.stride())
    except Exception:  # sparse, nested: no strides to speak of
        return False


@contextlib.contextmanager
def symbolic_stride_metadata():
    """Within the block, tensor metadata of views with symbolic strides is
    recorded without the contiguity query (no guard on their sizes)."""
    from torch.fx.experimental import proxy_tensor

    original = proxy_tensor._extract_tensor_metadata

    def extract(result, include_contiguity=True):
        if include_contiguity and _has_symbolic_stride(result):
            include_contiguity = False
        return original(result, include_contiguity=include_contiguity)

    proxy_tensor._extract_tensor_metadata = extract
    try:
        yield
    finally:
        proxy_tensor._extract_tensor_metadata = original
