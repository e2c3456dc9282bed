"""Bugs found by the robustness suite that are not fixed yet (strict xfail:
the marker must go when the fix lands). See docs/robustness.md."""

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from .helpers import backends, require_compile


class ReturnsInput(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v), q


# Regression: the tiled pipeline left a bufferization.clone for a returned
# argument (now lowered by convert-bufferization-to-memref).


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_model_returning_an_input(backend):
    compile_ = require_compile()
    if backend not in backends():
        pytest.skip(f"backend {backend!r} is not registered yet")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(3))
    out, q2 = compile_(ReturnsInput(), (q, k, v), backend=backend)(q, k, v)
    assert torch.equal(q2, q)
    torch.testing.assert_close(out, flex_attention(q, k, v), rtol=1e-3, atol=1e-5)
