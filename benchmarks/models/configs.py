"""The models of the whole-model benchmark and their matmul FLOPs.

- `block`: examples/transformer_block.py's Block (RMSNorm, QKV, rotary,
  flex attention causal + ALiBi, SiLU-gated MLP) at dim 1024, 16 heads, MLP
  4096, batch 1, S tokens;
- `qwen2`: a random transformers Qwen2ForCausalLM of Qwen2-0.5B's shape
  (hidden 896, 14 / 2 heads, MLP 4864, vocab 151936, tied embeddings) with
  L layers, `attn_implementation="flex_attention"`, batch 1, a prompt of S
  tokens; the forward returns the logits.
"""

import dataclasses
import sys
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    model: str  # "block" or "qwen2"
    seq: int
    dtype: str
    layers: int = 1

    @property
    def name(self):
        layers = f" L={self.layers}" if self.model == "qwen2" else ""
        return f"{self.model}{layers} S={self.seq} {self.dtype}"


def build_block(cfg: ModelConfig):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import transformer_block as tb

    tb.DIM, tb.HEADS, tb.SEQ, tb.HIDDEN = 1024, 16, cfg.seq, 4096
    torch.manual_seed(0)
    model = tb.Block().eval().to(DTYPES[cfg.dtype])
    x = torch.randn(1, cfg.seq, 1024, dtype=DTYPES[cfg.dtype])
    return model, (x,)


QWEN2_05B = dict(hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                 max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6)


def build_qwen2(cfg: ModelConfig, **overrides):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    conf = Qwen2Config(**{**QWEN2_05B, "num_hidden_layers": cfg.layers, **overrides})
    conf._attn_implementation = "flex_attention"
    model = Qwen2ForCausalLM(conf).eval().to(DTYPES[cfg.dtype])
    ids = torch.randint(0, conf.vocab_size, (1, cfg.seq))
    return model, {"input_ids": ids}


def build(cfg: ModelConfig):
    return build_block(cfg) if cfg.model == "block" else build_qwen2(cfg)


def matmul_gflop(cfg: ModelConfig) -> float:
    """Multiply-add FLOPs (x2) of the forward's matmuls, attention with
    causal masking counted at half."""
    s = cfg.seq
    if cfg.model == "block":
        d, h = 1024, 4096
        dense = 2 * s * (d * 3 * d + d * d + 3 * d * h)
        attn = 2 * 2 * s * s * d / 2
        return (dense + attn) / 1e9
    d, f, kv, v = 896, 4864, 2 * 64, 151936
    dense = 2 * s * (d * (d + 2 * kv) + d * d + 3 * d * f)
    attn = 2 * 2 * s * s * d / 2
    return (cfg.layers * (dense + attn) + 2 * s * d * v) / 1e9


def weight_bytes(model) -> int:
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


# The default run (README table); --all adds the long ones.
DEFAULT = [
    ModelConfig("block", 512, "f32"), ModelConfig("block", 512, "bf16"),
    ModelConfig("block", 2048, "f32"), ModelConfig("block", 2048, "bf16"),
    ModelConfig("qwen2", 128, "f32", 2), ModelConfig("qwen2", 128, "bf16", 2),
    ModelConfig("qwen2", 1024, "f32", 2), ModelConfig("qwen2", 1024, "bf16", 2),
    ModelConfig("qwen2", 128, "f32", 24),
]
LONG = [
    ModelConfig("qwen2", 128, "bf16", 24),
    ModelConfig("qwen2", 1024, "f32", 24), ModelConfig("qwen2", 1024, "bf16", 24),
]
