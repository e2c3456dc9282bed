"""GPT-OSS-style attention sinks on top of flex_attention (torch only).

A sink is one learned logit per head that joins every row's softmax without
a value: out_sink = out * exp(lse) / (exp(lse) + exp(sink)) =
out * sigmoid(lse - sink), with `lse` the row's natural-log logsumexp that
flex_attention returns (`AuxRequest(lse=True)`). Our compiled flex.attention
computes lse on CPU, so this works compiled; transformers refuses it on CPU
because PyTorch's compiled CPU flex kernel does not return lse.
"""

import torch
from torch.nn.attention.flex_attention import AuxRequest, flex_attention


def renormalize_with_sinks(out: torch.Tensor, lse: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    """out [B, H, M, D], lse [B, H, M] (natural log), sinks [H] -> out with
    each row's softmax mass shared with its head's sink logit."""
    factor = torch.sigmoid(lse.float() - sinks.float().view(1, -1, 1))
    return (out.float() * factor.unsqueeze(-1)).to(out.dtype)


def flex_attention_with_sinks(query, key, value, sinks, score_mod=None, block_mask=None, scale=None,
                              enable_gqa=False):
    """flex_attention whose softmax includes one sink logit per query head."""
    out, aux = flex_attention(query, key, value, score_mod=score_mod, block_mask=block_mask, scale=scale,
                              enable_gqa=enable_gqa, return_aux=AuxRequest(lse=True))
    return renormalize_with_sinks(out, aux.lse, sinks)
