//===- Materialize/Passes.td - outlined flex calls + lowered modifier functions -> flex ops ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Materialize/ (tests: test/Dialect/Flex/Materialize/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MATERIALIZE_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MATERIALIZE_PASSES

include "mlir/Pass/PassBase.td"

def FlexMaterialize : Pass<"flex-materialize", "ModuleOp"> {
  let summary = "Rewrite the frontend's outlined flex calls into flex.attention";
  let description = [{
    Replaces each `func.call @__flex_attention_N(q, k, v, buffers...)` (see
    python/torch_mlir_flex/frontend/README.md) by a `flex.attention` on
    tensors. The declaration's `flex.*` attributes give the scale, the
    buffer split and the modifier functions; the modifiers (linalg on 0-d
    tensors) are scalarized into the op's `score_mod` / `mask_mod` regions,
    reads of captured buffers become `tensor.extract` on the op's capture
    operands. Identity modifiers leave the region empty. Declarations and
    modifiers left without uses are erased. Anything that cannot be
    scalarized is an error on the call site.

    Modifiers that compute with small tensors (a captured tensor's row,
    chained indexing `bias[b][q]`, `.sum(-1)`, `torch.dot`, `.any()`, a
    uint8 table converted to bool) are evaluated element by element where
    they are read: a linalg op over a larger tensor is not materialized;
    reading one of its elements recomputes its payload at that index, and
    its reduction loops become an unrolled sequence (static extent <= 8)
    or an `scf.for` carrying the accumulators inside the region.

    ```mlir
    %r:3 = call @__flex_attention_0(%q, %k, %v) : (...) -> (...)
    ==>
    %o = flex.attention ins(%q, %k, %v : ...) outs(%init : ...)
        scale(0.353553385) mask_mod { ... flex.yield %keep : i1 } -> ...
    ```
  }];
  let dependentDialects = ["::mlir::flex::FlexDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexMaterializeQuantMatmul
    : Pass<"flex-materialize-quant-matmul", "ModuleOp"> {
  let summary = "Rewrite the frontend's outlined quantized matmul calls into flex.quant_matmul";
  let description = [{
    Replaces each `func.call @__flex_quant_matmul_N(x, w, scales)` (a
    declaration with `flex.quant.format`, `flex.quant.group_size` and
    `flex.quant.layout`; python/torch_mlir_flex/frontend/) by a
    `flex.quant_matmul` with those attributes writing into a `tensor.empty`
    of the call's result type. Declarations left without calls are
    erased. Missing attributes and operands the op rejects are errors on
    the call.

    ```mlir
    %y = call @__flex_quant_matmul_0(%x, %w, %s)
        : (tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<?x32xf32>
    ==>
    %e = tensor.empty(%m) : tensor<?x32xf32>
    %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
        ins(%x, %w, %s : ...) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::flex::FlexDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MATERIALIZE_PASSES
