"""Index tensors of one dtype per `index_put` / `index` call.

Advanced indexing takes int32 and int64 index tensors mixed (transformers'
create_block_mask scatters with an int64 `arange` beside int32 block
indices). The Torch dialect's index list holds one element type: torch-mlir
rejects the mix in the torch→linalg step ("operand types should have the
same type as the list contained type"). `widen_mixed_indices` converts the
int32 index tensors of such calls to int64 (the same indices).
"""

import torch
from torch import fx

_INDEXING = {
    torch.ops.aten.index_put.default, torch.ops.aten.index_put_.default,
    torch.ops.aten.index.Tensor, torch.ops.aten._unsafe_index_put.default,
    torch.ops.aten._unsafe_index.Tensor,
}


def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def widen_mixed_indices(gm: fx.GraphModule) -> int:
    n = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _INDEXING or len(node.args) < 2:
            continue
        indices = list(node.args[1])
        dtypes = {_val(i).dtype for i in indices if isinstance(_val(i), torch.Tensor)}
        if dtypes != {torch.int32, torch.int64}:
            continue
        for k, idx in enumerate(indices):
            val = _val(idx)
            if not (isinstance(val, torch.Tensor) and val.dtype == torch.int32):
                continue
            with gm.graph.inserting_before(node):
                wide = gm.graph.call_function(torch.ops.aten._to_copy.default, (idx,), {"dtype": torch.int64})
            wide.meta["val"] = val.to(torch.int64)
            indices[k] = wide
            n += 1
        node.args = (node.args[0], indices) + tuple(node.args[2:])
    if n:
        gm.recompile()
    return n
