"""pytest: non-persistent buffers and lifted constants import as literals,
export_and_import exports inference graphs, tanh-GELU uses the exact
sqrt(2/pi) (our decomposition, not torch-mlir's constant)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import compile as flex_compile
from torch_mlir_flex.importer import export_and_import
from torch_mlir_flex.importer.decompositions import SQRT_2_OVER_PI

B, H, S, D = 1, 2, 16, 8


def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, D, generator=g) for _ in range(3))


class Rotary(torch.nn.Module):
    """HF-style non-persistent buffers (in ExportedProgram.constants, not in
    state_dict), a lifted tensor constant, and a trainable Linear."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D)), persistent=False)
        self.register_buffer("position_ids", torch.arange(S).unsqueeze(0), persistent=False)
        self.table = torch.linspace(-1.0, 1.0, S)  # plain attribute: a lifted constant
        self.lin = torch.nn.Linear(D, D)

    def forward(self, q, k, v):
        f = self.position_ids[0].float()[:, None] * self.inv_freq[None]
        emb = torch.cat([f, f], -1)
        q = q * emb.cos() + self.lin(k)
        return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + self.table[j] + self.inv_freq[h])


def test_rotary_model_state_is_where_the_test_expects():
    with torch.no_grad():
        ep = torch.export.export(Rotary(), qkv())
    assert "inv_freq" in ep.constants and "inv_freq" not in ep.state_dict
    assert "position_ids" in ep.constants
    assert any(p.requires_grad for p in ep.state_dict.values())


@pytest.mark.parametrize("mutation", [False, True], ids=["frozen", "import_program"])
def test_non_persistent_buffers_and_constants_import_as_literals(mutation):
    text = str(export_and_import(Rotary(), *qkv(), experimental_support_mutation=mutation))
    main = text[text.index("func.func @main"):]
    main = main[:main.index("\n  }")]
    # Only q, k, v are arguments; inv_freq/position_ids/table are literals.
    assert main.count("%arg") >= 3 and "%arg3" not in main
    assert "torch.vtensor.literal" in text


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_non_persistent_buffers_compile_and_match(backend):
    m = Rotary()
    args = qkv()
    fn = flex_compile(m, args, backend=backend)
    with torch.no_grad():
        ref = m(*args)
    torch.testing.assert_close(fn(*args), ref, atol=1e-5, rtol=1e-5)


def test_export_and_import_trainable_parameters():
    """Parameters requiring grad: exported under no_grad like compile()."""
    m = Rotary()
    assert m.lin.weight.requires_grad
    export_and_import(m, *qkv())  # raised "does not support backward on CPU" before


class Gelu(torch.nn.Module):
    """gelu on a model input (its range chosen by the test) next to a flex call."""

    def __init__(self, approximate):
        super().__init__()
        self.approximate = approximate

    def forward(self, q, k, v, x):
        return flex_attention(q, k, v), F.gelu(x, approximate=self.approximate)


X = torch.linspace(-6.0, 6.0, 1201)


def test_tanh_gelu_is_decomposed_with_exact_constant():
    text = str(export_and_import(Gelu("tanh"), *qkv(), X))
    assert "torch.aten.gelu" not in text
    assert "torch.aten.tanh" in text
    assert SQRT_2_OVER_PI == pytest.approx(0.7978845608028654, abs=1e-15)
    assert "0.797884560802865" in text, "sqrt(2/pi) is not in the IR"
    assert "0.797724" not in text


def test_exact_gelu_is_kept():
    assert "torch.aten.gelu" in str(export_and_import(Gelu("none"), *qkv(), X))


def test_tanh_gelu_matches_eager_to_1e6():
    """torch-mlir's own lowering is off by up to ~5e-5 here."""
    m = Gelu("tanh")
    args = qkv() + (X,)
    ref = m(*args)[1]
    out = flex_compile(m, args, backend="reference")(*args)[1]
    assert (out - ref).abs().max().item() <= 1e-6
