"""The models of the quantized serving benchmark (`python -m benchmarks.serve
--quant`, issue #41): random transformers models of the tiny Llama's, the
Qwen2-0.5B's and the Qwen2-1.5B's shape, the same weights in every engine
(seeded), quantized in place with torchao 0.18 (weight-only int8, or int4
with torch's CPU packing), and the bytes one decode step reads, counted
from the quantized model's own tensors."""

from dataclasses import dataclass

import torch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}

# Shapes (transformers config fields) besides the tiny Llama's.
QWEN2_SHAPES = {
    "qwen2-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2),
    "qwen2-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2),
}
QWEN2_COMMON = dict(vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=32768,
                    rope_theta=1000000.0, rms_norm_eps=1e-6, pad_token_id=0, bos_token_id=1, eos_token_id=2)
TINY = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2)
NICE = {"tiny": "tiny Llama", "qwen2-0.5b": "Qwen2-0.5B shape", "qwen2-1.5b": "Qwen2-1.5B shape"}

# The inner tensors a quantized Linear's forward reads, per torchao tensor
# class (Int8Tensor's zero_point is all zeros, weight-only int8 being
# symmetric: its linear never reads it). Other classes: every inner tensor.
READ_INNER = {"Int8Tensor": ("qdata", "scale"), "Int4OpaqueTensor": ("qdata", "scale_and_zero")}


@dataclass(frozen=True)
class QuantServeConfig:
    model: str  # "tiny", "qwen2-0.5b" or "qwen2-1.5b"
    quant: str  # "int8" or "int4"
    batch: int = 1
    prompt: int = 128
    new_tokens: int = 32
    dtype: str = "f32"
    group_size: int = 32  # int4 only

    @property
    def quant_name(self):
        return f"int4 g{self.group_size}" if self.quant == "int4" else self.quant

    @property
    def name(self):
        return f"{self.model} {self.quant_name} {self.dtype} B={self.batch} P={self.prompt}"


def hf_config(cfg: QuantServeConfig):
    import transformers

    if cfg.model == "tiny":
        return transformers.LlamaConfig(**TINY)
    if cfg.model not in QWEN2_SHAPES:
        raise ValueError(f"unknown model {cfg.model!r}: expected tiny or one of {sorted(QWEN2_SHAPES)}")
    return transformers.Qwen2Config(**QWEN2_COMMON, **QWEN2_SHAPES[cfg.model])


def float_model(cfg: QuantServeConfig, attn: str = "flex_attention"):
    """The model before quantization: random weights from seed 0."""
    import transformers

    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(hf_config(cfg), attn_implementation=attn,
                                                         dtype=DTYPES[cfg.dtype]).eval()


def torchao_config(cfg: QuantServeConfig):
    """torchao 0.18's config for `cfg.quant` (int4: the CPU packing of its
    prototype workflow; Int4WeightOnlyConfig has no CPU layout in 0.18)."""
    if cfg.quant == "int8":
        from torchao.quantization import Int8WeightOnlyConfig

        return Int8WeightOnlyConfig()
    if cfg.quant == "int4":
        from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig

        return PrototypeInt4WeightOnlyConfig(group_size=cfg.group_size)
    raise ValueError(f"unknown quantization {cfg.quant!r}: expected int8 or int4")


def build(cfg: QuantServeConfig, attn: str = "flex_attention"):
    """(quantized model, prompt ids, attention mask); every Linear (the LM
    head included) quantized; batch > 1 left-pads row 1 by a quarter."""
    from torchao.quantization import quantize_

    model = float_model(cfg, attn)
    quantize_(model, torchao_config(cfg))
    return (model, *prompt(cfg, model.config.vocab_size))


def prompt(cfg: QuantServeConfig, vocab: int):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (cfg.batch, cfg.prompt), generator=g)
    mask = torch.ones_like(ids)
    if cfg.batch > 1:
        mask[1, :cfg.prompt // 4] = 0
        ids[1, :cfg.prompt // 4] = 0
    return ids, mask


def tensor_bytes(t) -> int:
    """Bytes of `t`; of a torchao tensor subclass, those of the inner
    tensors its linear reads (READ_INNER)."""
    if hasattr(t, "__tensor_flatten__") and type(t) is not torch.nn.Parameter:
        names, _ = t.__tensor_flatten__()
        names = [n for n in names if n in READ_INNER.get(type(t).__name__, names)]
        return sum(tensor_bytes(getattr(t, n)) for n in names)
    if isinstance(t, torch.nn.Parameter) and type(t.data) is not torch.Tensor:
        return tensor_bytes(t.data)
    return t.numel() * t.element_size()


def weight_bytes(model, batch: int) -> int:
    """Weight bytes one decode step of `batch` sequences reads: every
    parameter and buffer once (quantized ones: READ_INNER), except the
    input embedding table, of which only `batch` rows are read (unless
    another module shares it: a tied float LM head reads it whole)."""
    emb = model.get_input_embeddings().weight
    shared = any(p is emb for name, p in model.named_parameters(remove_duplicate=False)
                 if not name.endswith("embed_tokens.weight"))
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t is emb and not shared:
            total += batch * emb.shape[1] * emb.element_size()
        else:
            total += tensor_bytes(t)
    return total


def kv_bytes(c, cfg: QuantServeConfig, element_size: int) -> int:
    """KV cache bytes one decode step of a model of transformers config `c`
    reads, mid-generation (prompt + half the new tokens), `element_size`
    bytes an element."""
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    length = cfg.prompt + cfg.new_tokens // 2
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * length * cfg.batch * element_size


def bytes_per_token(model, cfg: QuantServeConfig) -> dict:
    """{"weights", "kv", "total"}: bytes one decode step reads (KV in the
    model's dtype)."""
    w = weight_bytes(model, cfg.batch)
    kv = kv_bytes(model.config, cfg, DTYPES[cfg.dtype].itemsize)
    return {"weights": w, "kv": kv, "total": w + kv}
