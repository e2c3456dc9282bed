"""pytest: torch.library custom ops are decomposed before import when they
have a registered decomposition or a CompositeImplicitAutograd kernel (in the
model and inside a score_mod); otherwise the error names the op and how to
register a decomposition."""

import pytest
import torch
from torch._decomp import register_decomposition
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex.backend import FlexCompileError
from torch_mlir_flex import compile as flex_compile

B, H, S, D = 1, 2, 16, 8

LIB = torch.library.Library("flexcustom", "DEF")
# halfcap: opaque CPU kernel + a Python decomposition registered with torch._decomp.
LIB.define("halfcap(Tensor x) -> Tensor")
LIB.impl("halfcap", lambda x: 0.5 * x.clamp(max=1.0), "CPU")
LIB.impl("halfcap", lambda x: torch.empty_like(x), "Meta")


@register_decomposition(torch.ops.flexcustom.halfcap.default)
def _halfcap(x):
    return 0.5 * torch.clamp(x, max=1.0)


# softcap: a CompositeImplicitAutograd kernel only.
LIB.define("softcap(Tensor x, float c) -> Tensor")
LIB.impl("softcap", lambda x, c: c * torch.tanh(x / c), "CompositeImplicitAutograd")
# opaque: a CPU kernel and nothing torch-mlir can lower.
LIB.define("opaque(Tensor x) -> Tensor")
LIB.impl("opaque", lambda x: 2 * x, "CPU")
LIB.impl("opaque", lambda x: torch.empty_like(x), "Meta")

ops = torch.ops.flexcustom
CASES = {
    "decomposition_in_score_mod": lambda q, k, v: flex_attention(
        q, k, v, score_mod=lambda s, b, h, i, j: ops.halfcap(s)),
    "decomposition_in_model": lambda q, k, v: ops.halfcap(flex_attention(q, k, v)),
    "composite_implicit_in_score_mod": lambda q, k, v: flex_attention(
        q, k, v, score_mod=lambda s, b, h, i, j: ops.softcap(s, 0.5)),
}


def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, D, generator=g) for _ in range(3))


@pytest.mark.parametrize("name", sorted(CASES))
def test_custom_op_with_decomposition_compiles_and_matches(name):
    fn, args = CASES[name], qkv()
    compiled = flex_compile(fn, args, backend="reference")
    assert "flexcustom" not in compiled.torch_ir
    torch.testing.assert_close(compiled(*args), fn(*args), atol=1e-5, rtol=1e-5)
    assert (fn(*args) - flex_attention(*args)).abs().max() > 1e-2  # the op matters


def test_custom_op_without_decomposition_is_named_with_the_fix():
    fn = lambda q, k, v: flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: ops.opaque(s))
    with pytest.raises(FlexCompileError) as e:
        flex_compile(fn, qkv(), backend="reference")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("frontend: op 'flexcustom.opaque' (torch.operator) is not known to torch-mlir"), msg
    assert "register_decomposition" in msg and "CompositeImplicitAutograd" in msg
