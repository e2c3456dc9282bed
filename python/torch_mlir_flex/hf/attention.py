"""Our replacement for transformers' "flex_attention" attention function,
installed only while `compile` exports a model (see `patches`).

It keeps transformers' call contract (module, query, key, value,
attention_mask, scaling, softcap, s_aux, position_bias) -> (out [B, M, H, D],
lse or None) and the same score_mod (softcap, then an additive score mask,
then a position bias), but calls flex_attention directly (no torch.compile
wrapper) and supports attention sinks (`s_aux`) through the logsumexp that
our compiled flex.attention returns on CPU.
"""

import torch
from torch.nn.attention.flex_attention import AuxRequest, BlockMask, flex_attention

from .sinks import renormalize_with_sinks


def _make_score_mod(softcap, score_mask, position_bias):
    if softcap is None and score_mask is None and position_bias is None:
        return None
    mask_at = _indexer(score_mask[:, :1] if score_mask is not None else None)
    bias_at = _indexer(position_bias)

    def score_mod(score, b, h, q_idx, kv_idx):
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if score_mask is not None:
            score = score + mask_at(b, 0, q_idx, kv_idx)
        if position_bias is not None:
            score = score + bias_at(b, h, q_idx, kv_idx)
        return score

    return score_mod


def _indexer(tensor):
    """t[b, h, m, n] for a [B or 1, H or 1, M, N] tensor, broadcasting its
    size-1 batch/head dims as eager attention does (T5's relative-position
    bias is [1, H, M, N]; indexing it with b would read out of bounds). The
    size-1 dims are dropped outside score_mod so that it indexes only with
    the index tensors."""
    if tensor is None:
        return None
    single_b, single_h = tensor.shape[0] == 1, tensor.shape[1] == 1
    if single_b and single_h:
        t = tensor[0, 0]
        return lambda b, h, m, n: t[m, n]
    if single_b:
        t = tensor[0]
        return lambda b, h, m, n: t[h, m, n]
    if single_h:
        t = tensor[:, 0]
        return lambda b, h, m, n: t[b, m, n]
    return lambda b, h, m, n: tensor[b, h, m, n]


def flex_attention_forward(module, query, key, value, attention_mask, scaling=None, softcap=None,
                           s_aux=None, position_bias=None, **kwargs):
    if kwargs.get("dropout", 0.0) > 0:
        raise ValueError("flex_attention has no dropout: compile the model in eval mode (model.eval())")
    block_mask = attention_mask if isinstance(attention_mask, BlockMask) else None
    score_mask = None
    if attention_mask is not None and block_mask is None:
        score_mask = attention_mask[:, :, :, : key.shape[-2]]
    score_mod = _make_score_mod(softcap, score_mask, position_bias)
    enable_gqa = query.shape[1] != key.shape[1]
    want_lse = s_aux is not None
    result = flex_attention(query, key, value, score_mod=score_mod, block_mask=block_mask, scale=scaling,
                            enable_gqa=enable_gqa, kernel_options=kwargs.get("kernel_options"),
                            return_aux=AuxRequest(lse=True) if want_lse else None)
    lse = None
    if want_lse:
        out, aux = result
        lse = aux.lse
        if s_aux is not None:
            out = renormalize_with_sinks(out, lse, s_aux)
        lse = lse.to(value.dtype)
    else:
        out = result
    return out.transpose(1, 2).contiguous(), lse
