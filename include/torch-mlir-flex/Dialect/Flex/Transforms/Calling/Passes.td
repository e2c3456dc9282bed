//===- Calling/Passes.td - the calling convention: results written in place ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Calling/ (tests: test/Dialect/Flex/Calling/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CALLING_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CALLING_PASSES

include "mlir/Pass/PassBase.td"

def FlexInPlaceResults : Pass<"flex-in-place-results", "ModuleOp"> {
  let summary = "Write results marked flex.in_place into their argument and "
                "drop them";
  let description = [{
    The calling convention of a compiled entry function (docs/runtime.md)
    writes an input the program mutates (a KV cache's `index_copy_`) where
    it stands: the function marks that argument `bufferization.writable`,
    returns the new value and marks that result `{flex.in_place = k}`
    (k: the argument). One-shot bufferization then updates the argument's
    buffer in place unless the old value is read after the update. After
    it, this pass erases every marked result of a function with a body:
    when the returned memref is argument k (directly, through an scf.for
    that yields its iteration argument, or a memref.cast) nothing else is
    needed; otherwise a `memref.copy` into argument k is inserted before
    each return (every read of the old value is done by then).

    ```mlir
    func.func @main(%cache: memref<4x8xf32>, %out: memref<f32>)
        -> (memref<4x8xf32> {flex.in_place = 0 : i64}) {
      ...
      return %cache : memref<4x8xf32>
    }
    // becomes
    func.func @main(%cache: memref<4x8xf32>, %out: memref<f32>) {
      ...
      return
    }
    ```

    A mark on a function that is called, naming no argument, or an
    argument of another type is an error.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CALLING_PASSES
