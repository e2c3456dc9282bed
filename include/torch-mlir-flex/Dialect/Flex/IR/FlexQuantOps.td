//===- FlexQuantOps.td - flex.quant_matmul -----------------*- tablegen -*-===//
//
// A matmul with quantized weights (int8 per channel, torch's CPU-packed
// int4 with groups), read once and dequantized on the fly. Included by
// FlexOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_QUANT_OPS
#define TORCH_MLIR_FLEX_DIALECT_FLEX_QUANT_OPS

def Flex_QuantMatmulOp : Flex_Op<"quant_matmul", [
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>
  ]> {
  let summary = "x @ dequantize(w).T with int8 or CPU-packed int4 weights";
  let description = [{
    `y = x @ dequantize(w, scales).T`, the product of torchao's quantized
    linear layers (the `torch_mlir_flex::quant_matmul` custom op of the
    importer, python/torch_mlir_flex/importer/quant_op.py). Operands:

    - `x` `[M, K]`, f32 or bf16; `init` and the result `[M, N]` with `x`'s
      element type; `scales` in `x`'s element type or f32.
    - `format = "int8"` (`Int8WeightOnlyConfig`): `w` `[N, K]` i8 (signed),
      `scales` `[N]`; `group_size` and `layout` are 0.
      ```
      y[m, n] = (sum_k f32(x[m, k]) * f32(w[n, k])) * f32(scales[n])
      ```
    - `format = "int4_cpu"` (torch's `_weight_int4pack_mm_for_cpu`): `w`
      `[N, K/2]` i8 holding two unsigned 4-bit values `q` per byte,
      `scales` torchao's `scale_and_zero` `[K/g, N, 2]` (`g = group_size`,
      which divides `K`):
      ```
      w'[n, k] = (q[n, k] - 8) * f32(scales[k / g, n, 0]) + f32(scales[k / g, n, 1])
      y[m, n]  = sum_k f32(x[m, k]) * w'[n, k]
      ```
      The bytes are in the packing of the ATen CPU capability that made
      them (`layout`). Columns form blocks of `BN`; block `nb` holds, for
      each `k` in turn, `BN / 2` bytes at byte `nb * K * BN / 2 + k * BN / 2
      + i`:
      * `layout = 2` (AVX512): `BN = 64`; the low nibble of byte `i` is
        column `nb * 64 + i`, the high nibble column `nb * 64 + i + 32`;
      * `layout = 1` (AVX2): `BN = 32`; low `nb * 32 + i`, high
        `nb * 32 + i + 16`;
      * `layout = 0` (DEFAULT): `BN = 32`; low `nb * 32 + 2i`, high
        `nb * 32 + 2i + 1`.
      `N` is a multiple of 16 (torch packs no other). Where `BN` does not
      divide `N`, the last `r = N mod BN` columns (16, 32 or 48) follow the
      whole blocks as one short block, `r / 2` bytes a `k` at byte
      `(N - r) * K / 2 + k * r / 2 + i`, low nibble column `N - r + 2i`,
      high `N - r + 2i + 1`, in every layout.

    Sums are accumulated in f32 and rounded once to the result type. The op
    writes every element of `init` without reading it (destination-passing
    style; on memrefs it has no result).

    ```mlir
    %init = tensor.empty(%m) : tensor<?x64xbf16>
    %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
        ins(%x, %w, %sz : tensor<?x128xbf16>, tensor<64x64xi8>, tensor<4x64x2xbf16>)
        outs(%init : tensor<?x64xbf16>) -> tensor<?x64xbf16>
    ```

    Lowering: `flex-quant-matmul-to-linalg` (reference pipeline, on
    tensors) builds one `linalg.generic` over `(m, n, k)` (k a reduction)
    that dequantizes each weight in its body; `flex-quant-matmul-to-calls`
    (tiled pipeline, on memrefs) calls the runtime's fused kernels
    `flex_quant_matmul_i8` / `flex_quant_matmul_i4` (lib/Runtime/Quant/).
  }];

  let arguments = (ins
    AnyShaped:$x,
    AnyShaped:$w,
    AnyShaped:$scales,
    AnyShaped:$init,
    StrAttr:$format,
    I64Attr:$group_size,
    I64Attr:$layout
  );
  let results = (outs Optional<AnyRankedTensor>:$result);

  let assemblyFormat = [{
    attr-dict
    `ins` `(` $x `,` $w `,` $scales `:` type($x) `,` type($w) `,`
        type($scales) `)`
    `outs` `(` $init `:` type($init) `)`
    (`->` type($result)^)?
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    // DestinationStyleOpInterface: the one init.
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getInitMutable();
    }
    bool isInt4() { return getFormat() == "int4_cpu"; }
    /// Columns per packed block of the int4 layouts (64 for layout 2).
    static int64_t blockColumns(int64_t layout) {
      return layout == 2 ? 64 : 32;
    }
    ::mlir::ShapedType getXType() {
      return ::llvm::cast<::mlir::ShapedType>(getX().getType());
    }
    ::mlir::ShapedType getWType() {
      return ::llvm::cast<::mlir::ShapedType>(getW().getType());
    }
    ::mlir::ShapedType getScalesType() {
      return ::llvm::cast<::mlir::ShapedType>(getScales().getType());
    }
    ::mlir::ShapedType getInitType() {
      return ::llvm::cast<::mlir::ShapedType>(getInit().getType());
    }
  }];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_QUANT_OPS
