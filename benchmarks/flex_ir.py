"""Hand-built flex.attention IR (tensor level) for tests and benchmarks.

    text = attention_ir(B=1, Hq=4, M=128, N=128, E=64, mask_mod=CAUSAL)
    fn = JitFunction(text, "f", pipeline="tiled")
    out = fn(q, k, v)

Region bodies are MLIR snippets using the block arguments `%s` (score,
f32; score_mod only), `%b`, `%h`, `%m` (q_idx), `%n` (kv_idx) (index); they
end by yielding `%r` (score_mod, f32) or `%c` (mask_mod, i1). Captured
tensors are function arguments after q, k, v, named by `captures`.
"""

# --- region snippets -------------------------------------------------------

CAUSAL = """
        %c = arith.cmpi sge, %m, %n : index"""


def sliding_window(w: int) -> str:
    """Causal sliding window: 0 <= q_idx - kv_idx <= w."""
    return f"""
        %d = arith.subi %m, %n : index
        %w = arith.constant {w} : index
        %c1 = arith.cmpi sle, %d, %w : index
        %c2 = arith.cmpi sge, %m, %n : index
        %c = arith.andi %c1, %c2 : i1"""


def shifted_causal(shift: int) -> str:
    """q_idx >= kv_idx + shift: the first `shift` rows are fully masked."""
    return f"""
        %sh = arith.constant {shift} : index
        %t = arith.addi %n, %sh : index
        %c = arith.cmpi sge, %m, %t : index"""


def document_mask(doc: str = "doc", length: int = 0) -> str:
    """doc[q_idx] == doc[kv_idx] (and causal): not analyzable (tensor reads)."""
    return f"""
        %dq = tensor.extract %{doc}[%m] : tensor<{length}xi64>
        %dk = tensor.extract %{doc}[%n] : tensor<{length}xi64>
        %c1 = arith.cmpi eq, %dq, %dk : i64
        %c2 = arith.cmpi sge, %m, %n : index
        %c = arith.andi %c1, %c2 : i1"""


def relative_bias(alpha: float) -> str:
    """s + alpha * (q_idx - kv_idx)."""
    return f"""
        %d = arith.subi %m, %n : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %a = arith.constant {alpha:.9e} : f32
        %bias = arith.mulf %a, %df : f32
        %r = arith.addf %s, %bias : f32"""


def softcap(cap: float) -> str:
    """cap * tanh(s / cap)."""
    return f"""
        %cap = arith.constant {cap:.9e} : f32
        %sx = arith.divf %s, %cap : f32
        %t = math.tanh %sx : f32
        %r = arith.mulf %t, %cap : f32"""


def alibi(slopes: str = "slopes", heads: int = 8) -> str:
    """s + slopes[h] * (kv_idx - q_idx) (captured per-head slopes)."""
    return f"""
        %sl = tensor.extract %{slopes}[%h] : tensor<{heads}xf32>
        %d = arith.subi %n, %m : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %sl, %df : f32
        %r = arith.addf %s, %bias : f32"""


def head_bias(bias: str = "bias", heads: int = 8) -> str:
    """s + bias[h] (captured)."""
    return f"""
        %bb = tensor.extract %{bias}[%h] : tensor<{heads}xf32>
        %r = arith.addf %s, %bb : f32"""


# --- the function ----------------------------------------------------------

def _t(shape, elt):
    return "tensor<" + "x".join("?" if d is None else str(d) for d in shape) + \
        ("x" if shape else "") + elt + ">"


def attention_ir(*, B, Hq, M, N, E, Ev=None, Hkv=None, Bkv=None, dtype="f32",
                 score_mod=None, mask_mod=None, captures=(), lse=False,
                 max_scores=False, scale=None, dynamic_mn=False,
                 func_name="f", out_f32=False) -> str:
    """A func.func @f(q, k, v, *captures) -> (out[, lse][, max]).

    captures: sequence of (name, mlir tensor type string).
    dynamic_mn: M and N are dynamic (`?`) in the function type.
    out_f32: return the output extended to f32 (the JIT cannot return f16).
    """
    Ev = E if Ev is None else Ev
    Hkv = Hq if Hkv is None else Hkv
    Bkv = B if Bkv is None else Bkv
    scale = E ** -0.5 if scale is None else scale
    Md = None if dynamic_mn else M
    Nd = None if dynamic_mn else N
    qt = _t([B, Hq, Md, E], dtype)
    kt = _t([Bkv, Hkv, Nd, E], dtype)
    vt = _t([Bkv, Hkv, Nd, Ev], dtype)
    ot = _t([B, Hq, Md, Ev], dtype)
    lt = _t([B, Hq, Md], "f32")
    args = [f"%q: {qt}", f"%k: {kt}", f"%v: {vt}"] + \
        [f"%{name}: {ty}" for name, ty in captures]
    res_types = [ot] + ([lt] if lse else []) + ([lt] if max_scores else [])
    ot32 = _t([B, Hq, Md, Ev], "f32")
    fres_types = ([ot32] if out_f32 else [ot]) + res_types[1:]
    lines = [f"func.func @{func_name}({', '.join(args)}) -> ({', '.join(fres_types)}) {{"]
    dyn = ""
    if dynamic_mn:
        lines.append("  %fi_c2 = arith.constant 2 : index")
        lines.append(f"  %fi_dm = tensor.dim %q, %fi_c2 : {qt}")
        dyn = "%fi_dm"
    lines.append(f"  %fi_o = tensor.empty({dyn}) : {ot}")
    if lse:
        lines.append(f"  %fi_l = tensor.empty({dyn}) : {lt}")
    if max_scores:
        lines.append(f"  %fi_x = tensor.empty({dyn}) : {lt}")
    op = [f"  %fi_r:{len(res_types)} = flex.attention ins(%q, %k, %v : {qt}, {kt}, {vt})"]
    if captures:
        op.append(f"      captures({', '.join('%' + n for n, _ in captures)} : "
                  f"{', '.join(t for _, t in captures)})")
    op.append(f"      outs(%fi_o : {ot})")
    if lse:
        op.append(f"      logsumexp(%fi_l : {lt})")
    if max_scores:
        op.append(f"      max_scores(%fi_x : {lt})")
    op.append(f"      scale({scale:.9e})")
    if score_mod:
        op.append("      score_mod {\n      ^bb0(%s: f32, %b: index, %h: index, "
                  "%m: index, %n: index):" + score_mod +
                  "\n        flex.yield %r : f32\n      }")
    if mask_mod:
        op.append("      mask_mod {\n      ^bb0(%b: index, %h: index, %m: index, "
                  "%n: index):" + mask_mod +
                  "\n        flex.yield %c : i1\n      }")
    op.append(f"      -> {', '.join(res_types)}")
    lines.append("\n".join(op))
    names = [f"%fi_r#{i}" for i in range(len(res_types))]
    if out_f32:
        lines.append(f"  %fi_e = tensor.empty({dyn}) : {ot32}")
        lines.append(
            "  %fi_ext = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, "
            "affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = [\"parallel\", "
            "\"parallel\", \"parallel\", \"parallel\"]}"
            f" ins(%fi_r#0 : {ot}) outs(%fi_e : {ot32}) {{\n"
            f"  ^bb0(%fi_a: {dtype}, %fi_b: f32):\n"
            f"    %fi_c = arith.extf %fi_a : {dtype} to f32\n"
            "    linalg.yield %fi_c : f32\n"
            f"  }} -> {ot32}")
        names[0] = "%fi_ext"
    lines.append(f"  return {', '.join(names)} : {', '.join(fres_types)}")
    lines.append("}")
    return "\n".join(lines) + "\n"
