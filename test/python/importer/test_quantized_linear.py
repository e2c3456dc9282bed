"""pytest: torchao weight-only quantized linears -> torch_mlir_flex::quant_matmul
(importer/quant_op.py, importer/quantized_linear.py) -> outlined
@__flex_quant_matmul_N calls (frontend/outline_quant.py).

Checked: the custom op's eager kernel against torch's own int4 kernel and the
int8 formula, the int4 layout probe against the ATen CPU capability (in this
process and in subprocesses forced to DEFAULT / AVX2, so every layout runs on
any host), the rewrite on tiny torchao models (f32, bf16; torch.export and
AOTAutograd graphs) with the rewritten program's output against torchao's
eager output, patterns left alone, and the frontend's text.
"""

import copy
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import torch_mlir_flex
from torch_mlir_flex.importer import FlexImportError, export_and_import
from torch_mlir_flex.importer import quantized_linear
from torch_mlir_flex.importer.custom_ops import _registered_decomposition
from torch_mlir_flex.importer.fx_importer import FlexFxImporter
from torch_mlir_flex.importer.quant_op import (
    LAYOUT_OF_CAPABILITY, QuantMatmulError, dequantize_int4, int4_cpu_layout, quant_matmul,
    unpack_int4)
from torch_mlir_flex.importer.quantized_linear import rewrite_quantized_linears

QUANT_OP = torch.ops.torch_mlir_flex.quant_matmul.default
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# rtol against eager PyTorch (bf16: relative to the output's largest magnitude:
# torchao rounds the bf16 mm before scaling, quant_matmul rounds once).
RTOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def assert_close(got, ref):
    """f32: elementwise; bf16: max error relative to the largest magnitude."""
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if ref.dtype == torch.float32:
        torch.testing.assert_close(got, ref, rtol=RTOL[ref.dtype], atol=1e-6)
        return
    err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    assert err < RTOL[ref.dtype], err


# ---------------------------------------------------------------------------
# The custom op
# ---------------------------------------------------------------------------


def test_op_stays_opaque():
    """custom_ops.py decomposes ops with a registered decomposition or a
    CompositeImplicitAutograd kernel; quant_matmul has neither."""
    assert _registered_decomposition(QUANT_OP) is None
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(
        "torch_mlir_flex::quant_matmul", "CompositeImplicitAutograd")


@pytest.mark.parametrize("dt", DTYPES.values(), ids=DTYPES.keys())
def test_int8_formula(dt):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 48, generator=g).to(dt)
    w = torch.randint(-128, 128, (40, 48), dtype=torch.int8, generator=g)
    s = (torch.rand(40, generator=g) / 64).to(dt)
    y = quant_matmul(x, w, s, "int8", 0, 0)
    ref = (x.double() @ w.double().t()) * s.double()
    assert y.dtype == dt and y.shape == (5, 40)
    torch.testing.assert_close(y.double(), ref, rtol=RTOL[dt], atol=1e-5)


def _int4_case(dt, n=128, k=128, g=32, m=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=gen)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    sz = (torch.randn(k // g, n, 2, generator=gen) / 8).to(dt)
    x = torch.randn(m, k, generator=gen).to(dt)
    return q, packed, sz, x


@pytest.mark.parametrize("dt", DTYPES.values(), ids=DTYPES.keys())
def test_int4_against_torch(dt):
    q, packed, sz, x = _int4_case(dt)
    layout = int4_cpu_layout()
    assert torch.equal(unpack_int4(packed, 128, 128, layout), q)
    for n in (16, 48, 80, 112):  # a short last block (N mod the block) in some layout
        short = _int4_case(dt, n=n, seed=n)
        assert torch.equal(unpack_int4(short[1], n, 128, layout), short[0])
        ref = torch.ops.aten._weight_int4pack_mm_for_cpu(short[3], short[1], 32, short[2])
        torch.testing.assert_close(quant_matmul(short[3], short[1], short[2], "int4_cpu", 32, layout).float(),
                                   ref.float(), rtol=RTOL[dt], atol=1e-4)
    ref = torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, 32, sz)
    y = quant_matmul(x, packed, sz, "int4_cpu", 32, layout)
    assert y.dtype == dt
    torch.testing.assert_close(y.float(), ref.float(), rtol=RTOL[dt], atol=1e-4)
    # the formula of the design, written out
    w = (q.float() - 8) * sz.float()[torch.arange(128) // 32, :, 0].t() + \
        sz.float()[torch.arange(128) // 32, :, 1].t()
    torch.testing.assert_close(dequantize_int4(packed, sz, 128, 32, layout), w)


def test_layout_probe_matches_capability():
    cap = torch.backends.cpu.get_cpu_capability()
    if cap in LAYOUT_OF_CAPABILITY:
        assert int4_cpu_layout() == LAYOUT_OF_CAPABILITY[cap]
    else:  # a capability without a known layout: refused or recognised, never guessed
        try:
            layout = int4_cpu_layout()
        except QuantMatmulError as e:
            assert "unknown CPU int4 packing" in str(e)
        else:
            q, packed, _, _ = _int4_case(torch.float32, n=64, k=64)
            assert torch.equal(unpack_int4(packed, 64, 64, layout), q)


@pytest.mark.parametrize("args, message", [
    (("int3", 0, 0), "format must be one of"),
    (("int8", 32, 0), "group_size and layout must be 0"),
])
def test_op_refuses_bad_arguments(args, message):
    x, w, s = torch.randn(2, 8), torch.zeros(4, 8, dtype=torch.int8), torch.ones(4)
    with pytest.raises(QuantMatmulError, match=message):
        quant_matmul(x, w, s, *args)


def test_op_refuses_bad_int4_shapes():
    x = torch.randn(2, 64)
    with pytest.raises(QuantMatmulError, match="N=40 is not a multiple of 16"):
        quant_matmul(x, torch.zeros(40, 32, dtype=torch.uint8), torch.ones(2, 40, 2), "int4_cpu", 32, 2)
    w = torch.zeros(96, 32, dtype=torch.uint8)  # N = 96: 64 + a short block of 32 (accepted)
    assert quant_matmul(x, w, torch.ones(2, 96, 2), "int4_cpu", 32, 2).shape == (2, 96)
    with pytest.raises(QuantMatmulError, match=r"scale_and_zero\) must be \[2, 96, 2\]"):
        quant_matmul(x, w, torch.ones(96, 2), "int4_cpu", 32, 1)
    with pytest.raises(QuantMatmulError, match="x has K=48"):
        quant_matmul(torch.randn(2, 48), torch.zeros(4, 64, dtype=torch.int8), torch.ones(4),
                     "int8", 0, 0)


# ---------------------------------------------------------------------------
# The rewrite on torchao models
# ---------------------------------------------------------------------------


def _config(kind):
    if kind == "int8":
        from torchao.quantization import Int8WeightOnlyConfig

        return Int8WeightOnlyConfig()
    from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig

    return PrototypeInt4WeightOnlyConfig(group_size=32)


def _model(kind, dt, layers):
    pytest.importorskip("torchao")
    from torchao.quantization import quantize_

    torch.manual_seed(0)
    if layers == 1:
        m = torch.nn.Sequential(torch.nn.Linear(64, 128))
    else:
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 64, bias=False))
    m = m.to(dt).eval()
    quantize_(m, _config(kind))
    return m


def _import(m, x):
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    with torch.no_grad():
        ep = torch.export.export(m, (x,), strict=False)
    context = ir.Context()
    torch_d.register_dialect(context)
    importer = FlexFxImporter(context=context)
    module = export_and_import(ep, output_type="raw", fx_importer=importer, state_as_arguments=True)
    return ep, importer.imported_program, module


def _count(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.target == QUANT_OP)


CASES = [(kind, dt, layers) for kind in ("int8", "int4") for dt in ("f32", "bf16") for layers in (1, 2)]


@pytest.mark.parametrize("kind, dt, layers", CASES, ids=[f"{k}-{d}-{n}layer" for k, d, n in CASES])
def test_rewrite_and_numerics(kind, dt, layers):
    dt = DTYPES[dt]
    m = _model(kind, dt, layers)
    x = torch.randn(3, 64).to(dt)
    ep, imported, module = _import(m, x)
    assert _count(imported.graph_module) == layers
    targets = {str(n.target) for n in imported.graph.nodes}
    assert not any("_weight_int4pack_mm" in t or t == "aten.mm.default" for t in targets)
    fmt = '"int8"' if kind == "int8" else '"int4_cpu"'
    assert str(module).count(f'torch.operator "torch.torch_mlir_flex.quant_matmul"') == layers
    assert f"torch.constant.str {fmt}" in str(module)
    with torch.no_grad():
        ref = m(x)
        got = imported.module()(x)  # the rewritten program, quant_matmul's eager kernel
    assert_close(got, ref)
    # torch.export's own graph (weights through access_subclass_inner_tensor)
    gm = copy.deepcopy(ep.graph_module)
    assert any("access_subclass_inner_tensor" in str(n.target) for n in gm.graph.nodes)
    assert rewrite_quantized_linears(gm) == layers
    assert not any(n.target == torch.ops.aten._assert_tensor_metadata.default and
                   n.args[0] not in gm.graph.nodes for n in gm.graph.nodes)


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_rewrite_on_aot_autograd_graph(kind):
    """The Dynamo backend's AOTAutograd graphs: inner tensors are plain inputs."""
    from torch._dynamo.backends.common import aot_autograd

    m = _model(kind, torch.bfloat16, 2)
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(m, backend=aot_autograd(fw_compiler=capture))(torch.randn(3, 64).bfloat16())
    torch._dynamo.reset()
    (gm,) = graphs
    assert rewrite_quantized_linears(gm) == 2
    calls = [n for n in gm.graph.nodes if n.target == QUANT_OP]
    assert len(calls) == 2
    assert all(n.args[1].op == "placeholder" for n in calls)  # the inner tensor itself


class _HandWritten(torch.nn.Module):
    """torchao's int8 pattern written by hand, with variations."""

    def __init__(self, variant):
        super().__init__()
        self.variant = variant
        g = torch.Generator().manual_seed(1)
        self.register_buffer("q", torch.randint(-128, 128, (32, 16), dtype=torch.int8, generator=g))
        self.register_buffer("s", torch.rand(32, generator=g) / 64)

    def forward(self, x):
        y = torch.mm(x, self.q.t().to(x.dtype))
        if self.variant == "exact":
            return y * self.s
        if self.variant == "mm_used_twice":
            return y * self.s + y
        if self.variant == "scale_2d":
            return y * self.s.unsqueeze(0)
        if self.variant == "not_int8":
            return torch.mm(x, self.q.to(torch.int16).t().to(x.dtype)) * self.s
        raise ValueError(self.variant)


@pytest.mark.parametrize("variant, rewrites", [
    ("exact", 1), ("mm_used_twice", 0), ("scale_2d", 0), ("not_int8", 0)])
def test_only_the_exact_pattern(variant, rewrites):
    m = _HandWritten(variant)
    x = torch.randn(4, 16)
    _, imported, _ = _import(m, x)
    assert _count(imported.graph_module) == rewrites
    with torch.no_grad():
        torch.testing.assert_close(imported.module()(x), m(x), rtol=1e-5, atol=1e-6)


def test_int4_n_not_multiple_of_16_refused(monkeypatch):
    """N not a multiple of 16 (torch packs no such weight; N a multiple of
    16 but not of the layout's block is a short last block, accepted): a
    FlexImportError naming it (torch-mlir would not know the aten op
    either)."""
    m = _model("int4", torch.float32, 1)
    monkeypatch.setattr(quantized_linear, "int4_cpu_layout", lambda: 2)
    x = torch.randn(3, 64)
    with torch.no_grad():
        ep = torch.export.export(m, (x,), strict=False)
    gm = copy.deepcopy(ep.graph_module)
    node = next(n for n in gm.graph.nodes if n.target == quantized_linear.INT4_MM)
    node.meta["val"] = torch.empty(3, 40)
    with pytest.raises(FlexImportError, match=r"N=40 output columns; torch's AVX512 int4 packing "
                       r"\(layout 2\) needs a static N, a multiple of 16"):
        rewrite_quantized_linears(gm)


# ---------------------------------------------------------------------------
# Every int4 layout, whatever the host: subprocesses with ATEN_CPU_CAPABILITY
# ---------------------------------------------------------------------------

_SUBPROCESS = r"""
import json, torch
import torch_mlir_flex
from torchao.quantization import quantize_
from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig
from torch_mlir_flex.importer.quant_op import int4_cpu_layout, quant_matmul
from test_quantized_linear import _import, _count, _int4_case
out = {"capability": torch.backends.cpu.get_cpu_capability(), "layout": int4_cpu_layout(), "err": {}}
for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    q, packed, sz, x = _int4_case(dt, n=112, seed=3)  # 112: a short last block in every layout
    ref = torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, 32, sz).float()
    y = quant_matmul(x, packed, sz, "int4_cpu", 32, out["layout"]).float()
    out["err"]["op_" + name] = ((y - ref).abs().max() / ref.abs().max()).item()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).to(dt)
    quantize_(m, PrototypeInt4WeightOnlyConfig(group_size=32))
    x = torch.randn(3, 64).to(dt)
    _, imported, _ = _import(m, x)
    out["count_" + name] = _count(imported.graph_module)
    with torch.no_grad():
        ref, got = m(x).float(), imported.module()(x).float()
    out["err"]["model_" + name] = ((got - ref).abs().max() / ref.abs().max()).item()
print("RESULT" + json.dumps(out))
"""


@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_forced_capability(capability):
    pytest.importorskip("torchao")
    package_root = os.path.dirname(os.path.dirname(torch_mlir_flex.__file__))
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability,
               PYTHONPATH=os.pathsep.join([package_root, here, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _SUBPROCESS], env=env, capture_output=True,
                          text=True, timeout=600)
    found = re.search(r"^RESULT(.*)$", proc.stdout, re.M)
    assert proc.returncode == 0 and found, proc.stderr[-3000:]
    out = json.loads(found.group(1))
    assert out["capability"] == capability.upper()
    assert out["layout"] == LAYOUT_OF_CAPABILITY[out["capability"]]
    assert out["count_f32"] == 2 and out["count_bf16"] == 2
    for key, err in out["err"].items():
        assert err < (1e-5 if key.endswith("f32") else 1e-2), (key, err)


# ---------------------------------------------------------------------------
# The frontend's outlined calls
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind, dt", [("int8", "f32"), ("int4", "bf16")])
def test_outlined_text(kind, dt):
    from torch_mlir_flex.frontend import lower_to_linalg_with_flex_outlined

    t = "f32" if dt == "f32" else "bf16"
    m = _model(kind, DTYPES[dt], 2)
    _, _, module = _import(m, torch.randn(3, 64).to(DTYPES[dt]))
    text = lower_to_linalg_with_flex_outlined(module)
    if kind == "int8":
        types = [f"(tensor<3x64x{t}>, tensor<128x64xi8>, tensor<128x{t}>) -> tensor<3x128x{t}>",
                 f"(tensor<3x128x{t}>, tensor<64x128xi8>, tensor<64x{t}>) -> tensor<3x64x{t}>"]
        attrs = 'flex.quant.format = "int8", flex.quant.group_size = 0 : i64, flex.quant.layout = 0 : i64'
    else:
        types = [f"(tensor<3x64x{t}>, tensor<128x32xi8>, tensor<2x128x2x{t}>) -> tensor<3x128x{t}>",
                 f"(tensor<3x128x{t}>, tensor<64x64xi8>, tensor<4x64x2x{t}>) -> tensor<3x64x{t}>"]
        attrs = ('flex.quant.format = "int4_cpu", flex.quant.group_size = 32 : i64, '
                 f"flex.quant.layout = {int4_cpu_layout()} : i64")
    for i, ty in enumerate(types):
        call = re.search(rf"= call @__flex_quant_matmul_{i}\((%\w+), (%\w+), (%\w+)\) : {re.escape(ty)}",
                         text)
        assert call, text
        assert f"func.func private @__flex_quant_matmul_{i}{ty} attributes {{{attrs}}}" in text, text
        # the weight is a function argument read by the call alone: no float copy of it
        weight = call.group(2)
        assert weight.startswith("%arg") and len(re.findall(rf"{weight}\b(?!:)", text)) == 1, text
    assert "torch.operator" not in text and "sitofp" not in text and "uitofp" not in text


_BAD_FORMAT = """
func.func @main(%x: !torch.vtensor<[3,64],f32>, %w: !torch.vtensor<[128,64],si8>,
                %s: !torch.vtensor<[128],f32>) -> !torch.vtensor<[3,128],f32> {
  %str = torch.constant.str "FORMAT"
  %int0 = torch.constant.int 0
  %0 = torch.operator "torch.torch_mlir_flex.quant_matmul"(%x, %w, %s, %str, %int0, %int0) : (!torch.vtensor<[3,64],f32>, !torch.vtensor<[128,64],si8>, !torch.vtensor<[128],f32>, !torch.str, !torch.int, !torch.int) -> !torch.vtensor<[3,128],f32>
  return %0 : !torch.vtensor<[3,128],f32>
}
"""


@pytest.mark.parametrize("fmt, message", [
    ("int5", "quant_matmul format must be one of"),
    ("int4_cpu", r"ranks \[2, 2, 1\], expected \[2, 2, 3\]")])
def test_outliner_refuses_malformed_calls(fmt, message):
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    from torch_mlir_flex.frontend import FlexFrontendError, lower_to_linalg_with_flex_outlined

    context = ir.Context()
    torch_d.register_dialect(context)
    module = ir.Module.parse(_BAD_FORMAT.replace("FORMAT", fmt), context)
    with pytest.raises(FlexFrontendError, match=message):
        lower_to_linalg_with_flex_outlined(module)
