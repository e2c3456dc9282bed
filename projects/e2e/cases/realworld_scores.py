"""Real-world score_mods, written from the documented behaviour of
attention-gym's catalogue and common model code: relative position, ALiBi,
tanh softcap, T5 buckets, Graphormer spatial / edge biases, learned and 2-D
relative tables, activation score_mods, and score_mods computing with a
captured tensor's rows (chained indexing, sums, dot products, distances)."""

import math

import torch

from ..registry import alibi_slopes
from .realworld_common import case

S = 32


def causal(m, b, h, q, kv):
    return q >= kv


def relative(m, s, b, h, q, kv):
    return s + (q - kv) * 0.1


def alibi(m, s, b, h, q, kv):
    return s + m.slopes[h] * (kv - q)


def softcap(c):
    def score(m, s, b, h, q, kv):
        return torch.tanh(s / c) * c

    return score


case("gym_relative_position", relative)
case("gym_relative_position_f16", relative, dtype=torch.float16)
case("gym_relative_position_bf16", relative, dtype=torch.bfloat16)
case("gym_alibi", alibi, H=4, buffers=lambda: {"slopes": alibi_slopes(4)})
case("gym_alibi_causal", alibi, mask=causal, H=4, buffers=lambda: {"slopes": alibi_slopes(4)})
case("gym_alibi_lifted_constant", alibi, H=4, consts=lambda: {"slopes": alibi_slopes(4)})
case("gym_softcap", softcap(2.0))
case("gym_softcap_causal", softcap(5.0), mask=causal)
case("gym_softcap_bf16", softcap(2.0), dtype=torch.bfloat16)
case("gym_softcap_f16_causal", softcap(3.0), mask=causal, dtype=torch.float16)


def _t5_buckets(n=S, num_buckets=8, max_distance=24):
    """Bidirectional T5 buckets of (kv - q): half the buckets per sign,
    exact for small distances, logarithmic beyond."""
    rel = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    half = num_buckets // 2
    sign = (rel > 0).long() * half
    d = rel.abs()
    exact = half // 2
    log_b = exact + (torch.log(d.float().clamp(min=1) / exact) / math.log(max_distance / exact) *
                     (half - exact)).long()
    return sign + torch.where(d < exact, d, log_b.clamp(max=half - 1))


def t5_bias(m, s, b, h, q, kv):
    return s + m.table[h, m.bucket[q, kv]]


def t5_bias_computed(m, s, b, h, q, kv):
    # The bucket computed inside the modifier (float log, int casts).
    d = kv - q
    half = 4
    sign = (d > 0).to(torch.int64) * half
    a = d.abs()
    log_b = 2 + (torch.log(a.clamp(min=1).to(torch.float32) / 2) / math.log(12.0) * 2).to(torch.int64)
    bucket = sign + torch.where(a < 2, a, log_b.clamp(max=half - 1))
    return s + m.table[h, bucket]


case("gym_t5_bias", t5_bias, buffers=lambda: {"bucket": _t5_buckets(), "table": torch.randn(2, 8)})
case("gym_t5_bias_computed", t5_bias_computed, buffers=lambda: {"table": torch.randn(2, 8)})


def graphormer_spatial(m, s, b, h, q, kv):
    return s + m.spatial_emb[h, m.spatial_pos[b, q, kv]]


def graphormer_edge(m, s, b, h, q, kv):
    return s + m.edge[b, q, kv, h]


case("gym_graphormer_spatial", graphormer_spatial, B=2,
     buffers=lambda: {"spatial_pos": torch.randint(0, 6, (2, S, S)), "spatial_emb": torch.randn(2, 6)})
case("gym_graphormer_edge", graphormer_edge, B=2, buffers=lambda: {"edge": torch.randn(2, S, S, 2)})


def learned_relative(m, s, b, h, q, kv):
    return s + m.rel[h, q - kv + S - 1]


def swin_2d(m, s, b, h, q, kv):
    W = 8
    dy = q // W - kv // W + 3
    dx = q % W - kv % W + 7
    return s + m.rel[h, dy, dx]


case("gym_learned_relative_table", learned_relative, params=lambda: {"rel": torch.randn(2, 2 * S - 1)})
case("gym_swin_relative_2d", swin_2d, params=lambda: {"rel": torch.randn(2, 7, 15)})


def act(fn):
    def score(m, s, b, h, q, kv):
        return fn(s)

    return score


case("act_relu", act(torch.relu))
case("act_sigmoid", act(lambda s: torch.sigmoid(s) * 4))
case("act_silu", act(torch.nn.functional.silu))
case("act_gelu_tanh", act(lambda s: torch.nn.functional.gelu(s, approximate="tanh")))
case("act_tanh", act(lambda s: torch.tanh(s) * 3))
case("act_leaky_relu", act(lambda s: torch.nn.functional.leaky_relu(s, 0.2)))
case("act_square", act(lambda s: s * s * 0.5))
case("act_softplus", act(torch.nn.functional.softplus))
case("act_clamp", act(lambda s: s.clamp(-0.5, 0.75)))
case("act_gelu_exact", act(torch.nn.functional.gelu))
case("act_erf", act(lambda s: torch.erf(s) * 2))


def temperature(m, s, b, h, q, kv):
    return s / m.temp[h]


def bias_every_dim(m, s, b, h, q, kv):
    return s + m.bb[b] + m.bh[h] + m.bq[q] + m.bkv[kv]


def bias_4d(m, s, b, h, q, kv):
    return s + m.bias[b, h, q, kv]


def scalar_0d(m, s, b, h, q, kv):
    return s * m.w + m.c


def int_offsets(m, s, b, h, q, kv):
    return s + (q - kv + m.off[h]).to(torch.float32) * 0.05


def neg_inf_score(m, s, b, h, q, kv):
    return torch.where(q >= kv, s, -float("inf"))


def b_and_h(m, s, b, h, q, kv):
    return s + b * 0.5 - h * 0.25


case("flex_temperature_per_head", temperature, H=4, buffers=lambda: {"temp": torch.tensor([0.5, 1.0, 2.0, 4.0])})
case("flex_bias_every_dim", bias_every_dim, B=2,
     buffers=lambda: {"bb": torch.randn(2), "bh": torch.randn(2), "bq": torch.randn(S), "bkv": torch.randn(S)})
case("flex_bias_4d", bias_4d, B=2, buffers=lambda: {"bias": torch.randn(2, 2, S, S)})
case("flex_0d_captures", scalar_0d, buffers=lambda: {"w": torch.tensor(1.5), "c": torch.tensor(-0.25)})
case("flex_int32_capture", int_offsets, H=2, buffers=lambda: {"off": torch.tensor([3, -5], dtype=torch.int32)})
case("flex_score_mod_neg_inf", neg_inf_score)
case("flex_score_uses_b_and_h", b_and_h, B=2)
case("flex_f16_table_f32_inputs", bias_every_dim, B=2,
     buffers=lambda: {"bb": torch.randn(2, dtype=torch.float16), "bh": torch.randn(2, dtype=torch.float16),
                      "bq": torch.randn(S, dtype=torch.float16), "bkv": torch.randn(S, dtype=torch.float16)})
case("flex_bf16_table_buffer", bias_4d, B=2, buffers=lambda: {"bias": torch.randn(2, 2, S, S, dtype=torch.bfloat16)})
case("flex_bf16_table_lifted_constant", bias_4d, B=2,
     consts=lambda: {"bias": torch.randn(2, 2, S, S, dtype=torch.bfloat16)})
case("flex_bf16_parameter", bias_4d, B=2, params=lambda: {"bias": torch.randn(2, 2, S, S, dtype=torch.bfloat16)})
case("gym_alibi_softcap_causal", lambda m, s, b, h, q, kv: torch.tanh(alibi(m, s, b, h, q, kv) / 4) * 4,
     mask=causal, H=4, buffers=lambda: {"slopes": alibi_slopes(4)})


# Vector values inside a score_mod: rows of captured tensors.


def chain_bias(m, s, b, h, q, kv):
    return s + m.bias[b][q][kv]


def chain_rel(m, s, b, h, q, kv):
    return s + m.rel[h][q][kv]


def row_sum(m, s, b, h, q, kv):
    return s + m.emb[q].sum(-1) * 0.1


def row_dot(m, s, b, h, q, kv):
    return s + torch.dot(m.emb[q], m.emb[kv]) * 0.1


def row_distance(m, s, b, h, q, kv):
    return s - (m.emb[q] - m.emb[kv]).pow(2).sum(-1).sqrt()


def row_cosine(m, s, b, h, q, kv):
    a, c = m.emb[q], m.emb[kv]
    return s + torch.dot(a, c) / (a.norm() * c.norm())


def row_max(m, s, b, h, q, kv):
    return s + m.emb[kv].amax(-1)


def row_mean_head(m, s, b, h, q, kv):
    return s + m.per_head[h, q].mean(-1)


def row_matvec(m, s, b, h, q, kv):
    return s + m.emb[q] @ m.proj @ m.emb[kv] * 0.1


def row_softmax_pick(m, s, b, h, q, kv):
    return s + m.logits[q].softmax(-1)[kv % 4]


def chain_closure(m, s, b, h, q, kv):
    return s + m.cbias[b][q][kv]


case("vec_chained_bias_b_q_kv", chain_bias, B=2, buffers=lambda: {"bias": torch.randn(2, S, S)})
case("vec_chained_bias_h_q_kv", chain_rel, buffers=lambda: {"rel": torch.randn(2, S, S)})
case("vec_row_sum", row_sum, buffers=lambda: {"emb": torch.randn(S, 4)})
case("vec_row_sum_long_row", row_sum, buffers=lambda: {"emb": torch.randn(S, 24)})
case("vec_row_dot", row_dot, buffers=lambda: {"emb": torch.randn(S, 4)})
case("vec_row_dot_long_row", row_dot, buffers=lambda: {"emb": torch.randn(S, 16)})
case("vec_row_distance", row_distance, buffers=lambda: {"emb": torch.randn(S, 4)})
case("vec_row_distance_causal", row_distance, mask=causal, buffers=lambda: {"emb": torch.randn(S, 12)})
case("vec_row_cosine", row_cosine, buffers=lambda: {"emb": torch.randn(S, 6)})
case("vec_row_max", row_max, buffers=lambda: {"emb": torch.randn(S, 5)})
case("vec_row_mean_per_head", row_mean_head, buffers=lambda: {"per_head": torch.randn(2, S, 3)})
case("vec_row_matvec", row_matvec, buffers=lambda: {"emb": torch.randn(S, 4), "proj": torch.randn(4, 4)})
case("vec_row_softmax_pick", row_softmax_pick, buffers=lambda: {"logits": torch.randn(S, 4)})
case("vec_row_dot_f16", row_dot, dtype=torch.float16, buffers=lambda: {"emb": torch.randn(S, 4)})
case("vec_row_dot_bf16_inputs", row_dot, dtype=torch.bfloat16, buffers=lambda: {"emb": torch.randn(S, 4)})
case("vec_row_sum_f16_table", row_sum, buffers=lambda: {"emb": torch.randn(S, 4, dtype=torch.float16)})
case("vec_chained_bias_lifted_constant", chain_closure, B=2, consts=lambda: {"cbias": torch.randn(2, S, S)})
