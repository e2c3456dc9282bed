"""The model families of the suite: a tiny random config each (2 layers,
hidden 64, vocab 128), the Auto class that builds it, and what it exercises."""

from dataclasses import dataclass
from typing import Callable

import torch

VOCAB = 128
# Larger than transformers' default 0.02 so that logits are O(1) and a 1e-5
# comparison means something.
INIT_RANGE = 0.1
DECODER = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
               initializer_range=INIT_RANGE, pad_token_id=0, bos_token_id=1, eos_token_id=2)
WINDOW = 16


@dataclass(frozen=True)
class Family:
    name: str
    config: Callable[[], object]  # -> a PretrainedConfig
    auto_class: str  # AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM
    exercises: str
    dtype: torch.dtype = torch.float32
    padding_side: str = "left"

    @property
    def kind(self) -> str:
        return {"AutoModelForCausalLM": "causal", "AutoModelForMaskedLM": "encoder",
                "AutoModelForSeq2SeqLM": "seq2seq"}[self.auto_class]


def _cfg(cls_name, **kw):
    def make():
        import transformers

        return getattr(transformers, cls_name)(**kw)

    return make


def _alternating(**kw):
    return dict(kw, layer_types=["sliding_attention", "full_attention"], sliding_window=WINDOW)


FAMILIES = [
    Family("llama", _cfg("LlamaConfig", **DECODER), "AutoModelForCausalLM", "GQA 4/2, rotary"),
    Family("mistral", _cfg("MistralConfig", **DECODER, sliding_window=WINDOW), "AutoModelForCausalLM",
           "sliding window 16"),
    Family("qwen2", _cfg("Qwen2Config", **DECODER), "AutoModelForCausalLM", "QKV bias"),
    Family("gemma2", _cfg("Gemma2Config", **_alternating(**DECODER, head_dim=16, attn_logit_softcapping=50.0,
                                                        final_logit_softcapping=30.0)),
           "AutoModelForCausalLM", "softcap, alternating sliding/full, tanh-GELU"),
    Family("gemma3", _cfg("Gemma3TextConfig", **_alternating(**DECODER, head_dim=16)), "AutoModelForCausalLM",
           "alternating sliding/full, qk-norm, tanh-GELU"),
    Family("phi3", _cfg("Phi3Config", **DECODER), "AutoModelForCausalLM", "fused QKV"),
    Family("gpt_neox", _cfg("GPTNeoXConfig", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256,
                            initializer_range=INIT_RANGE, hidden_act="gelu", pad_token_id=0),
           "AutoModelForCausalLM", "exact GELU, partial rotary"),
    Family("bert", _cfg("BertConfig", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=256, initializer_range=INIT_RANGE,
                        hidden_act="gelu", pad_token_id=0),
           "AutoModelForMaskedLM", "encoder, bidirectional padding mask, exact GELU", padding_side="right"),
    Family("opt", _cfg("OPTConfig", vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
                       num_attention_heads=4, max_position_embeddings=256, word_embed_proj_dim=64,
                       init_std=INIT_RANGE, pad_token_id=0),
           "AutoModelForCausalLM", "learned positions from cumsum(attention_mask)"),
    Family("t5", _cfg("T5Config", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                      num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                      initializer_factor=1.0, decoder_start_token_id=0, pad_token_id=0),
           "AutoModelForSeq2SeqLM", "encoder-decoder, captured relative-position bias", padding_side="right"),
    Family("mixtral", _cfg("MixtralConfig", **DECODER, num_local_experts=4, num_experts_per_tok=2),
           "AutoModelForCausalLM", "MoE top-2 routing"),
    Family("gpt_oss", _cfg("GptOssConfig", **_alternating(**dict(DECODER, intermediate_size=64), head_dim=16,
                                                         num_local_experts=4, num_experts_per_tok=2)),
           "AutoModelForCausalLM", "attention sinks, MoE, alternating sliding/full"),
    Family("llama_bf16", _cfg("LlamaConfig", **DECODER), "AutoModelForCausalLM", "bf16 weights and activations",
           dtype=torch.bfloat16),
]

BY_NAME = {f.name: f for f in FAMILIES}

# Tolerances on the logits of non-padding positions (max |ours - HF eager|;
# |logits| <= ~3 with INIT_RANGE). bf16: HF eager in bf16 is itself 0.04-0.06
# away from the same model in fp32 on these logits (6 bf16 ulps at 3 is 0.09);
# ours is as far, in other places.
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-1}
