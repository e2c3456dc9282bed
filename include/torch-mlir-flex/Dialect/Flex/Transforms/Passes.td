//===- Passes.td - flex dialect passes ---------------------*- tablegen -*-===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FlexToLoops : Pass<"flex-to-loops", "func::FuncOp"> {
  let summary = "Lower bufferized flex.attention to the scalar reference loops";
  let description = [{
    Replaces each flex.attention on memrefs by `scf.for` loops over
    (B, Hq, M) whose body is the op's `generateScalarImplementation`: one
    online-softmax pass over N per row, in f32.

    ```mlir
    flex.attention ins(%q, %k, %v : memref<...>, ...) outs(%o : memref<...>)
        scale(1.0)
    ==>
    scf.for %b ... { scf.for %h ... { scf.for %m ... {
      %acc = memref.alloc(%Ev) ... scf.for %n ... { ... } ... memref.dealloc %acc
    } } }
    ```
    A flex.attention on tensors is an error (bufferize first).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def FlexToFlash : Pass<"flex-to-flash", "func::FuncOp"> {
  let summary = "Tile flex.attention on tensors into a flash-style online-softmax loop nest";
  let description = [{
    Replaces each flex.attention on tensors by an `scf.forall` over
    (B, Hq, M-tiles) whose body runs an `scf.for` over N-tiles carrying the
    online-softmax state (row max [Mt], row sum [Mt], f32 accumulator
    [Mt, Ev]). Per N-tile: S = Q·Kᵀ (linalg.generic contraction, E whole),
    scale, score_mod then mask_mod inlined into one elementwise
    linalg.generic on global indices, row max / rescale / exp / row sum,
    and the P·V accumulation. Only tiles are allocated (plus padded copies
    of Q/K/V when M or N is not a multiple of the tile, and Kᵀ).

    Block sparsity: when the mask_mod region is built from affine index
    arithmetic, cmpi, andi/ori/xori, the pass classifies each
    (M-tile, N-tile) block at run time by interval arithmetic over the
    block's index ranges: all-false blocks are skipped, all-true blocks run
    without the mask. Other masks are classified by a dense per-block
    pre-pass (`dense-classify`) or not at all.

    Ops it cannot handle (dynamic E/Ev, memref operands) are left for
    flex-to-loops after bufferization, with a remark.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "Query rows per tile (0: pick per shape)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "Key/value rows per tile (0: pick per shape)">,
    Option<"blockSparsity", "block-sparsity", "bool", /*default=*/"true",
           "Skip fully masked blocks and drop the mask on full blocks">,
    Option<"denseClassify", "dense-classify", "bool", /*default=*/"true",
           "Classify blocks of non-analyzable masks with a dense pre-pass">,
    Option<"fastExp", "fast-exp", "bool", /*default=*/"true",
           "Softmax exp as inline polynomial (vectorizable) instead of math.exp">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

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

    ```mlir
    %r:3 = call @__flex_attention_0(%q, %k, %v) : (...) -> (...)
    ==>
    %o = flex.attention ins(%q, %k, %v : ...) outs(%init : ...)
        scale(0.353553385) mask_mod { ... flex.yield %keep : i1 } -> ...
    ```
  }];
  let dependentDialects = ["::mlir::flex::FlexDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

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

def FlexInlineAllocaScopes : Pass<"flex-inline-alloca-scopes", "func::FuncOp"> {
  let summary = "Inline memref.alloca_scope ops that hold no memref.alloca";
  let description = [{
    convert-scf-to-openmp wraps each parallel-loop body in a
    memref.alloca_scope, whose region must stay a single block; a body with
    nested scf loops then breaks convert-scf-to-cf. Scopes with no
    memref.alloca (the tiled pipeline allocates on the heap) are inlined.
  }];
}

#endif
