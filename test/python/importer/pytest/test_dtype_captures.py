"""pytest: bf16 / f16 / int8 / uint8 captured constants and parameters import
(bf16 literals need the pinned ml_dtypes) and the compiled model matches eager."""

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import compile as flex_compile
from torch_mlir_flex.importer import export_and_import

B, H, S, D = 1, 2, 16, 8
DTYPES = [torch.bfloat16, torch.float16, torch.int8, torch.uint8]
MLIR_NAME = {torch.bfloat16: "bf16", torch.float16: "f16", torch.int8: "si8", torch.uint8: "ui8"}


def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, D, generator=g) for _ in range(3))


def values(n, dtype):
    if dtype.is_floating_point:
        return torch.linspace(-1.0, 1.0, n).to(dtype)
    lo = -100 if dtype == torch.int8 else 0
    return torch.linspace(lo, 100, n).to(dtype)


class Captures(torch.nn.Module):
    """A parameter over heads, a buffer over kv and a closure constant over q,
    all of ``dtype``, read by the score_mod."""

    def __init__(self, dtype):
        super().__init__()
        if dtype.is_floating_point:
            self.bias = torch.nn.Parameter(values(H, dtype))
        else:
            self.register_buffer("bias", values(H, dtype))
        self.register_buffer("table", values(S, dtype))
        self.rows = values(S, dtype).flip(0)
        self.unit = 1.0 if dtype.is_floating_point else 0.01  # values are in [-1, 1] after it

    def forward(self, q, k, v):
        def score_mod(s, b, h, i, j):
            u = self.unit
            return s + (self.bias[h].float() * u) * (self.table[j].float() * u) \
                + self.rows[(i + j) % S].float() * u

        return flex_attention(q, k, v, score_mod=score_mod)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_captured_constants_import_as_typed_literals(dtype):
    text = str(export_and_import(Captures(dtype), *qkv()))
    assert f"torch.vtensor.literal" in text
    assert f",{MLIR_NAME[dtype]}>" in text, text


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_captured_constants_compile_and_match(dtype):
    m = Captures(dtype)
    args = qkv()
    with torch.no_grad():
        ref = m(*args)
    out = flex_compile(m, args, backend="reference")(*args)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        assert (ref - flex_attention(*args)).abs().max() > 0.05  # the captures matter


class Bf16Bias(torch.nn.Module):
    """bf16 model: q/k/v and a trainable bf16 bias parameter."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.linspace(-2.0, 2.0, H).to(torch.bfloat16))

    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + self.bias[h] * (j - i) * 0.25)


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_bf16_score_mod_bias_parameter_matches_eager(backend):
    m = Bf16Bias()
    args = tuple(t.to(torch.bfloat16) for t in qkv())
    with torch.no_grad():
        ref = m(*args)
    out = flex_compile(m, args, backend=backend)(*args)
    assert out.dtype == torch.bfloat16
    with torch.no_grad():
        no_bias = flex_attention(*args)
    assert (ref.float() - no_bias.float()).abs().max() > 0.2  # the bias matters
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
