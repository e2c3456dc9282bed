"""Checks before each call (shared dynamic dims, static dims, rank, the
flex.attention verifier rules), aliased example arguments, and the runtime
status contract (docs/runtime.md) with hand-written IR.

    PYTHONPATH=python pytest -q test/python/backend/test_runtime_checks.py
"""

import threading

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.export import Dim
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import FlexIndexError, FlexRangeError, FlexRuntimeError
from torch_mlir_flex.backend import FlexBackendError, FlexCompileError, JitFunction


def qkv(B=1, H=2, S=32, E=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, S, E, generator=g) for _ in range(3))


class Plain(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v)


plain = Plain()


@pytest.fixture(scope="module")
def dyn_fn():
    S, B = Dim("S", min=2, max=128), Dim("B", min=1, max=8)
    d = {0: B, 2: S}
    return torch_mlir_flex.compile(plain, qkv(B=2), backend="tiled",
                                   dynamic_shapes={"q": d, "k": d, "v": d})


def call_error(fn, *args) -> FlexCompileError:
    with pytest.raises(FlexCompileError) as ei:
        fn(*args)
    assert ei.value.stage == "call"
    return ei.value


def test_shared_dim_mismatch(dyn_fn):
    q, k, v = qkv(B=2, S=40)
    k2, v2 = qkv(B=2, S=50)[1:]
    msg = str(call_error(dyn_fn, q, k2, v2))
    assert "argument 1 (k) dim 2 is 50, but argument 0 (q) dim 2 is 40" in msg, msg
    msg = str(call_error(dyn_fn, q, k, v2))
    assert "argument 2 (v) dim 2 is 50, but argument 0 (q) dim 2 is 40" in msg, msg
    msg = str(call_error(dyn_fn, q[:1], k, v))
    assert "argument 1 (k) dim 0 is 2, but argument 0 (q) dim 0 is 1" in msg, msg
    # still right on consistent inputs
    for B, S in ((1, 7), (2, 40)):
        args = qkv(B=B, S=S)
        torch.testing.assert_close(dyn_fn(*args), plain(*args), rtol=1e-3, atol=1e-5)


def test_dim_range(dyn_fn):
    err = call_error(dyn_fn, *qkv(S=130))
    assert isinstance(err, FlexRangeError)
    assert "argument 0 (q) dim 2 is 130, outside the range [2, 128]" in str(err), str(err)
    # The ranges, for a caller that guards them (dynamo/specialize.py):
    # (input, dim, lo, hi) of each dynamic dim's first use.
    assert sorted(dyn_fn.input_ranges) == [(0, 0, 1, 8), (0, 2, 2, 128)], dyn_fn.input_ranges


def test_static_dim_and_rank(dyn_fn):
    q, k, v = qkv(B=2, S=40)
    msg = str(call_error(dyn_fn, q, k, v[..., :8]))
    assert "argument 2 (v): expected shape [?x2x?x16], got [2, 2, 40, 8]" in msg, msg
    msg = str(call_error(dyn_fn, q[0], k, v))
    assert "argument 0 (q): expected shape [?x2x?x16], got [2, 40, 16]" in msg, msg
    msg = str(call_error(dyn_fn, q, k.double(), v))
    assert "argument 1 (k): expected dtype torch.float32, got torch.float64" in msg, msg


DYNAMIC_IR = """
func.func @main(%q: tensor<?x4x?x8xf32>, %k: tensor<?x?x?x8xf32>, %v: tensor<?x?x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = tensor.dim %q, %c0 : tensor<?x4x?x8xf32>
  %m = tensor.dim %q, %c2 : tensor<?x4x?x8xf32>
  %o = tensor.empty(%b, %m) : tensor<?x4x?x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<?x4x?x8xf32>, tensor<?x?x?x8xf32>, tensor<?x?x?x8xf32>)
      outs(%o : tensor<?x4x?x8xf32>) scale(0.35) -> tensor<?x4x?x8xf32>
  return %r : tensor<?x4x?x8xf32>
}
"""


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_verifier_rules_at_call_time(backend):
    """Text input (no ExportedProgram): the flex.attention verifier's rules."""
    fn = JitFunction(DYNAMIC_IR, "main", pipeline=backend)
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    q, k4, v4 = r(2, 4, 5, 8), r(2, 4, 7, 8), r(2, 4, 7, 8)
    torch.testing.assert_close(fn(q, k4, v4), flex_attention(q, k4, v4, scale=0.35), rtol=1e-3, atol=1e-5)
    # key batch 1 broadcasts
    k1, v1 = k4[:1], v4[:1]
    torch.testing.assert_close(fn(q, k1, v1), fn(q, k1.expand(2, -1, -1, -1), v1.expand(2, -1, -1, -1)))
    # GQA with a dynamic Hkv (flex-to-flash leaves it to the scalar reference)
    k, v = r(2, 2, 7, 8), r(2, 2, 7, 8)
    torch.testing.assert_close(fn(q, k, v), flex_attention(q, k, v, scale=0.35, enable_gqa=True),
                               rtol=1e-3, atol=1e-5)
    with pytest.raises(FlexCompileError, match=r"argument 2 dim 2 is 6, but argument 1 dim 2 is 7: "
                                               r"flex.attention #0 needs equal key and value sequence"):
        fn(q, k, v[:, :, :6])
    with pytest.raises(FlexCompileError, match=r"argument 2 dim 1 is 1, but argument 1 dim 1 is 2"):
        fn(q, k, v[:, :1])
    with pytest.raises(FlexCompileError, match=r"query dim 1 of flex.attention #0 is 4, which is not a multiple of "
                                               r"argument 1 dim 1 = 3"):
        fn(q, r(2, 3, 7, 8), r(2, 3, 7, 8))
    with pytest.raises(FlexCompileError, match=r"argument 1 dim 0 is 3, but argument 0 dim 0 is 2: .*"
                                               r"or be 1"):
        fn(q, r(3, 2, 7, 8), r(3, 2, 7, 8))


class TwoOut(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + (m - n) * 0.1)


def test_aliased_example_args():
    x = torch.randn(1, 2, 32, 16)
    fn = torch_mlir_flex.compile(TwoOut(), (x, x, x))
    assert fn.num_inputs == 3
    q, k, v = qkv()
    torch.testing.assert_close(fn(q, k, v), TwoOut()(q, k, v), rtol=1e-3, atol=1e-5)
    torch.testing.assert_close(fn(x, x, x), TwoOut()(x, x, x), rtol=1e-3, atol=1e-5)


def test_readme_example():
    """The README's "Using it" example, with distinct tensors."""
    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + (m - n))

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 64, 32, generator=g) for _ in range(3))
    fn = torch_mlir_flex.compile(Attn(), (q, k, v))
    torch.testing.assert_close(fn(q, k, v), Attn()(q, k, v), rtol=1e-3, atol=1e-5)


# --- runtime status contract -------------------------------------------------

STATUS_IR = """
module attributes {flex.check_messages = ["index {0} is out of bounds for table of size {1}",
                                          "slot {0} is reserved ({2})"]} {
  func.func @main(%t: tensor<8xf32>, %i: tensor<i64>, %status: memref<4xi64>) -> (tensor<f32>, tensor<8xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c7 = arith.constant 7 : index
    %c8 = arith.constant 8 : index
    %n = arith.constant 8 : i64
    %one = arith.constant 1 : i64
    %two = arith.constant 2 : i64
    %i64 = tensor.extract %i[] : tensor<i64>
    %idx = arith.index_cast %i64 : i64 to index
    %bad = arith.cmpi uge, %idx, %c8 : index
    scf.if %bad {
      memref.store %one, %status[%c0] : memref<4xi64>
      memref.store %i64, %status[%c1] : memref<4xi64>
      memref.store %n, %status[%c2] : memref<4xi64>
    }
    %reserved = arith.cmpi eq, %idx, %c7 : index
    scf.if %reserved {
      memref.store %two, %status[%c0] : memref<4xi64>
      memref.store %i64, %status[%c1] : memref<4xi64>
      memref.store %n, %status[%c3] : memref<4xi64>
    }
    %safe = arith.select %bad, %c0, %idx : index
    %x = tensor.extract %t[%safe] : tensor<8xf32>
    %r = tensor.from_elements %x : tensor<f32>
    return %r, %t : tensor<f32>, tensor<8xf32>
  }
}
"""


@pytest.mark.parametrize("backend", ["reference", "tiled"])
def test_status_contract(backend):
    fn = JitFunction(STATUS_IR, "main", pipeline=backend)
    assert fn.has_status and len(fn.arg_types) == 2
    t = torch.arange(8.0) * 10
    x, same = fn(t, torch.tensor(3))
    assert x.item() == 30.0 and x.dim() == 0 and torch.equal(same, t)
    with pytest.raises(FlexIndexError, match=r"^call: index 9 is out of bounds for table of size 8$") as ei:
        fn(t, torch.tensor(9))
    assert isinstance(ei.value, IndexError) and isinstance(ei.value, FlexRuntimeError)
    assert ei.value.stage == "call"
    with pytest.raises(FlexRuntimeError, match=r"^call: slot 7 is reserved \(8\)$") as ei:
        fn(t, torch.tensor(7))
    assert not isinstance(ei.value, IndexError)
    # the status buffer is per call: a failure does not leak into the next call
    assert fn(t, torch.tensor(1))[0].item() == 10.0


def test_status_from_threads():
    fn = JitFunction(STATUS_IR, "main", pipeline="tiled")
    t = torch.arange(8.0)
    errors, barrier = [], threading.Barrier(4)

    def work(n):
        try:
            barrier.wait()
            for r in range(50):
                i = (n + r) % 10
                if i >= 8:
                    with pytest.raises(FlexIndexError, match=f"index {i} "):
                        fn(t, torch.tensor(i))
                elif i == 7:
                    with pytest.raises(FlexRuntimeError, match="slot 7"):
                        fn(t, torch.tensor(i))
                else:
                    assert fn(t, torch.tensor(i))[0].item() == float(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for th in ts:
        th.start()
    for th in ts:
        th.join(60)
    assert not errors, errors[:2]


# --- output shapes -----------------------------------------------------------

SHAPES_IR = """
func.func @main(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %cat = tensor.concat dim(0) %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %na = tensor.dim %a, %c0 : tensor<?x4xf32>
  %nb = tensor.dim %b, %c0 : tensor<?x4xf32>
  %gt = arith.cmpi sgt, %na, %nb : index
  %m = arith.select %gt, %na, %nb : index
  %c2 = arith.constant 2 : index
  %n = arith.muli %m, %c2 : index
  %e = tensor.empty(%n) : tensor<?xf32>
  %one = arith.constant 1.0 : f32
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %cat, %f : tensor<?x4xf32>, tensor<?xf32>
}
"""


def test_result_shapes_from_input_dims():
    fn = JitFunction(SHAPES_IR, "main", pipeline="reference")
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    cat, f = fn(a, b)
    assert torch.equal(cat, torch.cat([a, b])) and torch.equal(f, torch.ones(10))
    assert fn(b, a)[1].shape == (10,) and fn(a, a[:1])[1].shape == (6,)


def test_data_dependent_result_shape_is_refused():
    text = """
func.func @main(%i: tensor<i64>) -> tensor<?xf32> {
  %n = tensor.extract %i[] : tensor<i64>
  %ni = arith.index_cast %n : i64 to index
  %e = tensor.empty(%ni) : tensor<?xf32>
  %one = arith.constant 1.0 : f32
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %f : tensor<?xf32>
}
"""
    with pytest.raises(FlexBackendError, match=r"dim 0 of result 0 .* cannot be computed from the input "
                                               r"shapes \(it depends on 'tensor.extract'\)"):
        JitFunction(text, "main", pipeline="reference")
