"""torch_mlir_flex.compile: API behaviour, kept IR, error messages.

    PYTHONPATH=python pytest -q test/python/backend/test_compile.py
"""

import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.export import Dim
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

from torch_mlir_flex import FlexBackendError
from torch_mlir_flex.backend import PIPELINES, CompiledModule, FlexCompileError, compile_mlir
from torch_mlir_flex.backend.compile import materialize_available, pipeline_until

warnings.filterwarnings("ignore")

needs_materialize = pytest.mark.skipif(not materialize_available(),
                                       reason="flex-materialize is not in this build of the bindings")


def causal(b, h, q, kv):
    return q >= kv


BM = create_block_mask(causal, None, None, 32, 32, device="cpu")


class Causal(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, block_mask=BM)


class WithLse(torch.nn.Module):
    def forward(self, q, k, v):
        out, aux = flex_attention(q, k, v, block_mask=BM, return_aux=AuxRequest(lse=True))
        return out, aux.lse


def qkv(B=1, H=2, S=32, E=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, E, generator=g).to(dtype) for _ in range(3))


@pytest.fixture(scope="module")
def causal_fn():
    return torch_mlir_flex.compile(Causal(), qkv())


def test_exports():
    from torch_mlir_flex.backend.compile import compile as compile_fn

    assert torch_mlir_flex.compile is compile_fn
    assert issubclass(FlexCompileError, FlexBackendError)
    assert torch_mlir_flex.FlexBackendError is FlexBackendError


@needs_materialize
def test_compile_matches_eager_and_keeps_ir(causal_fn):
    args = qkv()
    got = causal_fn(*args)
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, Causal()(*args), rtol=1e-3, atol=1e-5)
    assert isinstance(causal_fn, CompiledModule)
    assert "hop_flex_attention" in causal_fn.torch_ir
    assert "call @__flex_attention_0" in causal_fn.linalg_ir
    assert "flex.attention" in causal_fn.flex_ir and "__flex_attention_0" not in causal_fn.flex_ir
    assert "llvm.func" in causal_fn.lowered_ir
    loops = causal_fn.loops_ir()
    assert "scf.for" in loops and "flex.attention" not in loops


@needs_materialize
def test_tuple_outputs_preserved():
    fn = torch_mlir_flex.compile(WithLse(), qkv())
    args = qkv()
    got = fn(*args)
    exp = WithLse()(*args)
    assert isinstance(got, tuple) and len(got) == 2
    for g, e in zip(got, exp):
        torch.testing.assert_close(g, e, rtol=1e-3, atol=1e-5)


@needs_materialize
def test_wrong_arg_count(causal_fn):
    with pytest.raises(FlexCompileError, match=r"takes 3 tensor argument\(s\), got 2") as ei:
        causal_fn(*qkv()[:2])
    assert ei.value.stage == "call"


@needs_materialize
def test_wrong_dtype(causal_fn):
    q, k, v = qkv()
    with pytest.raises(FlexCompileError, match=r"argument 1 \(k\): expected dtype torch.float32, got torch.float64"):
        causal_fn(q, k.double(), v)


@needs_materialize
def test_wrong_shape_and_type(causal_fn):
    q, k, v = qkv()
    with pytest.raises(FlexCompileError, match=r"argument 2 \(v\): expected shape \[1x2x32x16\], got \[1, 2, 32, 8\]"):
        causal_fn(q, k, v[..., :8])
    with pytest.raises(FlexCompileError, match="expected a torch.Tensor, got list"):
        causal_fn(q, k, [1.0])


class KthAfter(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.kthvalue(flex_attention(q, k, v), 2, dim=-1).values


def test_tm_tensor_op_is_named():
    with pytest.raises(FlexCompileError) as ei:
        torch_mlir_flex.compile(KthAfter(), qkv())
    e = ei.value
    assert e.stage == "frontend"
    assert "tm_tensor.topk" in str(e) and "aten.kthvalue" in str(e)
    assert str(e).startswith("frontend: ")
    assert isinstance(e, FlexBackendError)


def test_unknown_backend():
    with pytest.raises(FlexCompileError, match="unknown backend 'nope'"):
        torch_mlir_flex.compile(Causal(), qkv(), backend="nope")


def test_non_tensor_example_arg():
    with pytest.raises(FlexCompileError, match="example argument 2 is a str"):
        torch_mlir_flex.compile(lambda q, k, s: flex_attention(q, k, k), (*qkv()[:2], "x"))


def test_float_example_arg_is_a_checked_constant():
    """torch.export specializes a float argument: the call checks it."""
    fn = torch_mlir_flex.compile(lambda q, k, s: flex_attention(q, k, k, scale=s), (*qkv()[:2], 0.5))
    q, k, _ = qkv()
    torch.testing.assert_close(fn(q, k, 0.5), flex_attention(q, k, k, scale=0.5), rtol=1e-5, atol=1e-5)
    with pytest.raises(FlexCompileError, match="argument 2 is 0.25, but the function was compiled for 0.5"):
        fn(q, k, 0.25)


def test_export_failure_is_reported():
    def bad(q, k, v):
        if q.sum() > 0:  # data-dependent control flow
            return flex_attention(q, k, v)
        return q

    with pytest.raises(FlexCompileError) as ei:
        torch_mlir_flex.compile(bad, qkv())
    assert ei.value.stage == "export"


@needs_materialize
def test_plain_function_and_single_tensor_args():
    fn = torch_mlir_flex.compile(lambda q, k, v: flex_attention(q, k, v) * 2.0, qkv())
    args = qkv()
    torch.testing.assert_close(fn(*args), flex_attention(*args) * 2.0, rtol=1e-3, atol=1e-5)


@needs_materialize
def test_dynamic_sequence_length():
    S = Dim("S", min=2, max=128)
    fn = torch_mlir_flex.compile(
        lambda q, k, v: flex_attention(q, k, v), qkv(),
        dynamic_shapes={"args": ({2: S}, {2: S}, {2: S})})
    assert "?x16xf32" in fn.linalg_ir
    for n in (7, 32, 50):
        args = qkv(S=n)
        torch.testing.assert_close(fn(*args), flex_attention(*args), rtol=1e-3, atol=1e-5)


class KeyPad(torch.nn.Module):
    def forward(self, q, k, v, keep, doc):
        def mask(b, h, m, n):
            return (keep[n] != 0) & (doc[m] == doc[n])

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm)


@needs_materialize
def test_int_inputs():
    fn = torch_mlir_flex.compile(KeyPad(), (*qkv(), torch.ones(32, dtype=torch.int8),
                                            torch.zeros(32, dtype=torch.int32)))
    keep = (torch.arange(32) < 20).to(torch.int8)
    doc = (torch.arange(32) >= 10).to(torch.int32)
    args = (*qkv(), keep, doc)
    torch.testing.assert_close(fn(*args), KeyPad()(*args), rtol=1e-3, atol=1e-5)
    with pytest.raises(FlexCompileError, match=r"argument 4 \(doc\): expected dtype torch.int32, got torch.int64"):
        fn(*qkv(), keep, doc.long())


class BoolPad(torch.nn.Module):
    """A bool input read directly by mask_mod (`pad[kv_idx]`), plus a bool
    output computed from it."""

    def forward(self, q, k, v, pad):
        def mask(b, h, m, n):
            return pad[n]

        bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
        return flex_attention(q, k, v, block_mask=bm), ~pad


@needs_materialize
@pytest.mark.parametrize("backend", sorted(PIPELINES))
def test_bool_inputs_and_outputs(backend):
    # Memrefs of i1 are widened to i8 (flex-widen-i1-memrefs) before
    # finalize-memref-to-llvm, which asserts on sub-byte loads/stores.
    fn = torch_mlir_flex.compile(BoolPad(), (*qkv(), torch.ones(32, dtype=torch.bool)),
                                 backend=backend)
    for pad in (torch.arange(32) < 20, (torch.arange(32) % 3) != 1):
        args = (*qkv(), pad)
        out, inv = fn(*args)
        want_out, want_inv = BoolPad()(*args)
        assert inv.dtype == torch.bool
        assert torch.equal(inv, want_inv)
        torch.testing.assert_close(out, want_out, rtol=1e-3, atol=1e-5)
    # KeyPad with a bool `keep` (`keep[n] != 0` on bool).
    fn = torch_mlir_flex.compile(KeyPad(), (*qkv(), torch.ones(32, dtype=torch.bool),
                                            torch.zeros(32, dtype=torch.int32)), backend=backend)
    args = (*qkv(), torch.arange(32) < 20, (torch.arange(32) >= 10).to(torch.int32))
    torch.testing.assert_close(fn(*args), KeyPad()(*args), rtol=1e-3, atol=1e-5)
    with pytest.raises(FlexCompileError, match=r"expected dtype torch.bool, got torch.uint8"):
        fn(*args[:3], args[3].to(torch.uint8), args[4])


@needs_materialize
@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-2), (torch.bfloat16, 2e-2)])
def test_half_dtypes(dtype, tol):
    fn = torch_mlir_flex.compile(Causal(), qkv(dtype=dtype))
    args = qkv(dtype=dtype)
    got = fn(*args)
    assert got.dtype == dtype
    torch.testing.assert_close(got, Causal()(*args), rtol=tol, atol=tol)


FLEX_IR = """
func.func @main(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %o = tensor.empty() : tensor<1x2x8x4xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
     outs(%o : tensor<1x2x8x4xf32>) scale(0.5)
     mask_mod {
     ^bb0(%b: index, %h: index, %m: index, %n: index):
       %c = arith.cmpi sge, %m, %n : index
       flex.yield %c : i1
     } -> tensor<1x2x8x4xf32>
  return %r : tensor<1x2x8x4xf32>
}
"""


@pytest.mark.parametrize("backend", sorted(PIPELINES))
def test_compile_mlir_flex_ir(backend):
    fn = compile_mlir(FLEX_IR, backend=backend)
    q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
    bm = create_block_mask(causal, None, None, 8, 8, device="cpu")
    torch.testing.assert_close(fn(q, k, v), flex_attention(q, k, v, block_mask=bm, scale=0.5),
                               rtol=1e-3, atol=1e-5)
    assert "scf.for" in fn.loops_ir() or "scf.forall" in fn.loops_ir()


def test_compile_mlir_parse_error():
    with pytest.raises(FlexCompileError, match="cannot parse"):
        compile_mlir("func.func @main( {")


@pytest.mark.parametrize("backend", sorted(PIPELINES))
def test_pipeline_until_is_a_valid_prefix(backend):
    from torch_mlir_flex.mlir import ir, passmanager

    p = pipeline_until(backend)
    assert "convert-scf-to-cf" not in p and "finalize-memref-to-llvm" not in p
    with ir.Context():
        passmanager.PassManager.parse(p)


# ---------------------------------------------------------------------------
# CLI (python -m torch_mlir_flex): errors are one line on stderr, exit 1.
# ---------------------------------------------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

MODEL_FILE = '''
import torch
from torch.nn.attention.flex_attention import flex_attention, create_block_mask
BM = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 16, 16, device="cpu")
class M(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, block_mask=BM)
def get_model():
    return M()
def get_inputs():
    return tuple(torch.randn(1, 2, 16, 8) for _ in range(3))
'''

SORT_MODEL_FILE = MODEL_FILE.replace("return flex_attention(q, k, v, block_mask=BM)",
                                     "return torch.kthvalue(flex_attention(q, k, v), 2, dim=-1).values")


def _cli(*args):
    env = dict(os.environ)
    py = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
    env["PYTHONPATH"] = py + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "torch_mlir_flex", *args], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "model.py").write_text(MODEL_FILE)
    (tmp_path / "sort.py").write_text(SORT_MODEL_FILE)
    (tmp_path / "nofuncs.py").write_text("x = 1\n")
    (tmp_path / "syntax.py").write_text("def (\n")
    (tmp_path / "bad.mlir").write_text("func.func @main( {\n")
    (tmp_path / "flex.mlir").write_text(FLEX_IR)
    return tmp_path


@needs_materialize
def test_cli_model_run_and_print(files):
    r = _cli("compile", str(files / "model.py"), "--run", "--print-after", "flex", "--print-after", "loops")
    assert r.returncode == 0, r.stderr
    assert "// ----- IR after flex -----" in r.stdout and "flex.attention" in r.stdout
    assert "// ----- IR after loops -----" in r.stdout and "scf.for" in r.stdout
    assert r.stdout.rstrip().endswith("OK")


def test_cli_flex_mlir_run(files):
    r = _cli("compile", str(files / "flex.mlir"), "--run")
    assert r.returncode == 0, r.stderr
    assert "result 0: torch.float32 [1, 2, 8, 4]" in r.stdout


@pytest.mark.parametrize("name,message", [
    ("missing.py", "no such file"),
    ("nofuncs.py", "must define functions get_model() and get_inputs()"),
    ("syntax.py", "cannot load the model file: SyntaxError"),
    ("bad.mlir", "cannot parse"),
    ("sort.py", "tm_tensor.topk"),
])
def test_cli_errors(files, name, message):
    r = _cli("compile", str(files / name))
    assert r.returncode == 1
    assert message in r.stderr and "torch-mlir-flex: error:" in r.stderr
    assert "Traceback" not in r.stderr


def test_compile_freezes_older_objects_only_while_it_runs(monkeypatch):
    """Objects older than the compile are out of the GC's full collections
    during it (compile._older_objects_frozen) and back after, also when it
    fails; objects the caller froze stay frozen."""
    import gc
    import importlib

    compile_mod = importlib.import_module("torch_mlir_flex.backend.compile")

    seen = []
    real_jit = compile_mod.jit

    def jit(*a, **k):
        seen.append(gc.get_freeze_count())
        return real_jit(*a, **k)

    monkeypatch.setattr(compile_mod, "jit", jit)
    fn = lambda x: torch.exp(x)  # noqa: E731
    assert gc.get_freeze_count() == 0
    torch_mlir_flex.compile(fn, (torch.randn(4),), backend="reference")
    assert seen[-1] > 0 and gc.get_freeze_count() == 0
    with pytest.raises(FlexCompileError):
        torch_mlir_flex.compile(fn, ("not a tensor",), backend="reference")
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        torch_mlir_flex.compile(fn, (torch.randn(4),), backend="reference")
        assert gc.get_freeze_count() > frozen // 2  # (freed ones leave the count)
    finally:
        gc.unfreeze()


JIT_THEN_IMPORT = '''
import torch_mlir_flex, torch
from torch_mlir_flex.backend import compile_mlir
fn = compile_mlir("""func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}""", backend="reference")
# The first use of torch-mlir (the importer) after a JIT compilation.
out = torch_mlir_flex.compile(lambda x: torch.exp(x), (torch.zeros(4),), backend="reference")(torch.zeros(4))
print("OK", out.tolist())
'''


def test_importer_after_a_jit_compilation_does_not_abort():
    """A JIT compilation, then the first import of torch-mlir (in a new
    process): LLVM aborted the process there ('print-inst-addrs'
    registered more than once) until the JIT loaded torch-mlir first."""
    env = dict(os.environ)
    py = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
    env["PYTHONPATH"] = py + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", JIT_THEN_IMPORT], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "OK [1.0, 1.0, 1.0, 1.0]" in r.stdout
