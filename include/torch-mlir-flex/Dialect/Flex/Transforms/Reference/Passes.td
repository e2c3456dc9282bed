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

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_REFERENCE_PASSES
