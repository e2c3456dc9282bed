"""One forward of a causal LM over a static KV cache given as tensors.

`StaticStep(model)` is the module `hf.generate` compiles (once for the
prefill length, once for decode):

    logits = step(input_ids, attention_mask, position_ids, cache_position, k0, v0, k1, v1, ...)

- input_ids, position_ids: [B, T] int64; cache_position: [T] int64, the
  cache slots the T tokens are written to (absolute positions);
- attention_mask: [B, C] int64 over the C cache slots (1: a real token,
  0: left padding or a slot not written yet);
- k_i, v_i: [B, H_kv, C, D] per layer, written in place at cache_position
  (``index_copy_``: the compiled function updates the caller's tensors);
  with ``StaticStep(model, kv_int8=True)`` four tensors per layer instead,
  k_i, v_i int8 [B, H_kv, C, D] and their scales ks_i, vs_i f32
  [B, H_kv, C] (`quantize_kv`: symmetric, one scale per token and kv head),
  all four written in place; attention reads ``k_i * ks_i[..., None]``;
- logits: [B, vocab] of the last position only (transformers'
  ``logits_to_keep=1``: the LM head runs on one row per sequence).

The cache layers are transformers' `StaticLayer` around the given tensors;
every layer holds all C slots (a sliding-window layer too: the window is in
the mask function transformers builds, over absolute positions).
"""

import torch


def quantize_kv(x):
    """(int8 values, f32 scales) of `x` [..., D]: symmetric per row of D
    (one scale per token and head), scale = absmax / 127, values
    round(x / scale) clamped to [-127, 127]; an all-zero row has scale 0
    and values 0."""
    x = x.float()
    scale = x.abs().amax(-1) / 127.0
    q = torch.round(x / scale.clamp_min(1e-30)[..., None]).clamp_(-127, 127)
    return q.to(torch.int8), scale


def dequantize_kv(q, scale, dtype):
    """`quantize_kv`'s inverse in `dtype`: q * scale (in f32, then cast)."""
    return (q.to(torch.float32) * scale[..., None]).to(dtype)


def _static_layer(keys, values, cache_position, scales=None, dtype=None):
    from transformers.cache_utils import StaticLayer

    class InputLayer(StaticLayer):
        """A StaticLayer whose tensors are the step's inputs, written at the
        step's cache_position (not at its own running length)."""

        def __init__(self):
            super().__init__(max_cache_len=keys.shape[2])
            self.keys, self.values = keys, values
            self.batch_size, self.num_heads = keys.shape[:2]
            self.k_head_dim, self.v_head_dim = keys.shape[-1], values.shape[-1]
            self.device = keys.device
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if scales is None:
                self.keys.index_copy_(2, cache_position, key_states)
                self.values.index_copy_(2, cache_position, value_states)
                return self.keys, self.values
            out = []
            for cache, scale, new in ((self.keys, scales[0], key_states), (self.values, scales[1], value_states)):
                q, s = quantize_kv(new)
                cache.index_copy_(2, cache_position, q)
                scale.index_copy_(2, cache_position, s)
                out.append(dequantize_kv(cache, scale, dtype))
            return tuple(out)

        def get_seq_length(self):
            # Tokens before this step: the queries' offset in the masks.
            return cache_position[0]

    return InputLayer()


class StaticStep(torch.nn.Module):
    def __init__(self, model, kv_int8: bool = False):
        super().__init__()
        self.model = model
        self.kv_int8 = kv_int8

    def forward(self, input_ids, attention_mask, position_ids, cache_position, *kv):
        from transformers.cache_utils import Cache

        if self.kv_int8:
            dtype = next(self.model.parameters()).dtype
            layers = [_static_layer(kv[i], kv[i + 1], cache_position, (kv[i + 2], kv[i + 3]), dtype)
                      for i in range(0, len(kv), 4)]
        else:
            layers = [_static_layer(kv[i], kv[i + 1], cache_position) for i in range(0, len(kv), 2)]
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache_position=cache_position, past_key_values=Cache(layers=layers), use_cache=True,
                         logits_to_keep=1, return_dict=True)
        return out.logits[:, -1]


def cache_shapes(model, batch: int, max_cache_len: int):
    """[(k shape, v shape)] per layer of the model's static cache."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    shape = (batch, kv_heads, max_cache_len, head_dim)
    return [(shape, shape)] * cfg.num_hidden_layers
