"""pytest: flex.attention's scalar reference against eager PyTorch flex_attention.

Run (repository root): PYTHONPATH=python pytest test/python/dialect

Each test writes a tensor-level function around one `flex.attention` (see
`attention_ir`), JIT-runs it with the "reference" pipeline (bufferize,
flex-to-loops, LLVM) and compares with eager `flex_attention` on N(0, 1)
inputs. f32: rtol 1e-4, atol 1e-5. Our logsumexp / max_scores are in log2
units (the HOP's); the public API's lse is ours * ln 2.

The tiled tests apply upstream tiling (transform dialect, through `flex-opt
--transform-interpreter`) to shapes spanning several (partial) tiles before
lowering, so un-offset region indices or a wrong GQA head map after tiling
show up as numeric errors.
"""

import math
import os
import subprocess

import torch_mlir_flex  # noqa: F401  (must be imported before torch_mlir)

import pytest
import torch
from torch.nn.attention.flex_attention import (
    AuxRequest,
    create_block_mask,
    flex_attention,
)

from torch_mlir_flex.backend.jit import JitFunction
from torch_mlir_flex.mlir import ir

LN2 = math.log(2.0)
F32_TOL = dict(rtol=1e-4, atol=1e-5)
FLEX_OPT = os.path.join(os.path.dirname(torch_mlir_flex.__file__), "_bin", "flex-opt")

_MLIR_ELT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

# ---------------------------------------------------------------------------
# Region bodies (MLIR text). score_mod block args: %s, %b, %h, %m, %n;
# mask_mod block args: %b, %h, %m, %n. Each body ends with flex.yield.
# ---------------------------------------------------------------------------

CAUSAL = """
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1"""

# s + 0.05 * (q_idx - kv_idx)
REL_BIAS = """
        %d = arith.subi %m, %n : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %w = arith.constant 0.05 : f32
        %bias = arith.mulf %df, %w : f32
        %t = arith.addf %s, %bias : f32
        flex.yield %t : f32"""

# tanh soft-cap: cap * tanh(s / cap), cap = 2
SOFTCAP = """
        %cap = arith.constant 2.0 : f32
        %x = arith.divf %s, %cap : f32
        %t = math.tanh %x : f32
        %y = arith.mulf %t, %cap : f32
        flex.yield %y : f32"""

# s + bias[h] (bias captured)
HEAD_BIAS = """
        %x = tensor.extract %bias[%h] : tensor<{H}xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32"""

# rows q_idx < 4 fully masked, causal elsewhere
MASK_FIRST_ROWS = """
        %c4 = arith.constant 4 : index
        %keep_row = arith.cmpi sge, %m, %c4 : index
        %causal = arith.cmpi sge, %m, %n : index
        %c = arith.andi %keep_row, %causal : i1
        flex.yield %c : i1"""


def causal_mod(b, h, q, k):
    return q >= k


def rel_bias_mod(s, b, h, q, k):
    return s + (q - k).to(torch.float32) * 0.05


def softcap_mod(s, b, h, q, k):
    return torch.tanh(s / 2.0) * 2.0


def mask_first_rows(b, h, q, k):
    return (q >= 4) & (q >= k)


def ttype(shape, elt):
    return "tensor<" + "x".join(str(d) for d in shape) + "x" + elt + ">"


def attention_ir(B, Hq, M, E, Bkv, Hkv, N, Ev, dtype=torch.float32, scale=None,
                 score_mod=None, mask_mod=None, captures=(), lse=False,
                 max_scores=False, group_size=None, name="f"):
    """The text of `func.func @name(q, k, v, *captures) -> (out[, lse][, max])`.

    `captures`: (mlir name without %, shape, element type) tuples.
    """
    elt = _MLIR_ELT[dtype]
    if scale is None:
        scale = 1.0 / math.sqrt(E)
    tq, tk, tv = ttype([B, Hq, M, E], elt), ttype([Bkv, Hkv, N, E], elt), ttype([Bkv, Hkv, N, Ev], elt)
    to, ta = ttype([B, Hq, M, Ev], elt), ttype([B, Hq, M], "f32")
    cap_args = "".join(f", %{n}: {ttype(s, e)}" for n, s, e in captures)
    res_types = [to] + [ta] * (int(lse) + int(max_scores))
    lines = [f"func.func @{name}(%q: {tq}, %k: {tk}, %v: {tv}{cap_args}) -> ({', '.join(res_types)}) {{",
             f"  %o_init = tensor.empty() : {to}"]
    aux = ""
    if lse:
        lines.append(f"  %lse_init = tensor.empty() : {ta}")
        aux += f" logsumexp(%lse_init : {ta})"
    if max_scores:
        lines.append(f"  %max_init = tensor.empty() : {ta}")
        aux += f" max_scores(%max_init : {ta})"
    cap = ""
    if captures:
        cap = (" captures(" + ", ".join(f"%{n}" for n, _, _ in captures) + " : "
               + ", ".join(ttype(s, e) for _, s, e in captures) + ")")
    attrs = f" {{kv_group_size = {group_size} : i64}}" if group_size else ""
    regions = ""
    if score_mod:
        regions += (" score_mod {\n      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):"
                    + score_mod + "\n      }")
    if mask_mod:
        regions += (" mask_mod {\n      ^bb0(%b: index, %h: index, %m: index, %n: index):"
                    + mask_mod + "\n      }")
    nres = len(res_types)
    lhs = "%res" if nres == 1 else f"%res:{nres}"
    lines.append(f"  {lhs} = flex.attention ins(%q, %k, %v : {tq}, {tk}, {tv}){cap}"
                 f" outs(%o_init : {to}){aux} scale({float(scale)!r}){attrs}{regions}"
                 f" -> {', '.join(res_types)}")
    rets = ["%res"] if nres == 1 else [f"%res#{i}" for i in range(nres)]
    if dtype == torch.float16:
        # JitFunction cannot return f16 tensors (numpy's float16 has no ctypes
        # type); widen the output exactly with a linalg.generic.
        t32 = ttype([B, Hq, M, Ev], "f32")
        idmap = "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>"
        lines += [f"  %wide_init = tensor.empty() : {t32}",
                  f"  %wide = linalg.generic {{indexing_maps = [{idmap}, {idmap}], "
                  f"iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"parallel\"]}} "
                  f"ins({rets[0]} : {to}) outs(%wide_init : {t32}) {{",
                  "  ^bb0(%in: f16, %acc: f32):",
                  "    %w = arith.extf %in : f16 to f32",
                  "    linalg.yield %w : f32",
                  f"  }} -> {t32}"]
        rets[0], res_types[0] = "%wide", t32
        lines[0] = lines[0].replace(f"-> ({to}", f"-> ({t32}")
    lines.append(f"  return {', '.join(rets)} : {', '.join(res_types)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def transform_ir(*tile_sizes_list):
    """A transform script applying tile_using_for once per tile-size list,
    each to the op tiled by the previous one."""
    body = []
    handle = "%0"
    for i, tile_sizes in enumerate(tile_sizes_list):
        n_loops = sum(1 for t in tile_sizes if t)
        loops = f"%loops{i}" if n_loops == 1 else f"%loops{i}:{n_loops}"
        types = ", ".join(["!transform.any_op"] * (n_loops + 1))
        body.append(f"    %t{i}, {loops} = transform.structured.tile_using_for {handle} "
                    f"tile_sizes {list(tile_sizes)} : (!transform.any_op) -> ({types})")
        handle = f"%t{i}"
    body = "\n".join(body)
    return f"""
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {{transform.readonly}}) {{
    %0 = transform.structured.match ops{{["flex.attention"]}} in %arg0 : (!transform.any_op) -> !transform.any_op
{body}
    transform.yield
  }}
}}
"""


def tile(module_text, *tile_sizes_list):
    """Applies upstream tiling with flex-opt (once per tile-size list);
    returns the payload without the transform module."""
    proc = subprocess.run([FLEX_OPT, "--transform-interpreter", "-"],
                          input=module_text + transform_ir(*tile_sizes_list),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with ir.Context():
        module = ir.Module.parse(proc.stdout)
        for op in list(module.body.operations):
            if op.operation.name == "builtin.module":
                op.operation.erase()
        text = str(module)
    assert "scf.for" in text and "offsets(" in text, text
    return text


def run(text, *args):
    out = JitFunction(text, "f", pipeline="reference")(*args)
    return out if isinstance(out, tuple) else (out,)


def inputs(B, Hq, M, E, Bkv, Hkv, N, Ev, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, M, E, generator=g).to(dtype)
    k = torch.randn(Bkv, Hkv, N, E, generator=g).to(dtype)
    v = torch.randn(Bkv, Hkv, N, Ev, generator=g).to(dtype)
    return q, k, v


def eager(q, k, v, score_mod=None, mask_mod=None, scale=None, lse=False):
    B, Hq, M = q.shape[:3]
    N = k.shape[2]
    bm = None
    if mask_mod is not None:
        bm = create_block_mask(mask_mod, B, Hq, M, N, device="cpu")
    gqa = q.shape[1] != k.shape[1]
    if lse:
        out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, scale=scale,
                                  enable_gqa=gqa, return_aux=AuxRequest(lse=True))
        return out, aux.lse
    return flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, scale=scale,
                          enable_gqa=gqa)


def hop_max_scores(q, k, v, score_mod=None, mask_mod=None, scale=None):
    """(out, lse, max_scores) of the HOP itself, in log2 units (the public
    API does not return max_scores on CPU)."""
    from torch._higher_order_ops.flex_attention import flex_attention as hop
    from torch.nn.attention.flex_attention import _identity

    B, Hq, M = q.shape[:3]
    N = k.shape[2]
    bm = create_block_mask(mask_mod or (lambda b, h, m, n: m >= 0), B, Hq, M, N, device="cpu")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return hop(q, k, v, score_mod or _identity, bm.as_tuple(), scale,
               {"OUTPUT_LOGSUMEXP": True, "OUTPUT_MAX": True}, (), ())


def close(a, b, **tol):
    tol = tol or F32_TOL
    torch.testing.assert_close(a, b, **tol)


# ---------------------------------------------------------------------------
# f32 against eager flex_attention
# ---------------------------------------------------------------------------

SHAPE = dict(B=2, Hq=2, M=32, E=16, Bkv=2, Hkv=2, N=32, Ev=16)


@pytest.mark.parametrize("case", ["none", "causal", "rel_bias", "rel_bias_causal", "softcap_causal"])
def test_modifiers(case):
    s = SHAPE
    score_ir, mask_ir, score_py, mask_py = {
        "none": (None, None, None, None),
        "causal": (None, CAUSAL, None, causal_mod),
        "rel_bias": (REL_BIAS, None, rel_bias_mod, None),
        "rel_bias_causal": (REL_BIAS, CAUSAL, rel_bias_mod, causal_mod),
        # mask after score_mod: tanh(-inf) = -2 must not leak into the softmax.
        "softcap_causal": (SOFTCAP, CAUSAL, softcap_mod, causal_mod),
    }[case]
    q, k, v = inputs(**s)
    (out,) = run(attention_ir(**s, score_mod=score_ir, mask_mod=mask_ir), q, k, v)
    close(out, eager(q, k, v, score_py, mask_py))


def test_captured_head_bias():
    s = dict(SHAPE, Hq=4, Hkv=4)
    q, k, v = inputs(**s)
    bias = torch.randn(4, generator=torch.Generator().manual_seed(7))
    text = attention_ir(**s, score_mod=HEAD_BIAS.format(H=4),
                        captures=[("bias", [4], "f32")])
    (out,) = run(text, q, k, v, bias)
    close(out, eager(q, k, v, lambda sc, b, h, m, n: sc + bias[h]))


def test_gqa():
    s = dict(B=1, Hq=8, M=24, E=16, Bkv=1, Hkv=2, N=40, Ev=16)
    q, k, v = inputs(**s)
    (out, lse) = run(attention_ir(**s, mask_mod=CAUSAL, score_mod=REL_BIAS, lse=True), q, k, v)
    ref, ref_lse = eager(q, k, v, rel_bias_mod, causal_mod, lse=True)
    close(out, ref)
    close(lse * LN2, ref_lse)


def test_logsumexp_and_max_scores():
    s = SHAPE
    q, k, v = inputs(**s)
    out, lse, mx = run(attention_ir(**s, score_mod=SOFTCAP, mask_mod=CAUSAL, lse=True,
                                    max_scores=True), q, k, v)
    ref, ref_lse = eager(q, k, v, softcap_mod, causal_mod, lse=True)
    close(out, ref)
    close(lse * LN2, ref_lse)
    h_out, h_lse, h_max = hop_max_scores(q, k, v, softcap_mod, causal_mod)
    close(lse, h_lse)  # log2 units, as the HOP
    close(mx, h_max)


def test_fully_masked_rows():
    s = SHAPE
    q, k, v = inputs(**s)
    out, lse, mx = run(attention_ir(**s, mask_mod=MASK_FIRST_ROWS, lse=True, max_scores=True),
                       q, k, v)
    ref, ref_lse = eager(q, k, v, None, mask_first_rows, lse=True)
    assert not out.isnan().any() and not lse.isnan().any()
    assert (out[:, :, :4] == 0).all()
    assert torch.isneginf(lse[:, :, :4]).all()
    close(out, ref)
    close(lse * LN2, ref_lse)
    # The HOP's convention for max_scores of a fully masked row is -inf too.
    _, h_lse, h_max = hop_max_scores(q, k, v, None, mask_first_rows)
    assert torch.isneginf(h_max[:, :, :4]).all()
    close(mx, h_max)
    close(lse, h_lse)


def test_score_mod_returns_neg_inf():
    """score_mod giving -inf for a whole row behaves like a fully masked row."""
    s = dict(SHAPE, B=1, Bkv=1)
    q, k, v = inputs(**s)
    body = """
        %c0 = arith.constant 0 : index
        %first = arith.cmpi eq, %m, %c0 : index
        %ninf = arith.constant 0xFF800000 : f32
        %t = arith.select %first, %ninf, %s : f32
        flex.yield %t : f32"""
    out, lse = run(attention_ir(**s, score_mod=body, lse=True), q, k, v)

    def py(sc, b, h, m, n):
        return torch.where(m == 0, torch.tensor(-float("inf")), sc)

    ref, ref_lse = eager(q, k, v, py, lse=True)
    assert (out[:, :, 0] == 0).all() and torch.isneginf(lse[:, :, 0]).all()
    close(out, ref)
    close(lse * LN2, ref_lse)


def test_m_ne_n_ev_ne_e_scale():
    s = dict(B=1, Hq=2, M=20, E=16, Bkv=1, Hkv=2, N=52, Ev=8)
    q, k, v = inputs(**s)
    (out,) = run(attention_ir(**s, scale=0.3, mask_mod=CAUSAL, score_mod=REL_BIAS), q, k, v)
    close(out, eager(q, k, v, rel_bias_mod, causal_mod, scale=0.3))


def test_large_head_dim():
    """E = 256 stays whole in the dot (a tiled E would split the softmax input)."""
    s = dict(B=1, Hq=2, M=16, E=256, Bkv=1, Hkv=2, N=24, Ev=32)
    q, k, v = inputs(**s)
    (out, lse) = run(attention_ir(**s, score_mod=SOFTCAP, lse=True), q, k, v)
    ref, ref_lse = eager(q, k, v, softcap_mod, lse=True)
    close(out, ref)
    close(lse * LN2, ref_lse)


def test_kv_batch_broadcast():
    s = dict(B=3, Hq=2, M=16, E=16, Bkv=1, Hkv=2, N=24, Ev=16)
    q, k, v = inputs(**s)
    (out,) = run(attention_ir(**s, mask_mod=CAUSAL), q, k, v)
    # eager broadcasts a key/value batch of 1 too; check against both.
    close(out, eager(q, k, v, None, causal_mod))
    close(out, eager(q, k.expand(3, -1, -1, -1), v.expand(3, -1, -1, -1), None, causal_mod))


# ---------------------------------------------------------------------------
# f16 / bf16. Eager rounds the softmax to the input dtype before P @ V and
# accumulates there; we accumulate in f32 and round the output once. So we
# compare (1) with eager on the upcast f32 inputs at the output's rounding
# error (half an ulp ~ 2^-11 / 2^-8 relative) and (2) with eager in the low
# precision at a few ulps.
# ---------------------------------------------------------------------------

LOW_TOL = {
    torch.float16: (dict(rtol=1e-3, atol=1e-3), dict(rtol=4e-3, atol=4e-3)),
    torch.bfloat16: (dict(rtol=8e-3, atol=8e-3), dict(rtol=3e-2, atol=3e-2)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision(dtype):
    s = dict(B=1, Hq=4, M=32, E=16, Bkv=1, Hkv=2, N=32, Ev=16)
    q, k, v = inputs(**s, dtype=dtype)
    out, lse = run(attention_ir(**s, dtype=dtype, score_mod=REL_BIAS, mask_mod=CAUSAL,
                                lse=True), q, k, v)
    # f16 outputs come back widened to f32 (see attention_ir); exact.
    assert out.dtype == (torch.float32 if dtype == torch.float16 else dtype)
    assert lse.dtype == torch.float32
    tol_f32, tol_low = LOW_TOL[dtype]
    ref32, ref32_lse = eager(q.float(), k.float(), v.float(), rel_bias_mod, causal_mod, lse=True)
    close(out.float(), ref32, **tol_f32)
    close(lse * LN2, ref32_lse, **F32_TOL)  # lse is computed in f32 from the same inputs
    ref = eager(q, k, v, rel_bias_mod, causal_mod)
    close(out.float(), ref.float(), **tol_low)


# ---------------------------------------------------------------------------
# Tiled op: upstream tiling, then the reference lowering of each tile.
# ---------------------------------------------------------------------------

TILED_SHAPE = dict(B=2, Hq=4, M=40, E=16, Bkv=2, Hkv=2, N=56, Ev=24)


@pytest.mark.parametrize("tile_sizes", [
    [1, 2, 16, 0, 0],   # several M tiles, the last one partial (40 = 16 + 16 + 8)
    [1, 1, 8, 0, 8],    # one head per tile (GQA map needs the head offset), Ev tiled
    [2, 3, 12, 0, 0],   # partial head tiles (4 = 3 + 1) and M tiles
    [0, 0, 0, 0, 16],   # Ev only, partial (24 = 16 + 8)
])
def test_tiled_causal_rel_bias(tile_sizes):
    s = TILED_SHAPE
    q, k, v = inputs(**s)
    text = tile(attention_ir(**s, score_mod=REL_BIAS, mask_mod=CAUSAL, lse=True,
                             max_scores=True), tile_sizes)
    out, lse, mx = run(text, q, k, v)
    ref, ref_lse = eager(q, k, v, rel_bias_mod, causal_mod, lse=True)
    close(out, ref)
    close(lse * LN2, ref_lse)
    _, _, h_max = hop_max_scores(q, k, v, rel_bias_mod, causal_mod)
    close(mx, h_max)


def test_tiled_captured_head_bias_kv_broadcast():
    s = dict(B=3, Hq=4, M=24, E=16, Bkv=1, Hkv=2, N=24, Ev=16)
    q, k, v = inputs(**s)
    bias = torch.randn(4, generator=torch.Generator().manual_seed(3))
    text = tile(attention_ir(**s, score_mod=HEAD_BIAS.format(H=4), mask_mod=CAUSAL,
                             captures=[("bias", [4], "f32")]), [1, 1, 8, 0, 0])
    (out,) = run(text, q, k, v, bias)
    close(out, eager(q, k, v, lambda sc, b, h, m, n: sc + bias[h], causal_mod))


def test_tiled_twice():
    """Tiling a tiled op composes the offsets."""
    s = TILED_SHAPE
    q, k, v = inputs(**s)
    text = tile(attention_ir(**s, score_mod=REL_BIAS, mask_mod=CAUSAL),
                [1, 2, 16, 0, 0], [0, 1, 4, 0, 0])
    (out,) = run(text, q, k, v)
    close(out, eager(q, k, v, rel_bias_mod, causal_mod))
