"""A static-shape decomposition of transformers' MoE custom op
``transformers::grouped_mm_fallback`` (its CPU experts matmul), registered
only while `compile` exports (see `patches`).

The op multiplies consecutive row groups of `input` [S, K] (sorted by
expert; group g ends at offs[g]) by weight[g] [K, N]; rows past offs[-1] stay
0. Its kernel loops over `offs.tolist()`, which neither exports nor lowers.
Here each row finds its group by counting the group ends at or before it and
is multiplied by its gathered expert matrix: same result, no data-dependent
shapes (an [S, K, N] gather, fine for the sizes it is used with here).
"""

import contextlib

import torch


def grouped_mm_dense(input, weight, offs):
    rows = torch.arange(input.shape[0], device=input.device)
    group = (rows.unsqueeze(1) >= offs.unsqueeze(0)).sum(dim=1).clamp(max=weight.shape[0] - 1)
    out = torch.bmm(input.unsqueeze(1), weight[group]).squeeze(1)
    return torch.where((rows < offs[-1]).unsqueeze(1), out, torch.zeros((), dtype=out.dtype))


def _grouped_mm_op():
    ns = getattr(torch.ops, "transformers", None)
    try:
        return ns.grouped_mm_fallback.default
    except AttributeError:  # transformers' MoE integration not loaded: nothing to decompose
        return None


@contextlib.contextmanager
def grouped_mm_decomposition():
    """Register `grouped_mm_dense` for the op (found by the importer's custom
    op decompositions) for the duration of the block."""
    from torch._decomp import global_decomposition_table

    op = _grouped_mm_op()
    table = global_decomposition_table["post_autograd"]
    if op is None or op in table:
        yield
        return
    table[op] = grouped_mm_dense
    try:
        yield
    finally:
        table.pop(op, None)
