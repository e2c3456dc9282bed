"""Error messages through the torch API (`torch_mlir_flex.compile`) and the
importer: every failure is a FlexCompileError whose message names the stage
and the reason (the op, the modifier, the dtype, the shape)."""

import re

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from .helpers import require_compile

B, H, S, D = 1, 2, 16, 8


def qkv(*shapes, dtype=torch.float32):
    shapes = shapes or [(B, H, S, D)] * 3
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=g).to(dtype) for s in shapes)


class Fn(torch.nn.Module):
    """forward = fn(self, *args); `bias` / `table` buffers for modifiers."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.register_buffer("bias", torch.linspace(-1, 1, H))
        self.register_buffer("table", torch.linspace(-1, 1, S))

    def forward(self, *args):
        return self.fn(self, *args)


def compile_error(model, args, backend="reference"):
    compile_ = require_compile()
    from torch_mlir_flex.backend import FlexCompileError

    with pytest.raises(FlexCompileError) as e:
        compile_(model, args, backend=backend)
    return e.value


# --------------------------------------------------------------------------
# Modifiers computing with whole captured tensors (no longer errors:
# flex-materialize evaluates the reductions inside the region)
# --------------------------------------------------------------------------


def test_score_mod_reduction_over_capture_compiles():
    m = Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: x + s.bias.sum()))
    args = qkv()
    got = require_compile()(m, args, backend="reference")(*args)
    torch.testing.assert_close(got, m(*args), rtol=1e-4, atol=1e-5)


def test_mask_mod_reduction_over_capture_compiles():
    def fn(s, q, k, v):
        bm = create_block_mask(lambda b, h, i, j: (i >= j) & (s.table.max() > 0), None, None, S, S, device="cpu")
        return flex_attention(q, k, v, block_mask=bm)

    m, args = Fn(fn), qkv()
    got = require_compile()(m, args, backend="reference")(*args)
    torch.testing.assert_close(got, m(*args), rtol=1e-4, atol=1e-5)


def test_score_mod_unsupported_torch_op_is_named():
    m = Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: torch.erfinv(x * 0.01)))
    e = compile_error(m, qkv())
    assert e.stage == "frontend"
    assert "aten.erfinv" in str(e)


def test_score_mod_whole_tensor_cumsum_is_named():
    # cumsum lowers (frontend/tm_tensor/) in the model, but a whole-tensor op
    # inside a modifier (run once per score element) is refused by name.
    m = Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: x + torch.cumsum(s.bias, 0)[h]))
    e = compile_error(m, qkv())
    assert e.stage == "frontend"
    assert re.search(r"\(from aten\.cumsum\) in score_mod @sdpa_score\d+ works on a whole tensor", str(e)), str(e)
    assert "\n" not in str(e)


def one_line_cause(e, cause: str):
    """The message is one line and starts with the cause (after the stage)."""
    msg = str(e)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{e.stage}: {cause}"), msg
    assert len(msg) < 400, msg


def test_score_mod_returning_bool_is_rejected():
    m = Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: x > 0))
    e = compile_error(m, qkv())
    assert e.stage == "import"
    one_line_cause(e, "score_mod returns dtype torch.bool; it must return a floating-point scalar")


def test_mask_mod_returning_int_is_rejected():
    """create_block_mask rejects a non-bool mask_mod itself; a BlockMask built
    from block tables does not, and torch.export accepts it (eager fails only
    when run): the importer names the dtype."""

    def fn(s, q, k, v):
        bm = BlockMask.from_kv_blocks(torch.ones(1, 1, 1, dtype=torch.int32), torch.zeros(1, 1, 1, 1, dtype=torch.int32),
                                      BLOCK_SIZE=S, mask_mod=lambda b, h, i, j: i - j)
        return flex_attention(q, k, v, block_mask=bm)

    e = compile_error(Fn(fn), qkv())
    assert e.stage == "import"
    assert re.match(r"import: mask_mod returns dtype torch\.int\d+; it must return a bool scalar", str(e)), str(e)


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------

plain = Fn(lambda s, q, k, v: flex_attention(q, k, v))
gqa = Fn(lambda s, q, k, v: flex_attention(q, k, v, enable_gqa=True))


def test_N_mismatch_reaches_the_verifier():
    """torch.export does not check that key and value agree on N (eager fails
    only in its bmm); the flex.attention verifier does."""
    e = compile_error(plain, qkv((B, H, S, D), (B, H, S, D), (B, H, S // 2, D)))
    assert e.stage == "materialize"
    assert f"key sequence length N = {S} differs from value sequence length {S // 2}" in str(e)


@pytest.mark.parametrize("name,model,shapes,torch_msg", [
    ("E", plain, [(B, H, S, D), (B, H, S, D // 2), (B, H, S, D)], "same embedding dimension"),
    ("B", plain, [(3, H, S, D), (2, H, S, D), (2, H, S, D)], "same batch size"),
    ("Hq_not_multiple_of_Hkv", gqa, [(B, 3, S, D), (B, 2, S, D), (B, 2, S, D)], "multiple of kv heads"),
])
def test_shape_errors_torch_rejects_first(name, model, shapes, torch_msg):
    """torch itself rejects these while tracing: the export stage says so
    (the flex IR level check is in test_errors_ir.py)."""
    e = compile_error(model, qkv(*shapes))
    assert e.stage == "export"
    assert torch_msg in str(e)


# --------------------------------------------------------------------------
# Dtypes
# --------------------------------------------------------------------------


def test_f64_inputs_are_rejected_with_the_dtype():
    """Eager flex_attention runs f64 (in f64); flex.attention supports
    f32/f16/bf16 only."""
    e = compile_error(plain, qkv(dtype=torch.float64))
    assert e.stage == "materialize"
    assert "unsupported query element type 'f64'; flex.attention supports f32, f16 and bf16" in str(e), str(e)


def test_int_inputs_are_rejected_with_the_dtype():
    """No score_mod: the message names the q/k/v dtype, not a score_mod."""
    e = compile_error(plain, qkv(dtype=torch.int32))
    assert e.stage == "import"
    one_line_cause(e, "flex_attention query has dtype torch.int32, which is unsupported; "
                      "q, k and v must be floating point")
    assert "score_mod returns" not in str(e)


# --------------------------------------------------------------------------
# Ops that cannot run in compiled code / in a modifier: one line naming the op
# --------------------------------------------------------------------------

TAB = torch.linspace(-1, 1, S)


@pytest.mark.parametrize("op,score_mod", [
    ("sort", lambda x, b, h, i, j: torch.sort(torch.stack([x, 2 * x]))[0][0]),
    ("nonzero", lambda x, b, h, i, j: x + torch.nonzero(TAB > 0)[0, 0]),
    ("topk", lambda x, b, h, i, j: x + torch.topk(TAB, 3)[0][0]),
])
def test_whole_tensor_ops_in_a_modifier_are_named(op, score_mod):
    """torch.export used to fail inside the modifier with an internal
    "FunctionalTensor" error; now the op either compiles (and matches eager)
    or the one-line error names it."""
    compile_ = require_compile()
    from torch_mlir_flex.backend import FlexCompileError

    m = Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=score_mod))
    args = qkv()
    try:
        out = compile_(m, args, backend="reference")(*args)
    except FlexCompileError as e:
        assert "\n" not in str(e) and "FunctionalTensor" not in str(e), str(e)
        assert f"aten.{op}" in str(e), str(e)
    else:
        torch.testing.assert_close(out, m(*args), atol=1e-5, rtol=1e-5)


def test_functional_tensor_failure_in_a_modifier_is_explained():
    """If torch.export's decomposition fails inside a modifier with its
    internal FunctionalTensor error, the message names the op and modifier."""
    from torch_mlir_flex.importer.modifier_ops import explain_decomposition_failure

    m = Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: x + torch.sort(s.table)[0][j]))
    with torch.no_grad():
        ep = torch.export.export(m, qkv())
    err = RuntimeError("Attempting to use FunctionalTensor on its own. Instead, please use it with ...")
    msg = explain_decomposition_failure(ep.graph, err)
    assert msg.startswith("score_mod 'sdpa_score0' calls torch.sort (aten.sort), which is not supported "
                          "inside a flex_attention modifier"), msg
    assert explain_decomposition_failure(ep.graph, RuntimeError("other")) is None


@pytest.mark.parametrize("op,fn,where", [
    ("aten.rand_like", lambda s, q, k, v: flex_attention(
        q, k, v, score_mod=lambda x, b, h, i, j: x + torch.rand_like(x)), "score_mod @sdpa_score0"),
    ("aten.randn_like", lambda s, q, k, v: flex_attention(q, k, v) + torch.randn_like(q), "@main"),
    ("aten.native_dropout", lambda s, q, k, v: flex_attention(
        torch.nn.functional.dropout(q, 0.1, True), k, v), "@main"),
])
def test_random_ops_are_named(op, fn, where):
    e = compile_error(Fn(fn), qkv())
    assert e.stage == "frontend"
    one_line_cause(e, f"op '{op}' (random number generation) in {where} is not supported")
    assert "ml_program" not in str(e)


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_nonzero_in_model_compiles_and_matches(backend):
    """torch-mlir decomposes aten.nonzero into a cumsum scan, which our
    frontend lowers (frontend/tm_tensor): the model compiles and matches."""
    compile_ = require_compile()
    m = Fn(lambda s, q, k, v: flex_attention(q, k, v) + torch.nonzero(q > 0).sum())
    fn = compile_(m, qkv(), backend=backend)
    for seed in (1, 2):
        torch.manual_seed(seed)
        args = qkv()
        torch.testing.assert_close(fn(*args), m(*args), atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------
# Other ops of the model that lower to tm_tensor
# --------------------------------------------------------------------------


@pytest.mark.parametrize("what,fn,pattern", [
    # sort/cumsum/scatter lower (test/python/backend/test_tm_tensor_ops.py).
    ("kthvalue", lambda s, q, k, v: flex_attention(torch.kthvalue(q, 2, dim=-1, keepdim=True)[0] + q, k, v),
     r"op 'tm_tensor\.topk' \(from aten\.kthvalue"),
])
def test_model_op_lowering_to_tm_tensor_is_named(what, fn, pattern):
    e = compile_error(Fn(fn), qkv())
    assert e.stage == "frontend"
    assert re.search(pattern, str(e)), str(e)
    assert "has no lowering" in str(e)


# --------------------------------------------------------------------------
# Calling a compiled model with bad arguments
# --------------------------------------------------------------------------


def test_call_with_wrong_arguments():
    compile_ = require_compile()
    from torch_mlir_flex.backend import FlexCompileError

    q, k, v = qkv()
    fn = compile_(plain, (q, k, v))
    with pytest.raises(FlexCompileError, match=r"takes 3 tensor argument\(s\), got 2"):
        fn(q, k)
    with pytest.raises(FlexCompileError, match=r"argument 1 \(.*\): expected dtype torch.float32, got torch.float16"):
        fn(q, k.half(), v)
    with pytest.raises(FlexCompileError, match=r"argument 2 \(.*\): expected shape \[1x2x16x8\], got \[1, 2, 8, 8\]"):
        fn(q, k, v[:, :, :8])
    with pytest.raises(FlexCompileError, match=r"expected a torch.Tensor, got list"):
        fn(q, k, [1.0])


# --------------------------------------------------------------------------
# Importer: verify_flex_calls and the HOP layout check
# --------------------------------------------------------------------------


def _raw_import(model, args):
    from torch_mlir_flex.importer import export_and_import

    return export_and_import(model, *args, output_type="raw")


def test_verify_flex_calls_modifier_arity():
    from torch_mlir import ir
    from torch_mlir_flex.importer import FlexImportError, verify_flex_calls

    m = _raw_import(Fn(lambda s, q, k, v: flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: x + s.bias[h])), qkv())
    assert verify_flex_calls(m) == 1
    text = str(m)
    sig = "%arg4: !torch.vtensor<[],si32>) -> !torch.vtensor<[],f32>"
    assert sig in text, text
    bad = ir.Module.parse(text.replace(sig, "%arg4: !torch.vtensor<[],si32>, %extra: !torch.vtensor<[2],f32>) "
                                            "-> !torch.vtensor<[],f32>", 1), m.context)
    with pytest.raises(FlexImportError, match=r"@sdpa_score0 takes 6 arguments but the call provides 5 \+ 0 "
                                              r"captured buffers = 5"):
        verify_flex_calls(bad)


def test_verify_flex_calls_buffer_count():
    """Form B (runtime capture): num_score_buffers disagreeing with the operands."""
    from torch_mlir import ir
    from torch_mlir_flex.importer import FlexImportError, verify_flex_calls

    def fn(s, q, k, v, bias):
        return flex_attention(q, k, v, score_mod=lambda x, b, h, i, j: x + bias[h])

    m = _raw_import(Fn(fn), qkv() + (torch.randn(H),))
    text = str(m)
    assert "num_score_buffers = 1" in text, text
    bad = ir.Module.parse(text.replace("num_score_buffers = 1", "num_score_buffers = 2"), m.context)
    with pytest.raises(FlexImportError, match=r"has 7 operands, expected 6 \+ 2 \+ 0"):
        verify_flex_calls(bad)


def test_hop_layout_check(monkeypatch):
    """A torch whose flex_attention HOP has another argument count: the
    importer says so instead of importing garbage."""
    from torch_mlir_flex.importer import FlexImportError, flex_hop

    orig = flex_hop.parse_flex_node

    def ten_args(node):
        node.args = tuple(node.args) + (None,)
        return orig(node)

    monkeypatch.setattr(flex_hop, "parse_flex_node", ten_args)
    with pytest.raises(FlexImportError, match=r"HOP has 10 arguments, expected 9 .*torch 2\.13"):
        _raw_import(plain, qkv())


def test_hop_layout_check_through_compile(monkeypatch):
    from torch_mlir_flex.importer import flex_hop

    require_compile()
    # The stage cache would serve this program's import from an earlier
    # compile of it: the patched importer must run.
    monkeypatch.setenv("TORCH_MLIR_FLEX_STAGE_CACHE", "0")
    orig = flex_hop.parse_flex_node

    def eight_args(node):
        node.args = tuple(node.args)[:8]
        return orig(node)

    monkeypatch.setattr(flex_hop, "parse_flex_node", eight_args)
    e = compile_error(plain, qkv())
    assert e.stage == "import"
    assert "HOP has 8 arguments, expected 9" in str(e)
