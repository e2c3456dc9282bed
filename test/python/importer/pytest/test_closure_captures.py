"""pytest: tensors captured by modifiers through Python closures (lifted
constants) and Python ints next to tensor indices import correctly and
deterministically through compile() (see importer/closure_captures.py)."""

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import compile as flex_compile
from torch_mlir_flex.backend import FlexCompileError

B, H, S, D = 2, 2, 16, 8
DOC = torch.arange(S) // 5
OFFS = torch.tensor([0, 5, 10, 15])
C2 = torch.linspace(-2.0, 2.0, H * 4).reshape(H, 4)
BIAS = torch.linspace(-1.0, 1.0, B * S * S).reshape(B, S, S)


def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, D, generator=g) for _ in range(3))


def doc_offsets(q, k, v):
    return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + 0.1 * (i - OFFS[DOC[i]]).float()
                          - 0.2 * (j - OFFS[DOC[j]]).float())


def int_and_tensor_index(q, k, v):
    return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + C2[h, 2] * (j - i) * 0.1)


class BufferIntIndex(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c2", C2.clone())

    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + self.c2[h, 3] * (j - i) * 0.1)


@pytest.mark.parametrize("fn", [doc_offsets, int_and_tensor_index, BufferIntIndex()],
                         ids=["offs[doc[q]]", "c2[h, 2]", "buffer c2[h, 3]"])
def test_closure_lookups_compile_and_match_every_time(fn):
    args = qkv()
    with torch.no_grad():
        ref = fn(*args)
        assert (ref - flex_attention(*args)).abs().max() > 1e-2  # the capture matters
    for _ in range(3):  # was nondeterministic (garbage indices) for offs[doc[q]]
        out = flex_compile(fn, args, backend="reference")(*args)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_chained_index_of_closure_constant_has_no_set_storage_error():
    """bias[b][q] (a row, then a scalar) on a closure constant: torch.export
    used to fail in setStorage; now it imports and either compiles or fails
    with the documented vector-value error of flex-materialize."""
    fn = lambda q, k, v: flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + BIAS[b][i][j])
    args = qkv()
    try:
        out = flex_compile(fn, args, backend="reference")(*args)
    except FlexCompileError as e:
        assert e.stage == "materialize" and "cannot scalarize" in str(e), str(e)
        assert "setStorage" not in str(e)
    else:
        torch.testing.assert_close(out, fn(*args), atol=1e-5, rtol=1e-5)
