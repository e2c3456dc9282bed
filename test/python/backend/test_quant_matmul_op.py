"""pytest: flex.quant_matmul run end to end from hand-written frontend IR
(the outlined `call @__flex_quant_matmul_N` the frontend emits), through
`compile_mlir` (flex-materialize-quant-matmul, then the reference lowering's
flex-quant-matmul-to-linalg or the tiled one's flex-quant-matmul-to-calls
and the runtime kernels), against PyTorch: int8 per channel, and int4 in
each of torch's three CPU packings (`_weight_int4pack_mm_for_cpu` run under
ATEN_CPU_CAPABILITY in a subprocess), f32 and bf16.
"""

import json
import os
import subprocess
import sys

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch

from torch_mlir_flex.backend.compile import compile_mlir
from torch_mlir_flex.importer.quant_op import LAYOUT_OF_CAPABILITY

_MLIR = {torch.float32: "f32", torch.bfloat16: "bf16"}


# reference: flex-quant-matmul-to-linalg; tiled: flex-quant-matmul-to-calls
# and lib/Runtime/Quant/'s kernels (`run` checks that they ran).
BACKENDS = ["reference", "tiled"]


def _t(shape, dtype) -> str:
    return "tensor<" + "x".join("?" if d is None else str(d) for d in shape) + "x" + dtype + ">"


def frontend_ir(M, K, N, fmt, group_size, layout, dtype, scales_dtype, dynamic_m=False,
                strided_x=False) -> str:
    """`@main(x, w, scales) -> y` as the frontend outlines the custom op.
    `strided_x`: x is every other column of a [M, 2K] argument."""
    t, st = _MLIR[dtype], _MLIR[scales_dtype]
    m = None if dynamic_m else M
    x_t, y_t = _t([m, K], t), _t([m, N], t)
    if fmt == "int8":
        w_t, s_t = _t([N, K], "i8"), _t([N], st)
    else:
        w_t, s_t = _t([N, K // 2], "i8"), _t([K // group_size, N, 2], st)
    x_arg, body = "%x", ""
    if strided_x:
        x_arg = "%xs"
        dim = ("%c0 = arith.constant 0 : index\n    %m = tensor.dim %xw, %c0 : " + _t([m, 2 * K], t) + "\n    "
               if dynamic_m else "")
        size = "%m" if dynamic_m else str(M)
        body = (f"{dim}%xs = tensor.extract_slice %xw[0, 0] [{size}, {K}] [1, 2] : "
                f"{_t([m, 2 * K], t)} to {x_t}\n    ")
    x_decl = f"%xw: {_t([m, 2 * K], t)}" if strided_x else f"%x: {x_t}"
    sig = f"({x_t}, {w_t}, {s_t}) -> {y_t}"
    return f"""
module {{
  func.func @main({x_decl}, %w: {w_t}, %s: {s_t}) -> {y_t} {{
    {body}%y = call @__flex_quant_matmul_0({x_arg}, %w, %s) : {sig}
    return %y : {y_t}
  }}
  func.func private @__flex_quant_matmul_0{sig}
      attributes {{flex.quant.format = "{fmt}", flex.quant.group_size = {group_size} : i64,
                   flex.quant.layout = {layout} : i64}}
}}
"""


def pack_int4(q: torch.Tensor, layout: int) -> torch.Tensor:
    """[N, K] values 0..15 -> uint8 [N, K/2] in torch's CPU `layout`
    (flex.quant_matmul's description): block nb of BN columns holds, for
    each k, BN/2 bytes; the last N mod BN columns (N a multiple of 16) a
    short block, for each k its bytes of column pairs 2i, 2i + 1."""
    N, K = q.shape
    bn = 64 if layout == 2 else 32
    whole = N // bn * bn
    blocks = q[:whole].to(torch.uint8).reshape(whole // bn, bn, K)
    if layout == 0:
        lo, hi = blocks[:, 0::2], blocks[:, 1::2]
    else:
        lo, hi = blocks[:, : bn // 2], blocks[:, bn // 2:]
    tail = q[whole:].to(torch.uint8).T  # [K, N - whole]
    return torch.cat([(lo | (hi << 4)).permute(0, 2, 1).reshape(-1),
                      (tail[:, 0::2] | (tail[:, 1::2] << 4)).reshape(-1)]).reshape(N, K // 2)


def dequant_int4(q, sz, group_size):
    g = torch.arange(q.shape[1]) // group_size
    return (q.float() - 8) * sz[g, :, 0].float().T + sz[g, :, 1].float().T


def run(fn, backend, fmt, *args):
    """fn(*args); on the tiled pipeline, asserts that the runtime's kernel
    for `fmt` ran once and refused nothing."""
    if backend != "tiled":
        return fn(*args)
    from torch_mlir_flex.backend import blas

    before, rejected = blas.quant_products(fmt=fmt), blas.quant_rejected()[0]
    y = fn(*args)
    assert blas.quant_products(fmt=fmt) == before + 1
    assert blas.quant_rejected()[0] == rejected, blas.quant_rejected()[1]
    return y


def _close(y, ref, dtype):
    assert y.dtype == dtype and y.shape == ref.shape
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(y.float(), ref.float(), **tol)


def _int8_case(M, K, N, dtype, scales_dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype)
    w = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8)
    s = (torch.rand(N, generator=g) * 0.02 + 0.001).to(scales_dtype)
    ref = ((x.float() @ w.float().T) * s.float()).to(dtype)
    return x, w, s, ref


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,scales_dtype,M,dynamic_m", [
    (torch.float32, torch.float32, 5, True),
    (torch.float32, torch.float32, 1, False),        # decode: one row
    (torch.bfloat16, torch.bfloat16, 7, True),
    (torch.bfloat16, torch.float32, 3, False),
    (torch.float32, torch.float32, 37, False),       # many rows: blocked over M
])
def test_int8(backend, dtype, scales_dtype, M, dynamic_m):
    K, N = 96, 40
    x, w, s, ref = _int8_case(M, K, N, dtype, scales_dtype)
    fn = compile_mlir(frontend_ir(M, K, N, "int8", 0, 0, dtype, scales_dtype, dynamic_m), backend)
    _close(run(fn, backend, "int8", x, w, s), ref, dtype)
    # torchao's eager order (mm in the model dtype, then the scale) agrees
    eager = torch.mm(x, w.to(dtype).T) * s.to(dtype)
    _close(run(fn, backend, "int8", x, w, s), eager, dtype)
    if dynamic_m:  # another M through the same function
        x2, _, _, _ = _int8_case(M + 9, K, N, dtype, scales_dtype, seed=1)
        _close(run(fn, backend, "int8", x2, w, s), ((x2.float() @ w.float().T) * s.float()).to(dtype), dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_strided_x(backend):
    """x read through a view with column stride 2 (the tiled lowering copies
    it into a contiguous buffer for the kernel)."""
    M, K, N = 6, 64, 32
    xw = torch.randn(M, 2 * K)
    _, w, s, _ = _int8_case(M, K, N, torch.float32, torch.float32)
    fn = compile_mlir(frontend_ir(M, K, N, "int8", 0, 0, torch.float32, torch.float32,
                                  dynamic_m=True, strided_x=True), backend)
    x = xw[:, 0::2]
    _close(run(fn, backend, "int8", xw, w, s), (x @ w.float().T) * s, torch.float32)


def _int4_inputs(M, K, N, group_size, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype)
    q = torch.randint(0, 16, (N, K), generator=g, dtype=torch.int32)
    scale = torch.rand(K // group_size, N, generator=g) * 0.05 + 0.01
    zero = torch.randn(K // group_size, N, generator=g) * 0.1
    sz = torch.stack([scale, zero], dim=-1).to(dtype)
    return x, q, sz


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", [0, 1, 2])
@pytest.mark.parametrize("dtype,M,dynamic_m", [
    (torch.float32, 5, True),
    (torch.bfloat16, 1, False),
    (torch.float32, 33, True),
])
def test_int4_packed_by_the_layout_rules(backend, layout, dtype, M, dynamic_m):
    """Bytes packed here from the layout rules, against the dequantized f32
    product."""
    K, N, group_size = 128, 128, 32
    x, q, sz = _int4_inputs(M, K, N, group_size, dtype)
    packed = pack_int4(q, layout)
    ref = (x.float() @ dequant_int4(q, sz, group_size).T).to(dtype)
    fn = compile_mlir(frontend_ir(M, K, N, "int4_cpu", group_size, layout, dtype, dtype, dynamic_m),
                      backend)
    _close(run(fn, backend, "int4_cpu", x, packed.view(torch.int8), sz), ref, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", [0, 1, 2])
@pytest.mark.parametrize("N", [48, 80])
def test_int4_short_last_block(backend, layout, N):
    """N a multiple of 16 but not of the block: the last N mod BN columns
    (layout 2: 48 alone, 64 + 16; layouts 0, 1: 32 + 16, 64 + 16) packed as
    torch packs them."""
    M, K, group_size = 5, 64, 32
    x, q, sz = _int4_inputs(M, K, N, group_size, torch.float32, seed=N + layout)
    ref = x @ dequant_int4(q, sz, group_size).T
    fn = compile_mlir(frontend_ir(M, K, N, "int4_cpu", group_size, layout, torch.float32,
                                  torch.float32, dynamic_m=True), backend)
    _close(run(fn, backend, "int4_cpu", x, pack_int4(q, layout).view(torch.int8), sz), ref,
           torch.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int4_f32_scales_with_bf16_x(backend):
    M, K, N, group_size = 4, 64, 64, 64
    x, q, sz = _int4_inputs(M, K, N, group_size, torch.bfloat16)
    sz = sz.float()
    fn = compile_mlir(frontend_ir(M, K, N, "int4_cpu", group_size, 1, torch.bfloat16,
                                  torch.float32), backend)
    ref = (x.float() @ dequant_int4(q, sz, group_size).T).to(torch.bfloat16)
    _close(run(fn, backend, "int4_cpu", x, pack_int4(q, 1).view(torch.int8), sz), ref, torch.bfloat16)


# Run in a subprocess under ATEN_CPU_CAPABILITY: torch packs and multiplies
# in that capability's layout (a host below it gives its own: the reported
# capability says which).
_TORCH_CHILD = r"""
import json, sys, torch
M, K, N, g, path = json.loads(sys.argv[1])
out = {"capability": torch.backends.cpu.get_cpu_capability()}
gen = torch.Generator().manual_seed(0)
q = torch.randint(0, 16, (N, K), generator=gen, dtype=torch.int32)
packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
cases = {}
for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    x = torch.randn(M, K, generator=gen).to(dtype)
    scale = torch.rand(K // g, N, generator=gen) * 0.05 + 0.01
    zero = torch.randn(K // g, N, generator=gen) * 0.1
    sz = torch.stack([scale, zero], dim=-1).to(dtype)
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, g, sz)
    cases[name] = (x, sz, y)
torch.save({"capability": out["capability"], "q": q, "packed": packed, "cases": cases}, path)
"""


@pytest.fixture(scope="module", params=["default", "avx2", "avx512"])
def torch_int4(request, tmp_path_factory):
    M, K, N, g = 3, 128, 112, 32  # N = 112: a short last block in every layout
    path = str(tmp_path_factory.mktemp("int4") / f"{request.param}.pt")
    env = dict(os.environ, ATEN_CPU_CAPABILITY=request.param)
    subprocess.run([sys.executable, "-c", _TORCH_CHILD, json.dumps([M, K, N, g, path])],
                   env=env, check=True, timeout=300)
    data = torch.load(path)
    data["group_size"], data["shape"] = g, (M, K, N)
    return data


def test_int4_layout_rules_are_torchs_packing(torch_int4):
    layout = LAYOUT_OF_CAPABILITY[torch_int4["capability"]]
    assert torch.equal(pack_int4(torch_int4["q"], layout), torch_int4["packed"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int4_against_torch_weight_int4pack_mm(torch_int4, backend, dtype):
    M, K, N = torch_int4["shape"]
    g = torch_int4["group_size"]
    layout = LAYOUT_OF_CAPABILITY[torch_int4["capability"]]
    x, sz, y_torch = torch_int4["cases"][_MLIR[dtype]]
    fn = compile_mlir(frontend_ir(M, K, N, "int4_cpu", g, layout, dtype, dtype, dynamic_m=True),
                      backend)
    _close(run(fn, backend, "int4_cpu", x, torch_int4["packed"].view(torch.int8), sz), y_torch, dtype)
