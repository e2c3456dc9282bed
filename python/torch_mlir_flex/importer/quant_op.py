"""``torch_mlir_flex::quant_matmul``: the custom op quantized linears become.

    quant_matmul(Tensor x, Tensor w, Tensor scales, str format, int group_size,
                 int layout) -> Tensor

``quantized_linear.py`` rewrites torchao's weight-only patterns into it; the
FX importer keeps it opaque (``torch.operator "torch_mlir_flex.quant_matmul"``:
it has no decomposition and no CompositeImplicitAutograd kernel, so
``custom_ops.py`` leaves it alone) and the frontend outlines it
(``frontend/outline_quant.py``). Formats (docs: quant-design, frontend/README.md):

* ``"int8"``: ``w`` int8 [N, K], ``scales`` [N];
  ``y[m, n] = (sum_k x[m, k] * w[n, k]) * scales[n]``. ``group_size`` and
  ``layout`` are 0.
* ``"int4_cpu"``: ``w`` uint8 [N, K/2], torch's CPU int4 packing
  (``aten._convert_weight_to_int4pack_for_cpu``) in ``layout`` 0/1/2;
  ``scales`` is torchao's scale_and_zero [K/g, N, 2];
  ``y[m, n] = sum_k x[m, k] * ((q[n, k] - 8) * sz[k/g, n, 0] + sz[k/g, n, 1])``.

``x`` is [M, K] f32 or bf16; ``y`` [M, N] in x's dtype; scales in x's dtype or
f32; accumulation in f32. The eager kernel below is the reference the
compiled kernels are tested against (and runs the op outside compiled code).

Packed int4 layouts (columns in blocks of BN; block nb, row k starts at byte
``nb*K*BN/2 + k*BN/2``; byte i of that row holds two columns):

====== ==== ======================= ==========================
layout  BN  low nibble               high nibble
====== ==== ======================= ==========================
0       32  nb*32 + 2i               nb*32 + 2i + 1   (DEFAULT)
1       32  nb*32 + i                nb*32 + i + 16   (AVX2)
2       64  nb*64 + i                nb*64 + i + 32   (AVX512)
====== ==== ======================= ==========================

``int4_cpu_layout()`` finds which one this process's torch packs with.
"""

import functools

import torch

OP_NAME = "torch_mlir_flex::quant_matmul"
FORMATS = ("int8", "int4_cpu")
LAYOUT_BLOCK_N = {0: 32, 1: 32, 2: 64}  # BN of each int4 layout
INT4_N_MULTIPLE = 16  # torch's int4 CPU packing refuses other N (the last N mod BN: a short block)
# The int4 layout torch packs with at each ATen CPU capability
# (torch.backends.cpu.get_cpu_capability()); the one table of it.
LAYOUT_OF_CAPABILITY = {"DEFAULT": 0, "AVX2": 1, "AVX512": 2}
LAYOUT_NAMES = {layout: cap for cap, layout in LAYOUT_OF_CAPABILITY.items()}
FLOAT_DTYPES = (torch.float32, torch.bfloat16)


class QuantMatmulError(ValueError):
    """Operands quant_matmul does not accept, or an int4 packing we do not know."""


def unpack_int4(packed: torch.Tensor, n: int, k: int, layout: int) -> torch.Tensor:
    """The int4 values q[n, k] (0..15, int32) of ``packed`` (uint8, N*K/2
    bytes) in ``layout``: whole blocks of BN columns in the layout, then,
    where BN does not divide N (a multiple of 16), the last N mod BN
    columns as one short block whose byte i holds columns 2i and 2i + 1
    (as torch packs them whatever the layout)."""
    if layout not in LAYOUT_BLOCK_N:
        raise QuantMatmulError(f"quant_matmul: int4 layout must be 0, 1 or 2, got {layout}")
    if n % INT4_N_MULTIPLE:
        raise QuantMatmulError(
            f"quant_matmul: torch packs int4 weights of N a multiple of {INT4_N_MULTIPLE}; "
            f"N={n} is not")
    bn = LAYOUT_BLOCK_N[layout]
    whole, tail = n // bn * bn, n % bn
    flat = packed.reshape(-1)
    rows = flat[:whole * k // 2].reshape(whole // bn, k, bn // 2).to(torch.int32)
    low, high = rows & 0xF, rows >> 4
    if layout == 0:
        cols = torch.stack([low, high], dim=-1).reshape(whole // bn, k, bn)
    else:
        cols = torch.cat([low, high], dim=-1)
    q = cols.permute(0, 2, 1).reshape(whole, k)
    if tail:
        last = flat[whole * k // 2:].reshape(k, tail // 2).to(torch.int32)
        q = torch.cat([q, torch.stack([last & 0xF, last >> 4], dim=-1).reshape(k, tail).t()])
    return q


def dequantize_int4(packed: torch.Tensor, sz: torch.Tensor, k: int, group_size: int,
                    layout: int) -> torch.Tensor:
    """The f32 weight w[n, k] = (q[n, k] - 8) * sz[k/g, n, 0] + sz[k/g, n, 1]."""
    n = sz.shape[1]
    q = unpack_int4(packed, n, k, layout).to(torch.float32)
    per_k = sz.to(torch.float32).repeat_interleave(group_size, dim=0)  # [K, N, 2]
    scale, zero = per_k[..., 0].t(), per_k[..., 1].t()
    return (q - 8.0) * scale + zero


def _check(x, w, scales, format: str, group_size: int, layout: int):
    """(M, N, K) of valid operands; QuantMatmulError naming the first problem."""
    def bad(msg):
        raise QuantMatmulError(f"quant_matmul({format!r}): {msg}")

    if format not in FORMATS:
        raise QuantMatmulError(f"quant_matmul: format must be one of {FORMATS}, got {format!r}")
    if x.dim() != 2 or x.dtype not in FLOAT_DTYPES:
        bad(f"x must be a 2-D f32 or bf16 tensor, got {x.dtype} {tuple(x.shape)}")
    if scales.dtype not in (x.dtype, torch.float32):
        bad(f"scales must be f32 or x's dtype ({x.dtype}), got {scales.dtype}")
    m, k = x.shape
    if format == "int8":
        if w.dim() != 2 or w.dtype != torch.int8:
            bad(f"w must be a 2-D int8 tensor, got {w.dtype} {tuple(w.shape)}")
        n = w.shape[0]
        if w.shape[1] != k:
            bad(f"w is [{n}, {w.shape[1]}] but x has K={k}")
        if tuple(scales.shape) != (n,):
            bad(f"scales must be [{n}], got {tuple(scales.shape)}")
        if group_size != 0 or layout != 0:
            bad(f"group_size and layout must be 0, got {group_size}, {layout}")
        return m, n, k
    if w.dim() != 2 or w.dtype != torch.uint8:
        bad(f"w must be a 2-D uint8 tensor (packed int4), got {w.dtype} {tuple(w.shape)}")
    n = w.shape[0]
    if w.shape[1] * 2 != k:
        bad(f"w is [{n}, {w.shape[1]}] (K/2 bytes per row) but x has K={k}")
    if group_size <= 0 or k % group_size:
        bad(f"group_size must be positive and divide K={k}, got {group_size}")
    if tuple(scales.shape) != (k // group_size, n, 2):
        bad(f"scales (scale_and_zero) must be [{k // group_size}, {n}, 2], got {tuple(scales.shape)}")
    if layout not in LAYOUT_BLOCK_N:
        bad(f"layout must be 0, 1 or 2, got {layout}")
    if n % INT4_N_MULTIPLE:
        bad(f"N={n} is not a multiple of {INT4_N_MULTIPLE} (torch's int4 CPU packing needs one)")
    return m, n, k


@torch.library.custom_op(OP_NAME, mutates_args=())
def quant_matmul(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, format: str,
                 group_size: int, layout: int) -> torch.Tensor:
    """The eager reference: dequantize to f32, f32 matmul, one rounding to x's dtype."""
    m, n, k = _check(x, w, scales, format, group_size, layout)
    xf = x.to(torch.float32)
    if format == "int8":
        y = (xf @ w.to(torch.float32).t()) * scales.to(torch.float32)
    else:
        y = xf @ dequantize_int4(w, scales, k, group_size, layout).t()
    return y.to(x.dtype)


@quant_matmul.register_fake
def _quant_matmul_fake(x, w, scales, format, group_size, layout):
    if format not in FORMATS or x.dim() != 2 or w.dim() != 2:
        _check(x, w, scales, format, group_size, layout)
    return x.new_empty((x.shape[0], w.shape[0]))


# ---------------------------------------------------------------------------
# Which int4 packing this process's torch uses
# ---------------------------------------------------------------------------

PROBE_N, PROBE_K = 64, 32


def _probe_values() -> torch.Tensor:
    """A [64, 32] int4 matrix whose columns differ within every block of 64,
    so each layout unpacks it differently."""
    n = torch.arange(PROBE_N, dtype=torch.int32).unsqueeze(1)
    k = torch.arange(PROBE_K, dtype=torch.int32).unsqueeze(0)
    return (n * 5 + k * 3 + n // 16 + n * k) % 16


@functools.lru_cache(maxsize=None)
def int4_cpu_layout() -> int:
    """0, 1 or 2: the layout ``aten._convert_weight_to_int4pack_for_cpu``
    packs with in this process (it follows the ATen CPU capability, which
    ``ATEN_CPU_CAPABILITY`` can force). Found by packing a probe matrix and
    unpacking it with each known layout; QuantMatmulError if none matches."""
    q = _probe_values()
    try:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    except Exception as e:  # an op missing or refusing: say which
        raise QuantMatmulError(
            f"cannot probe torch's CPU int4 packing: _convert_weight_to_int4pack_for_cpu "
            f"failed ({type(e).__name__}: {e})") from e
    expected_shape = (PROBE_N, PROBE_K // 2)
    if packed.dtype != torch.uint8 or packed.numel() * 2 != q.numel():
        raise QuantMatmulError(
            f"unknown CPU int4 packing: _convert_weight_to_int4pack_for_cpu gave "
            f"{packed.dtype} {tuple(packed.shape)} for a [{PROBE_N}, {PROBE_K}] matrix "
            f"(expected uint8 {expected_shape})")
    matches = [lay for lay in sorted(LAYOUT_BLOCK_N)
               if torch.equal(unpack_int4(packed, PROBE_N, PROBE_K, lay), q)]
    if len(matches) != 1:
        raise QuantMatmulError(
            "unknown CPU int4 packing: torch's _convert_weight_to_int4pack_for_cpu "
            f"(capability {torch.backends.cpu.get_cpu_capability()}) packs in none of the "
            f"layouts torch-mlir-flex knows ({', '.join(LAYOUT_OF_CAPABILITY)}); int4 "
            "weights cannot be compiled with this torch")
    return matches[0]
