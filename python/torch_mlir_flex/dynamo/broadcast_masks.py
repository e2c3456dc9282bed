"""A cheaper trace of `create_block_mask` for our backend: the dense mask
by broadcasting instead of four nested vmaps.

`create_block_mask` evaluates the mask_mod at every (b, h, q_idx, kv_idx)
through `create_mask`, which vmaps it over the four indices. While Dynamo
traces a training frame for our backend (traceable_block_mask.py makes
transformers' masks part of the model's graph), Dynamo traces those vmaps
too: 2.4 s of a 4-layer Llama's 9 s trace on the shared 2-core host at
load 7 (a single `create_block_mask`), where the four flex_attention calls
took 1.5 s. `install()` wraps torch's `create_mask`: in that case only, the
mask_mod is called once on index tensors shaped to broadcast,
`b` [B,1,1,1], `h` [1,H,1,1], `q_idx` [1,1,Q,1], `kv_idx` [1,1,1,KV], and
its result is broadcast to [B, H, Q, KV]. A mask_mod made of tensor
operations and indexing (transformers' causal, sliding-window, chunked,
padding and packed-sequence masks and their `and_masks` / `or_masks`;
torch's examples: document ids, prefix lengths) gives the same booleans
as under vmap: an elementwise operation on broadcast operands is the
operation at each point, and `tensor[b, kv_idx]` with broadcast index
tensors reads the element of each point. Python control flow on the
indices fails under vmap as it does here. Eager calls, inductor and other
backends, and inference frames, keep torch's function;
`TORCH_MLIR_FLEX_VMAP_MASKS=1` keeps it for ours too.
"""

import os

ENV = "TORCH_MLIR_FLEX_VMAP_MASKS"

_installed = None  # torch's create_mask once wrapped


def broadcast_mask(mask_mod, B, H, Q_LEN, KV_LEN, device):
    """[B, H, Q_LEN, KV_LEN] booleans: mask_mod on broadcast index tensors."""
    import torch

    B, H = B or 1, H or 1
    b = torch.arange(B, device=device).view(B, 1, 1, 1)
    h = torch.arange(H, device=device).view(1, H, 1, 1)
    m = torch.arange(Q_LEN, device=device).view(1, 1, Q_LEN, 1)
    n = torch.arange(KV_LEN, device=device).view(1, 1, 1, KV_LEN)
    out = mask_mod(b, h, m, n)
    return torch.broadcast_to(out, (B, H, Q_LEN, KV_LEN)).contiguous()


def install() -> None:
    """Wraps torch's `create_mask` (idempotent)."""
    global _installed
    import torch
    import torch.nn.attention.flex_attention as fa

    from .device_check import _tracing_for_us

    if _installed is not None or os.environ.get(ENV, "") == "1":
        return
    original = fa.create_mask
    ours = torch._dynamo.assume_constant_result(_tracing_for_us)

    def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
        if torch.compiler.is_compiling() and ours() and torch.is_grad_enabled() and device is not None \
                and fa._get_mod_type(mod_fn) == fa._ModificationType.MASK_MOD:
            return broadcast_mask(mod_fn, B, H, Q_LEN, KV_LEN, device)
        return original(mod_fn, B, H, Q_LEN, KV_LEN, device)

    create_mask.__wrapped__ = original
    fa.create_mask = create_mask
    _installed = original

