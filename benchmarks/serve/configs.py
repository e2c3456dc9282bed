"""The models of the serving benchmark: the tiny Llama of issue 25 and a
random model of Qwen2-0.5B's shape (benchmarks/models/configs.py), with
`attn_implementation="flex_attention"`."""

from dataclasses import dataclass

import torch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class ServeConfig:
    model: str  # "tiny" or "qwen2"
    dtype: str = "f32"
    batch: int = 1
    prompt: int = 128
    new_tokens: int = 32
    layers: int = 24

    @property
    def name(self):
        layers = f" L={self.layers}" if self.model == "qwen2" else ""
        return f"{self.model}{layers} {self.dtype} B={self.batch} P={self.prompt}"


def build(cfg: ServeConfig):
    """(model, prompt ids, attention mask); batch > 1 left-pads row 1."""
    import transformers

    torch.manual_seed(0)
    if cfg.model == "tiny":
        conf = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256,
                                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=4096, pad_token_id=0, bos_token_id=1,
                                        eos_token_id=2)
    else:
        from benchmarks.models.configs import QWEN2_05B

        conf = transformers.Qwen2Config(**{**QWEN2_05B, "num_hidden_layers": cfg.layers, "pad_token_id": 0})
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="flex_attention",
                                                          dtype=DTYPES[cfg.dtype]).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, conf.vocab_size, (cfg.batch, cfg.prompt), generator=g)
    mask = torch.ones_like(ids)
    if cfg.batch > 1:
        mask[1, :cfg.prompt // 4] = 0
        ids[1, :cfg.prompt // 4] = 0
    return model, ids, mask


def bytes_per_token(model, cfg: ServeConfig) -> int:
    """Weights plus the KV cache read by one decode step (mid-generation)."""
    from benchmarks.models.configs import weight_bytes

    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    length = cfg.prompt + cfg.new_tokens // 2
    kv = 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * length * cfg.batch
    return weight_bytes(model) + kv * DTYPES[cfg.dtype].itemsize


DEFAULT = [ServeConfig("tiny", "f32", 1, 128), ServeConfig("tiny", "f32", 4, 128)]
# --all: the 0.5B shape (compiling takes inductor about a minute, ours-api
# about 15 s, per configuration).
LONG = [ServeConfig("qwen2", "f32", 1, 128), ServeConfig("qwen2", "bf16", 1, 128),
        ServeConfig("qwen2", "f32", 4, 128), ServeConfig("qwen2", "f32", 1, 1024)]
