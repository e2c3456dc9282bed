"""Attention sinks (GPT-OSS style) compiled: torch_mlir_flex.hf's
flex_attention_with_sinks (flex_attention + lse renormalization) matches the
same function in eager (uncompiled) flex_attention, and both match a direct
softmax over [scores, sink]. No transformers needed."""

import torch_mlir_flex
import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from torch_mlir_flex.hf.sinks import flex_attention_with_sinks

B, HQ, HKV, S, D, WINDOW = 2, 4, 2, 37, 16, 8


def _sliding_causal(b, h, m, n):
    return (n <= m) & (m - n < WINDOW)


class SinkAttention(torch.nn.Module):
    def __init__(self, softcap=None):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.randn(HQ))
        self.softcap = softcap

    def forward(self, q, k, v):
        block_mask = create_block_mask(_sliding_causal, B=None, H=None, Q_LEN=S, KV_LEN=S, device="cpu")
        score_mod = None
        if self.softcap is not None:
            cap = self.softcap
            score_mod = lambda s, b, h, m, n: cap * torch.tanh(s / cap)  # noqa: E731
        return flex_attention_with_sinks(q, k, v, self.sinks, score_mod=score_mod, block_mask=block_mask,
                                         enable_gqa=True)


def _direct(q, k, v, sinks):
    """softmax over the row's scores and the head's sink logit, sink column dropped."""
    k = k.repeat_interleave(HQ // HKV, dim=1)
    v = v.repeat_interleave(HQ // HKV, dim=1)
    s = q @ k.transpose(-1, -2) / D**0.5
    m = torch.arange(S)[:, None]
    n = torch.arange(S)[None, :]
    s = s.masked_fill(~_sliding_causal(0, 0, m, n), float("-inf"))
    sink = sinks.view(1, HQ, 1, 1).expand(B, HQ, S, 1)
    p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    return p @ v


def _inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, HQ, S, D, generator=g), torch.randn(B, HKV, S, D, generator=g),
            torch.randn(B, HKV, S, D, generator=g))


@pytest.mark.parametrize("softcap", [None, 20.0], ids=["plain", "softcap"])
@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_sinks_compiled_match_eager_flex(backend, softcap):
    torch.manual_seed(0)
    model = SinkAttention(softcap).eval()
    args = _inputs()
    with torch.no_grad():
        eager = model(*args)
    out = torch_mlir_flex.compile(model, args, backend=backend)(*args)
    torch.testing.assert_close(out, eager, atol=1e-5, rtol=1e-5)


def test_eager_sinks_match_direct_softmax():
    torch.manual_seed(0)
    model = SinkAttention().eval()
    args = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(model(*args), _direct(*args, model.sinks), atol=1e-5, rtol=1e-5)


def test_sinks_change_the_result():
    """A large sink takes most of the mass: the output shrinks toward 0."""
    model = SinkAttention().eval()
    args = _inputs()
    with torch.no_grad():
        model.sinks.fill_(-30.0)
        low = model(*args)
        model.sinks.fill_(30.0)
        high = model(*args)
    assert low.abs().mean() > 100 * high.abs().mean()
