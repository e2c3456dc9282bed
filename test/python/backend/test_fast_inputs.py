"""Calls of a JitFunction after its first: arguments like the first call's
take FastInputs (torch's TensorGuards), scalars are passed by value, and
every other argument still goes through the Python checks, which convert
or raise as on a first call (backend/fast_inputs.py, memref_abi.py)."""

import numpy as np
import pytest
import torch

from torch_mlir_flex.backend import JitFunction
from torch_mlir_flex.backend.errors import FlexCompileError

# r[i, j] = a[i, j] * b[j] + n + x (n: i64, x: f64 scalars)
TEXT = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>
func.func @main(%a: tensor<?x4xf32>, %b: tensor<4xf32>, %n: i64, %x: f64) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%d) : tensor<?x4xf32>
  %nf = arith.sitofp %n : i64 to f32
  %xf = arith.truncf %x : f64 to f32
  %r = linalg.generic {indexing_maps = [#rows, #cols, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x4xf32>, tensor<4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %m, %nf : f32
    %t = arith.addf %s, %xf : f32
    linalg.yield %t : f32
  } -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
"""


def _want(a, b, n, x):
    return torch.as_tensor(a) * torch.as_tensor(b) + float(n) + torch.tensor(x, dtype=torch.float64).float()


@pytest.fixture(scope="module")
def fn():
    return JitFunction(TEXT, "main", pipeline="tiled")


def test_later_calls_take_the_fast_path_with_new_sizes_and_scalars(fn):
    g = torch.Generator().manual_seed(0)
    b = torch.randn(4, generator=g)
    fn(torch.randn(2, 4, generator=g), b, 1, 0.5)
    assert fn._fast is not None
    for rows, n, x in [(3, -7, 2.25), (1, 2 ** 40, -1e-3), (9, 0, 0.0)]:
        a = torch.randn(rows, 4, generator=g)
        assert fn._fast.items((a, b, n, x)) is not None
        torch.testing.assert_close(fn(a, b, n, x), _want(a, b, n, x))


@pytest.mark.parametrize("case", ["view", "numpy", "tensor_scalar", "requires_grad", "float_for_int"])
def test_arguments_unlike_the_first_call_still_compute_right(fn, case):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 4, generator=g), torch.randn(4, generator=g)
    fn(a, b, 1, 0.5)
    n, x = 3, 1.5
    if case == "view":
        a = torch.randn(4, 5, generator=g).t()  # not contiguous: a copy is passed
    elif case == "numpy":
        a = a.numpy()
    elif case == "tensor_scalar":
        n = torch.tensor(3)
    elif case == "requires_grad":
        a = a.clone().requires_grad_()
    else:
        n = 3.0
    want = _want(a.detach() if isinstance(a, torch.Tensor) else a, b, n, x)
    torch.testing.assert_close(fn(a, b, n, x), want)


@pytest.mark.parametrize("bad, message", [
    (lambda a, b: (a.double(), b), "expected dtype torch.float32"),
    (lambda a, b: (a, torch.randn(5)), r"expected shape \[4\]"),
    (lambda a, b: (a[:, :3].contiguous(), b), r"expected shape \[\?x4\]"),
    (lambda a, b: (a,), "takes 4 tensor argument"),
])
def test_bad_arguments_after_fast_calls_raise_as_on_a_first_call(fn, bad, message):
    a, b = torch.randn(3, 4), torch.randn(4)
    fn(a, b, 1, 0.5)
    fn(a, b, 2, 0.5)
    args = bad(a, b)
    with pytest.raises(FlexCompileError, match=message):
        fn(*args, *(() if len(args) == 1 else (1, 0.5)))
    torch.testing.assert_close(fn(a, b, 1, 0.5), _want(a, b, 1, 0.5))  # and it still works


def test_numpy_first_call_keeps_the_checked_path():
    f = JitFunction(TEXT, "main", pipeline="reference")
    a, b = np.ones((2, 4), np.float32), np.full(4, 2.0, np.float32)
    torch.testing.assert_close(f(a, b, 1, 0.25), _want(a, b, 1, 0.25))
    assert f._fast is None
