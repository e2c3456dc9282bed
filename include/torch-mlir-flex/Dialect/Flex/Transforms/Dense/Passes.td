//===- Dense/Passes.td - dense ops: matmuls on the BLAS, fused elementwise chains, row parallelism ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Dense/ (tests: test/Dialect/Flex/Dense/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_DENSE_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_DENSE_PASSES

include "mlir/Pass/PassBase.td"

def FlexFoldMatmulOperands : Pass<"flex-fold-matmul-operands", "func::FuncOp"> {
  let summary = "Fold transposes and bf16/f16 -> f32 extensions into matmul "
                "operands, a bf16 rounding into the result";
  let description = [{
    torch-mlir lowers `aten.linear` to a `linalg.transpose` of the weight
    (a full copy, every call) feeding `linalg.matmul`, and for bf16 with a
    bias it also widens both operands to f32 first. On tensors, this pass
    makes the matmul (or batch_matmul) read the producers' sources instead:

    - a `linalg.transpose` that swaps the last two dims becomes the swap of
      the two results of that operand's indexing map;
    - an elementwise `linalg.generic` whose body is only `arith.extf` from
      bf16/f16 to the matmul's f32 accumulator is dropped (the named op
      extends its inputs to the output type itself), when both operands then
      have the same element type;
    - a bf16 x bf16 product into an f32 zero fill whose only reader is an
      elementwise `linalg.generic` of `arith.truncf` to bf16 becomes a
      product with that bf16 result (from a bf16 zero fill of the
      truncation's init). As linalg IR this would accumulate in bf16; the
      pass runs only in the BLAS pipelines, whose flex-matmul-to-blas
      computes every bf16 product in f32 and rounds C once (flex_gemm_bf16,
      lib/Runtime/FlexGemm.c): torch's numbers, without the f32 product in
      memory.

    ```mlir
    %t = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>)
           permutation = [1, 0]
    %r = linalg.matmul ins(%x, %t : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z ...)
    ==>
    %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                        affine_map<(m, n, k) -> (n, k)>,
                                        affine_map<(m, n, k) -> (m, n)>]
           ins(%x, %w : tensor<8x16xf32>, tensor<32x16xf32>) outs(%z ...)
    ```
    The transpose and the extension are erased when nothing else reads them.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
}

def FlexMatmulToBlas : Pass<"flex-matmul-to-blas", "ModuleOp"> {
  let summary = "Bufferized linalg.matmul / batch_matmul -> calls of the BLAS runtime";
  let description = [{
    Each `linalg.matmul` or `linalg.batch_matmul` on memrefs (any projected
    permutation maps, strided layouts) whose operands are f32 x f32 -> f32,
    or bf16 x bf16 -> f32 or bf16, becomes a call of the runtime library's
    `flex_gemm_f32` / `flex_gemm_bf16` (lib/Runtime/FlexGemm.c), which runs
    the product on the BLAS found at run time (backend/blas.py). The call
    takes the aligned pointer, offset and the (batch, rows, cols) strides of
    each operand, read with `memref.extract_strided_metadata`, so views
    (transposed, sliced, expanded) are passed without copies:

    ```mlir
    linalg.fill ins(%c0 : f32) outs(%c : memref<8x32xf32>)
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>)
                  outs(%c : memref<8x32xf32>)
    ==>
    func.call @flex_gemm_f32(%batch, %m, %n, %k,
        %pa, %offa, %sab, %sam, %sak, %pb, %offb, %sbb, %sbk, %sbn,
        %pc, %offc, %scb, %scm, %scn, %accumulate)
        : (index, ...) -> ()
    ```
    A `linalg.fill` of zero into the output right before the product is
    folded into the call (`accumulate` 0: C is overwritten). Runs after
    buffer deallocation (the call reads raw pointers, so no buffer may be
    freed between it and the op it replaces). Other element types and ops
    are left to the loops.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def FlexParallelRows : Pass<"flex-parallel-rows", "func::FuncOp"> {
  let summary = "Split large linalg ops on buffers across the threads "
                "along their outermost parallel loop";
  let description = [{
    After the BLAS took the matmuls and flex-to-flash the attention, the
    other linalg ops of a model (elementwise chains, the reductions of
    norms, copies, fills) would run as loops on one thread. Each linalg op
    on buffers directly in the function body with at least
    `min-iterations` iterations in all is tiled along its
    outermost parallel loop of more than one iteration into `chunks` tiles
    (fewer when the loop is shorter) of an `scf.parallel`; the tiled pipeline
    with OpenMP makes that a worksharing loop (convert-scf-to-openmp, with
    flex-omp-dynamic-schedule's dynamic schedule). Each tile is the same op
    on subviews of disjoint output rows, so any parallel loop may be split,
    whatever the other loops (a row reduction keeps its reduction whole in
    each tile). Smaller ops (decode steps) stay on one thread: a parallel
    region whose workers sleep costs about 100 us to start. With dynamic
    sizes (graphs Dynamo made dynamic) the count is known at run time: the
    split runs under `scf.if` when it reaches `min-iterations`, the op as
    it is otherwise, and a dynamic split loop gets tiles of
    ceil(size / chunks).

    ```mlir
    linalg.generic {iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<2048x1024xf32>) outs(%s : memref<2048xf32>) {...}
    ==>  (chunks = 8)
    scf.parallel (%i) = (%c0) to (%c2048) step (%c256) {
      %xs = memref.subview %x[%i, 0] [256, 1024] [1, 1] : ...
      %ss = memref.subview %s[%i] [256] [1] : ...
      linalg.generic {iterator_types = ["parallel", "reduction"]}
          ins(%xs : ...) outs(%ss : ...) {...}
    }
    ```
  }];
  let options = [
    Option<"minIterations", "min-iterations", "int64_t", /*default=*/"65536",
           "Ops with fewer iterations (all loops) stay on one thread">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"8",
           "Tiles of the split loop">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect"];
}

def FlexFuseElementwise : Pass<"flex-fuse-elementwise", "func::FuncOp"> {
  let summary = "Fuse chains of elementwise linalg.generic ops on tensors "
                "into their consumers, contractions excluded";
  let description = [{
    torch-mlir writes each aten op of a norm, a rotary embedding, a gated
    activation or a residual add as its own linalg.generic, so every
    intermediate would be a full-size buffer written and read back. This
    pass fuses an all-parallel generic into the generic that consumes it
    (MLIR's elementwise fusion) when:
    - both sit directly in the function body (the tile ops flex-to-flash
      built inside its loops keep their shape);
    - the producer's result has no other use (nothing is computed twice)
      and the consumer reads it element for element, with a permutation
      map (no broadcast: a row's reciprocal norm is not recomputed per
      element);
    - the consumer is not a contraction (no reduction loop with more than
      one input): products stay linalg ops the BLAS takes
      (flex-matmul-to-blas), and a reduction with one input (a norm's sum
      of squares) takes the squaring in.

    ```mlir
    %s = linalg.generic {iterator_types = ["parallel"]}
        ins(%x : tensor<1024xf32>) outs(%e : tensor<1024xf32>) {
      ^bb0(%a: f32, %o: f32):  %n = arith.negf %a : f32  linalg.yield %n : f32 }
    %r = linalg.generic {iterator_types = ["parallel"]}
        ins(%s, %y : tensor<1024xf32>, tensor<1024xf32>) outs(%e : ...) {
      ^bb0(%a: f32, %b: f32, %o: f32): %m = arith.mulf %a, %b : f32 ... }
    ==>
    %r = linalg.generic {iterator_types = ["parallel"]}
        ins(%x, %y : tensor<1024xf32>, tensor<1024xf32>) outs(%e : ...) {
      ^bb0(%a: f32, %b: f32, %o: f32):
        %n = arith.negf %a : f32  %m = arith.mulf %n, %b : f32 ... }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FlexReassociateSums : Pass<"flex-reassociate-sums", "func::FuncOp"> {
  let summary = "Let LLVM reorder the float sums of reduction generics "
                "(reassoc on the accumulating arith.addf)";
  let description = [{
    A `linalg.generic` with a reduction loop that sums into an init (a
    norm's mean of squares, a softmax's or log_softmax's sum of
    exponentials, a cross-entropy backward's row sum) becomes, after
    convert-linalg-to-loops, one chain of dependent additions in source
    order, which LLVM keeps: without leave to reassociate, the loop is not
    vectorized, so one addition per 3-4 cycles, and an exponential or a
    square fused into the same loop is computed one element at a time too
    (log_softmax's exp and sum over a 1024 x 8192 vocabulary: 22 ms on one
    core; 1.3 ms with the flag). For each generic directly in the function
    body (flex-to-flash's tile ops are left alone) with a reduction loop,
    the `arith.addf` yielded for an init whose block argument it alone reads
    gets `fastmath<reassoc>`: LLVM's loop vectorizer then keeps several
    vector partial sums and adds them at the end, as eager PyTorch's
    reductions do (the result differs from the sequential sum by rounding
    only, and is closer to the exact sum). Max/min reductions vectorize
    already; products and integer sums are left alone.

    ```mlir
    ^bb0(%in: f32, %out: f32):
      %e = math.exp %in : f32
      %a = arith.addf %e, %out : f32
      linalg.yield %a : f32
    ==>
      %a = arith.addf %e, %out fastmath<reassoc> : f32
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def FlexWidenReductions : Pass<"flex-widen-reductions", "func::FuncOp"> {
  let summary = "Accumulate bf16/f16 sum reductions in f32";
  let description = [{
    torch-mlir lowers the sum (or mean) of a bf16 or f16 tensor, e.g. an
    RMSNorm's mean of squares, to a `linalg.generic` reduction whose
    accumulator has the narrow type: every partial sum is rounded, so over
    a row of 1024 values the result is off by up to a few percent, and
    each addition goes through a conversion. Eager PyTorch accumulates in
    f32. A reduction generic on tensors with one bf16/f16 init whose
    block argument is only read by an `arith.addf` that is yielded gets an
    f32 accumulator: its init is widened (a `linalg.fill` becomes an f32
    fill of the extended value, anything else an elementwise `arith.extf`),
    the summand is extended, and the result is rounded once (an
    elementwise `arith.truncf`) into the original type.

    ```mlir
    %s = linalg.generic {iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<8x1024xbf16>) outs(%zero : tensor<8xbf16>) {
      ^bb0(%in: bf16, %out: bf16):
        %a = arith.addf %in, %out : bf16
        linalg.yield %a : bf16 }
    ==>
    %z32 = linalg.fill ins(%c0_f32) outs(tensor.empty() : tensor<8xf32>)
    %s32 = linalg.generic ... ins(%x) outs(%z32 : tensor<8xf32>) {
      ^bb0(%in: bf16, %out: f32):
        %w = arith.extf %in : bf16 to f32
        %a = arith.addf %w, %out : f32
        linalg.yield %a : f32 }
    %s = linalg.generic {elementwise arith.truncf} ins(%s32) -> tensor<8xbf16>
    ```
    Other reductions (max, products, several inits) are left alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexQuantMatmulToCalls : Pass<"flex-quant-matmul-to-calls", "ModuleOp"> {
  let summary = "Bufferized flex.quant_matmul -> calls of the runtime's fused quantized kernels";
  let description = [{
    Replaces each `flex.quant_matmul` on memrefs by a call of
    `flex_quant_matmul_i8` (format int8) or `flex_quant_matmul_i4`
    (int4_cpu) of lib/Runtime/Quant/, every argument an `index`:

    ```
    i8: (M, N, K, x_ptr, x_off, x_rs, w_ptr, w_off, w_rs, s_ptr, s_off,
         y_ptr, y_off, y_rs, flags)
    i4: (M, N, K, x_ptr, x_off, x_rs, w_ptr, w_off, sz_ptr, sz_off,
         y_ptr, y_off, y_rs, group_size, layout, flags)
    ```

    Pointers are the memrefs' aligned pointers, offsets and row strides in
    elements; `flags` bit 1: x is bf16, 2: y is bf16, 4: the scales are
    bf16. The kernels read rows with unit stride: an `x`, int8 `w` or `y`
    whose innermost stride is not statically 1, and int8 scales, int4
    packed weights or scale_and_zero that are not statically contiguous,
    are copied into a contiguous buffer first (`y` after the call, back
    into the destination); the copies are freed after the call. Runs after
    deallocation (the call takes raw pointers), before
    flex-copies-to-linalg (which lowers those copies).

    ```mlir
    flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
        ins(%x, %w, %s : memref<?x64xf32>, memref<32x64xi8>, memref<32xf32>)
        outs(%y : memref<?x32xf32>)
    ==>
    call @flex_quant_matmul_i8(%m, %c32, %c64, %px, %ox, %c64, %pw, %ow, %c64,
        %ps, %os, %py, %oy, %c32, %c0) : (index, ...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FlexFoldIntMatmulOperands : Pass<"flex-fold-int-matmul-operands", "func::FuncOp"> {
  let summary = "Fold the transposes feeding i8 x i8 -> i32 products into the maps of their readers";
  let description = [{
    torch-mlir lowers `aten._int_mm(a, t(w))` (torchao's dynamic-activation
    int8 linears) to a `linalg.generic` summing `extui(a) * extsi(b)` (or
    `extsi(a) * extsi(b)`) in i32 over a `linalg.transpose` of the int8
    weight, a full copy every call, which the weight's column sum beside it
    reads too. For each transpose feeding an input of such a product (the
    form flex-int-matmul-to-calls matches), every `linalg.generic` reading
    the transpose's result as an input reads its source instead, the
    operand's indexing map permuted accordingly; the transpose is erased
    when nothing else reads it. A reader other than the product that now
    reads the source through a permutation of all its loops (the column
    sum) has its loops renamed to read it in order (the sum over k of
    w [N,K] becomes a row sum, k innermost), when its operands are integers
    (a float sum's order would change its rounding) and its body has no
    `linalg.index`.

    ```mlir
    %t = linalg.transpose ins(%w : tensor<128x64xi8>) outs(%e : tensor<64x128xi8>)
           permutation = [1, 0]
    %r = linalg.generic {indexing_maps = [(m,n,k) -> (m,k), (m,n,k) -> (k,n), (m,n,k) -> (m,n)]}
           ins(%a, %t : tensor<?x64xi8>, tensor<64x128xi8>) ...
    ==>
    %r = linalg.generic {indexing_maps = [(m,n,k) -> (m,k), (m,n,k) -> (n,k), (m,n,k) -> (m,n)]}
           ins(%a, %w : tensor<?x64xi8>, tensor<128x64xi8>) ...
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FlexIntMatmulToCalls : Pass<"flex-int-matmul-to-calls", "ModuleOp"> {
  let summary = "Bufferized i8 x i8 -> i32 products -> calls of the runtime's int8 GEMM";
  let description = [{
    Each `linalg.generic` on strided memrefs that sums `ext(a) * extsi(b)`
    into an i32 init over one reduction loop, a from an i8 A indexed by
    (m, k) and extended by `extui` or `extsi`, b from an i8 B indexed by
    (k, n), C indexed by (m, n) (plain dims in any order; the body
    `addi(out, muli(...))`, operands in either order), and each signed
    i8 x i8 -> i32 `linalg.matmul`, becomes a call of `flex_gemm_u8s8`
    (lib/Runtime/Quant/FlexQuantInt8Gemm.c), every argument an `index`:

    ```
    (M, N, K, a_ptr, a_off, a(m), a(k), b_ptr, b_off, b(k), b(n),
     c_ptr, c_off, c(m), c(n), flags)
    ```

    pointers the aligned ones, offsets and strides in elements read with
    `memref.extract_strided_metadata`; `flags` bit 1: add to C (cleared,
    and the fill erased, when a zero `linalg.fill` of C comes right
    before), bit 2: A is signed (`extsi`). The runtime reads A's rows and
    B's columns in place where k is contiguous in them (B the weight
    w [N,K] itself after flex-fold-int-matmul-operands) and copies them
    otherwise. Runs after deallocation (raw pointers), like
    flex-matmul-to-blas.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_DENSE_PASSES
