"""Error messages at the flex IR level: the flex.attention verifier through
flex-opt (exit 1 + diagnostic, no crash) and through the Python bindings
(`torch_mlir_flex.mlir.ir.Module.parse` raises MLIRError), and
flex-materialize diagnostics on frontend-shaped input."""

import re

import pytest

from .helpers import ROOT, died_by_signal, require_pass, run_flex_opt


def attention(q, k, v, o, elt="f32", extra_attrs="", lse=None):
    """A function with one flex.attention on tensors of the given shapes."""
    t = lambda s, e=elt: f"tensor<{'x'.join(map(str, s))}x{e}>"
    lse_clause = f" logsumexp(%l : {t(lse, 'f32')})" if lse else ""
    results = f"{t(o)}, {t(lse, 'f32')}" if lse else t(o)
    args = f"%q: {t(q)}, %k: {t(k)}, %v: {t(v)}, %o: {t(o)}" + (f", %l: {t(lse, 'f32')}" if lse else "")
    return f"""
func.func @main({args}) -> ({results}) {{
  %r{':2' if lse else ''} = flex.attention ins(%q, %k, %v : {t(q)}, {t(k)}, {t(v)})
      outs(%o : {t(o)}){lse_clause} scale(0.125) {extra_attrs} -> {results}
  return %r{'#0, %r#1' if lse else ''} : {results}
}}
"""


CASES = {
    # name: (module text, regex the diagnostic must match)
    "E": (attention([1, 2, 16, 8], [1, 2, 16, 4], [1, 2, 16, 8], [1, 2, 16, 8]),
          r"query head dim E = 8 differs from key head dim 4"),
    "N": (attention([1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 32, 8], [1, 2, 16, 8]),
          r"key sequence length N = 16 differs from value sequence length 32"),
    "B": (attention([3, 2, 16, 8], [2, 2, 16, 8], [2, 2, 16, 8], [3, 2, 16, 8]),
          r"key batch size 2 must equal the query batch size 3 or be 1"),
    "Hq_not_multiple_of_Hkv": (attention([1, 3, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [1, 3, 16, 8]),
                               r"query heads Hq = 3 must be a multiple of key/value heads Hkv = 2"),
    "output_shape": (attention([1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 8, 8]),
                     r"expected output shape \[B, Hq, M, Ev\] = \[1, 2, 16, 8\], got \[1, 2, 8, 8\]"),
    "lse_shape": (attention([1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], lse=[1, 2, 8]),
                  r"expected logsumexp shape \[B, Hq, M\] = \[1, 2, 16\], got \[1, 2, 8\]"),
    "f64": (attention([1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], elt="f64"),
            r"unsupported query element type 'f64'; expected f32, f16 or bf16"),
    "i32": (attention([1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], elt="i32"),
            r"unsupported query element type 'i32'"),
    # Found by the fuzzer: a kv_group_size too small for Hkv made the
    # lowering read past the key/value buffers (SIGSEGV at run time).
    "kv_group_size_out_of_range": (
        attention([1, 64, 4, 64], [1, 1, 32, 64], [1, 1, 32, 64], [1, 64, 4, 64],
                  extra_attrs="{kv_group_size = 1 : i64}"),
        r"kv_group_size = 1 maps query head 63 to key/value head 63, but key/value have Hkv = 1 heads"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_verifier_flex_opt(name):
    text, pattern = CASES[name]
    r = run_flex_opt(text)
    assert not died_by_signal(r.returncode), r.stderr
    assert r.returncode == 1, r.stdout
    assert re.search(pattern, r.stderr), r.stderr
    assert "'flex.attention' op" in r.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_verifier_python_parse(name):
    from torch_mlir_flex.mlir import ir

    text, pattern = CASES[name]
    with ir.Context():
        with pytest.raises(ir.MLIRError) as e:
            ir.Module.parse(text)
    assert re.search(pattern, str(e.value)), str(e.value)


@pytest.mark.parametrize("name", ["E", "N", "f64", "kv_group_size_out_of_range"])
def test_verifier_jit(name):
    """JitFunction and compile_mlir turn the verifier error into FlexBackendError."""
    from torch_mlir_flex.backend import FlexBackendError, JitFunction, compile_mlir

    text, pattern = CASES[name]
    with pytest.raises(FlexBackendError, match=pattern):
        JitFunction(text, "main", pipeline="reference")
    with pytest.raises(FlexBackendError, match=pattern):
        compile_mlir(text)


def test_valid_kv_group_size_tile_still_verifies():
    # A tile at head offset 2 with G = 4 reads kv head (2 + 1) / 4 = 0: fine.
    text = attention([1, 2, 4, 8], [1, 1, 9, 8], [1, 1, 9, 8], [1, 2, 4, 8],
                     extra_attrs="{kv_group_size = 4 : i64}")
    text = text.replace("outs(%o", "offsets(%c0, %c2, %c4) outs(%o").replace(
        "  %r = ", "  %c0 = arith.constant 0 : index\n  %c2 = arith.constant 2 : index\n"
                   "  %c4 = arith.constant 4 : index\n  %r = ")
    r = run_flex_opt(text)
    assert r.returncode == 0, r.stderr
    # ... but not at head offset 6 (kv head (6 + 1) / 4 = 1 >= Hkv = 1).
    r = run_flex_opt(text.replace("arith.constant 2 : index", "arith.constant 6 : index"))
    assert r.returncode == 1 and "maps query head 7 to key/value head 1" in r.stderr, r.stderr


# --------------------------------------------------------------------------
# flex-materialize on frontend-shaped input
# --------------------------------------------------------------------------

OUTLINED = """
func.func private @score(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func @main(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %bias: tensor<2xf32>) -> tensor<1x2x16x8xf32> {
  %r:3 = call @__flex_attention_0(%q, %k, %v, %bias) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>)
  return %r#0 : tensor<1x2x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35 : f64, flex.score_mod = @score}
"""


def test_materialize_modifier_arity_disagrees_with_operands():
    """The call passes one score buffer but @score takes only the 5 fixed args."""
    require_pass("flex-materialize")
    r = run_flex_opt(OUTLINED, "--flex-materialize")
    assert not died_by_signal(r.returncode), r.stderr
    assert r.returncode == 1
    assert re.search(r"score_mod @score has 5 arguments, expected 5 \+ 1 captured buffer", r.stderr), r.stderr


def test_materialize_buffer_count_disagrees_with_operands():
    require_pass("flex-materialize")
    text = OUTLINED.replace("flex.num_score_buffers = 1", "flex.num_score_buffers = 2")
    r = run_flex_opt(text, "--flex-materialize")
    assert r.returncode == 1
    assert re.search(r"expected 5 operands \(q, k, v, 2 score buffer\(s\), 0 mask buffer\(s\)\), got 4",
                     r.stderr), r.stderr


def test_materialize_through_compile_mlir():
    """compile_mlir names the stage and keeps the pass diagnostic."""
    require_pass("flex-materialize")
    from torch_mlir_flex.backend import FlexBackendError, compile_mlir

    with pytest.raises(FlexBackendError, match=r"(?s)^materialize: .*score_mod @score has 5 arguments"):
        compile_mlir(OUTLINED)


# --------------------------------------------------------------------------
# Inputs that used to abort flex-opt: interface models a registered dialect
# promises but nobody registered (MLIR reports "checking for an interface
# ... that was promised by dialect 'X' but never implemented" and aborts),
# and transform sizes out of range.
# --------------------------------------------------------------------------

_LLVM_CALL = """
llvm.func @g() {
  llvm.return
}
llvm.func @f() {
  llvm.call @g() : () -> ()
  llvm.return
}
"""
_GPU_LAUNCH = """
module attributes {transform.with_named_sequence} {}
func.func @f(%m: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%a = %c1, %b = %c1, %c = %c1) {
    %0 = memref.alloc() : memref<4xf32>
    memref.copy %m, %0 : memref<4xf32> to memref<4xf32>
    gpu.terminator
  }
  return
}
"""
_DIALECT_TO_LLVM = """
func.func @f(%a: i32) -> i32 {
  %r = arith.addi %a, %a : i32
  return %r : i32
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.structured.match ops{["func.func"]} in %arg0 : (!transform.any_op) -> !transform.any_op
    transform.apply_conversion_patterns to %0 {
      transform.apply_conversion_patterns.dialect_to_llvm "arith"
    } {
    } : !transform.any_op
    transform.yield
  }
}
"""
_MEMREF_LOAD = """
func.func @f(%m: memref<4xf32>, %i: index) -> f32 {
  %v = memref.load %m[%i] : memref<4xf32>
  return %v : f32
}
"""


def _widen_chunk_6():
    """Chunk #6 of widen-i1-memrefs.mlir, unmodified: cf branches."""
    from .fuzz import _strip_lit

    return _strip_lit((ROOT / "test/Dialect/Flex/Memory/widen-i1-memrefs.mlir").read_text().split("// -----")[6])


def _reference_pipeline():
    from torch_mlir_flex.backend import get_pipeline

    return "--pass-pipeline=" + get_pipeline("reference")


PROMISED = {
    # name: (module text or a function making it, flex-opt args, regex the output must match)
    "cf_bufferization": (_widen_chunk_6, _reference_pipeline, r"llvm\.cond_br"),
    "cf_tensor_branches": (lambda: (ROOT / "test/robustness/inputs/crashes/cf_branch_tensors.mlir").read_text(),
                           lambda: "--one-shot-bufferize=bufferize-function-boundaries", r"cf\.br \^bb3\(%arg0 : memref"),
    "llvm_inliner": (lambda: _LLVM_CALL, lambda: "--inline", r"llvm\.func @f\(\) \{\s*llvm\.return"),
    "gpu_buffer_deallocation": (lambda: _GPU_LAUNCH, lambda: "--ownership-based-buffer-deallocation",
                                r"memref\.dealloc|bufferization\.dealloc"),
    # The verifier finds arith's ConvertToLLVMPatternInterface, then reports
    # the missing type converter (a diagnostic: exit 1).
    "convert_to_llvm_interface": (lambda: _DIALECT_TO_LLVM, lambda: "--transform-interpreter",
                                  r"error: pattern descriptor does not specify type converter"),
    "runtime_verification": (lambda: _MEMREF_LOAD, lambda: "--generate-runtime-verification",
                             r"cf\.assert .*out-of-bounds"),
}


@pytest.mark.parametrize("name", sorted(PROMISED))
def test_promised_interface_models_are_registered(name):
    text, args, pattern = PROMISED[name]
    r = run_flex_opt(text(), args())
    assert not died_by_signal(r.returncode), r.stderr[-2000:]
    assert r.returncode == (1 if pattern.startswith("error:") else 0), r.stderr[-2000:]
    assert re.search(pattern, r.stdout + r.stderr), (r.stdout + r.stderr)[-2000:]


TRANSFORM_SIZES = {
    # name: (tile op text, diagnostic)
    "for_int64_min": ("transform.structured.tile_using_for %0 tile_sizes [0, 0, -9223372036854775808]",
                      r"'transform.structured.tile_using_for' op has 1 dynamic sizes .* but only 0 size operands"),
    "forall_int64_min": ("transform.structured.tile_using_forall %0 tile_sizes [-9223372036854775808, 2]",
                         r"'transform.structured.tile_using_forall' op has 1 dynamic sizes"),
    "for_negative": ("transform.structured.tile_using_for %0 tile_sizes [0, -1]",
                     r"'transform.structured.tile_using_for' op 'static_sizes' holds -1: sizes must be >= 0"),
    "forall_negative_threads": ("transform.structured.tile_using_forall %0 num_threads [2, -4]",
                                r"'static_num_threads' holds -4"),
}


def _tiling_script(tile_op):
    return f"""
func.func @main(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>) -> tensor<8x8xf32> {{
  %r = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}}
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%arg0: !transform.any_op {{transform.readonly}}) {{
    %0 = transform.structured.match ops{{["linalg.matmul"]}} in %arg0 : (!transform.any_op) -> !transform.any_op
    %1, %2 = {tile_op} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }}
}}
"""


@pytest.mark.parametrize("name", sorted(TRANSFORM_SIZES))
def test_transform_sizes_out_of_range(name):
    """flex-opt diagnoses them before the upstream verifier / tiling asserts;
    compile_mlir rejects the text before parsing."""
    from torch_mlir_flex.backend import FlexBackendError, compile_mlir

    op, pattern = TRANSFORM_SIZES[name]
    text = _tiling_script(op)
    r = run_flex_opt(text, "--transform-interpreter")
    assert not died_by_signal(r.returncode), r.stderr[-2000:]
    assert r.returncode == 1 and re.search(pattern, r.stderr), r.stderr
    with pytest.raises(FlexBackendError, match=r"has a negative size -\d+; transform sizes must be >= 0"):
        compile_mlir(text)


def test_transform_sizes_in_range_still_work():
    r = run_flex_opt(_tiling_script("transform.structured.tile_using_for %0 tile_sizes [4, 0, 0]"),
                     "--transform-interpreter")
    assert r.returncode == 0 and "scf.for" in r.stdout, r.stderr


def test_array_of_index_rejected_by_flex_opt():
    """The parser asserts on array<index: ...>; flex-opt rejects the text first."""
    r = run_flex_opt((ROOT / "test/robustness/inputs/crashes/array_index_attr.mlir").read_text())
    assert r.returncode == 1 and "array<index: ...>) is not supported" in r.stderr, r.stderr
