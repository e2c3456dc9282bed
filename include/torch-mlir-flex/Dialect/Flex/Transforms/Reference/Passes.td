//===- Reference/Passes.td - the scalar reference lowering ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Reference/ (tests: test/Dialect/Flex/Reference/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_REFERENCE_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_REFERENCE_PASSES

include "mlir/Pass/PassBase.td"

def FlexToLoops : Pass<"flex-to-loops", "func::FuncOp"> {
  let summary = "Lower bufferized flex.attention / flex.attention_backward to the scalar reference loops";
  let description = [{
    Replaces each flex.attention on memrefs by `scf.for` loops over
    (B, Hq, M) whose body is the op's `generateScalarImplementation`: one
    online-softmax pass over N per row, in f32. Each
    flex.attention_backward on memrefs becomes loops over (B, Hkv) around
    its scalar implementation (loops over the group's query heads, M and N).

    ```mlir
    flex.attention ins(%q, %k, %v : memref<...>, ...) outs(%o : memref<...>)
        scale(1.0)
    ==>
    scf.for %b ... { scf.for %h ... { scf.for %m ... {
      %acc = memref.alloc(%Ev) ... scf.for %n ... { ... } ... memref.dealloc %acc
    } } }
    ```
    A flex.attention or flex.attention_backward on tensors is an error
    (bufferize first).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def FlexQuantMatmulToLinalg
    : Pass<"flex-quant-matmul-to-linalg", "func::FuncOp"> {
  let summary = "Lower flex.quant_matmul on tensors to a dequantizing linalg.generic";
  let description = [{
    The reference lowering of `flex.quant_matmul` (the `reference`
    pipeline, before bufferization): a `linalg.generic` over `(m, n, k)`,
    `k` a reduction, accumulating `f32(x[m, k]) * w'[n, k]` into an f32
    zero fill, where `w'` is the weight dequantized in the body: int8
    `sitofp(w[n, k])`; int4 the nibble of the packed byte (index
    arithmetic of the op's `layout`, `tensor.extract` of the byte, the
    group's scale and zero by `tensor.extract`), `(q - 8) * scale + zero`.
    A second elementwise generic applies the int8 per-channel scale and
    rounds to the result type (left out for int4 with an f32 result, whose
    sum is built in the op's init).

    ```mlir
    %y = flex.quant_matmul {format = "int8", ...} ins(%x, %w, %s : ...) outs(%e : ...)
    ==>
    %acc = linalg.generic {iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : ...) outs(%zero : tensor<?x32xf32>) { ... }
    %y = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%acc, %s : ...) outs(%e : ...) { ... arith.mulf ... }
    ```
    A flex.quant_matmul on memrefs is left alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_REFERENCE_PASSES
