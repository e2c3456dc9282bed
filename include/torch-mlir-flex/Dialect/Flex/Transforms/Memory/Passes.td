//===- Memory/Passes.td - buffers: allocation, reuse, freeing, storage types ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Memory/ (tests: test/Dialect/Flex/Memory/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MEMORY_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MEMORY_PASSES

include "mlir/Pass/PassBase.td"

def FlexCopiesToLinalg : Pass<"flex-copies-to-linalg", "func::FuncOp"> {
  let summary = "Rewrite memref.copy as linalg.copy (lowered to loops)";
  let description = [{
    After bufferization, strided memref.copy ops (padding, un-padding)
    become calls to the `memrefCopy` runtime-library function; as
    linalg.copy they lower to plain loops with the rest of the linalg ops
    (used by the "tiled" pipeline).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FlexFreeAfterLastUse : Pass<"flex-free-after-last-use", "func::FuncOp"> {
  let summary = "Move each memref.dealloc of a temporary up to just after "
                "the last use of its buffer";
  let description = [{
    Ownership-based buffer deallocation frees a block's temporaries at the
    end of the block. In a whole model's function that keeps every layer's
    temporaries alive until the return: 24 layers of Qwen2-0.5B at 128
    tokens held 480 MiB that eager PyTorch frees layer by layer, and the
    heap cannot reuse a block within the call. This pass moves a
    `memref.dealloc %a`, where `%a` is a `memref.alloc` of the same block,
    to just after the last operation of that block that uses `%a` or any
    value derived from it: every result of an operation that takes the
    buffer (or a derived value) counts as derived, which covers views
    (subview, reinterpret_cast, expand/collapse_shape, cast), the strided
    metadata and the aligned pointer that library calls take, and results
    of loops and other region operations whose bodies use it. A use in a
    nested region counts at its ancestor in the block. A dealloc stays
    where it is when a derived value is returned, yielded out of the block,
    or stored to memory (its pointer escapes).

    ```mlir
    %a = memref.alloc() : memref<128xf32>
    linalg.fill ins(%c0 : f32) outs(%a : memref<128xf32>)
    linalg.copy ins(%a : memref<128xf32>) outs(%out : memref<128xf32>)
    %b = memref.alloc() : memref<128xf32>
    ...
    memref.dealloc %a : memref<128xf32>
    ==>
    %a = memref.alloc() : memref<128xf32>
    linalg.fill ins(%c0 : f32) outs(%a : memref<128xf32>)
    linalg.copy ins(%a : memref<128xf32>) outs(%out : memref<128xf32>)
    memref.dealloc %a : memref<128xf32>
    %b = memref.alloc() : memref<128xf32>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FlexInlineAllocaScopes : Pass<"flex-inline-alloca-scopes", "func::FuncOp"> {
  let summary = "Inline memref.alloca_scope ops that hold no memref.alloca";
  let description = [{
    convert-scf-to-openmp wraps each parallel-loop body in a
    memref.alloca_scope, whose region must stay a single block; a body with
    nested scf loops then breaks convert-scf-to-cf. Scopes with no
    memref.alloca (the tiled pipeline allocates on the heap) are inlined.
  }];
}

def FlexWidenI1Memrefs : Pass<"flex-widen-i1-memrefs", "ModuleOp"> {
  let summary = "Store memrefs of i1 as memrefs of i8";
  let description = [{
    MLIR's finalize-memref-to-llvm cannot load/store element types narrower
    than 8 bits; bool tensors bufferize to memrefs of i1. Runs after
    bufferization: every memref of i1 (function signatures, calls, views,
    allocations, control flow, globals) becomes a memref of i8; loads are
    followed by arith.trunci to i1, stores preceded by arith.extui; i1
    globals get an i8 initial value; linalg payloads on such memrefs get i8
    block arguments; leftover bufferization.to_tensor/to_buffer get a
    tensor-level trunci/extui. Any other op on a memref of i1 is an error
    (nothing is rewritten then).

    ```mlir
    %x = memref.load %m[%i] : memref<4xi1>
    ==>
    %w = memref.load %m[%i] : memref<4xi8>
    %x = arith.trunci %w : i8 to i1
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def FlexUnshareInits : Pass<"flex-unshare-inits", "func::FuncOp"> {
  let summary = "Give each destination-style user its own tensor.empty or "
                "zero-fill init";
  let description = [{
    CSE merges the identical `tensor.empty` and `linalg.fill` ops that
    torch-mlir writes before every matmul and elementwise op, so one value
    at the top of a model's function becomes the init of every layer's op
    of that shape. One-shot bufferization then allocates that buffer at the
    top and lets the last of those users write into it: the buffer (and the
    fill's full write) lives from the start of the call to the last layer,
    one per shape. Before bufferization this pass clones such an init
    (a `tensor.empty` with several uses, or a `linalg.fill` of a
    `tensor.empty` with several uses) right before each user that takes it
    as a destination (`outs`), so each allocation is made where it is
    needed, and a zero fill sits just before the product that the BLAS
    lowering folds it into.

    ```mlir
    %e = tensor.empty() : tensor<64x64xf32>
    %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
    %a = linalg.matmul ins(%x, %w0 : ...) outs(%z : tensor<64x64xf32>) -> ...
    ...
    %b = linalg.matmul ins(%a2, %w1 : ...) outs(%z : tensor<64x64xf32>) -> ...
    ==>
    %e0 = tensor.empty() : tensor<64x64xf32>
    %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<64x64xf32>) -> ...
    %a = linalg.matmul ins(%x, %w0 : ...) outs(%z0 : tensor<64x64xf32>) -> ...
    ...
    %e1 = tensor.empty() : tensor<64x64xf32>
    %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<64x64xf32>) -> ...
    %b = linalg.matmul ins(%a2, %w1 : ...) outs(%z1 : tensor<64x64xf32>) -> ...
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexDecomposeConcat : Pass<"flex-decompose-concat", "func::FuncOp"> {
  let summary = "Write each tensor.concat as insert_slice ops into one "
                "tensor.empty";
  let description = [{
    One-shot bufferization gives a `tensor.concat` a buffer of its own and
    copies its operands in; when the concatenation is a result of the
    entry function (a KV cache grown by `torch.cat` every decode step) it
    is then copied once more into the caller's out-param. This pass, run
    right before eliminate-empty-tensors, rewrites each concat as a
    `tensor.empty` of its result's shape and one `tensor.insert_slice` per
    operand (offsets along the concatenated dimension from the operands'
    sizes). eliminate-empty-tensors can then replace that empty with the
    destination the result is materialized in (the out-param itself), and
    the empties of the ops that produce the operands with their slices of
    it: the concatenation is written once, in place.

    ```mlir
    %c = tensor.concat dim(0) %a, %b
        : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x4xf32>
    // becomes
    %n = ... (size of %a along dim 0, plus 1)
    %e = tensor.empty(%n) : tensor<?x4xf32>
    %0 = tensor.insert_slice %a into %e[0, 0] [%d, 4] [1, 1]
    %c = tensor.insert_slice %b into %0[%d, 0] [1, 4] [1, 1]
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MEMORY_PASSES
