//===- Backward/Passes.td - the tiled flash lowering of flex.attention_backward ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Backward/ (tests: test/Dialect/Flex/Backward/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_BACKWARD_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_BACKWARD_PASSES

include "mlir/Pass/PassBase.td"

def FlexBackwardToFlash : Pass<"flex-backward-to-flash", "func::FuncOp"> {
  let summary = "Tile flex.attention_backward on tensors into a flash-style "
                "(FA2) backward loop nest";
  let description = [{
    Replaces each flex.attention_backward on tensors by a flash-style
    backward (FlashAttention-2, one pass over key blocks, no B·H·M·N
    buffer), in stages (FlashBackwardLowering.h; builders in
    lib/Dialect/Flex/Transforms/Backward/):

    1. the row pre-pass: `delta = sum_e f32(dO) f32(O) - glse / ln2` and
       the natural-log lse, `[B, Hq, M]` f32 (parallel linalg.generic);
    2. Kᵀ and Vᵀ per key block (`[Bkv, Hkv, Np/Nt, E|Ev, Nt]`) and K rows
       padded to whole blocks (the forward's layout builder);
    3. (B, Hkv) tiled through the op's TilingInterface into an
       `scf.forall` with tile sizes (1, 1), or (B, 1) when the key batch
       is broadcast (grad_key / grad_value summed over the query batches
       inside the tile): a tile owns dK / dV of its kv head and dQ of its
       G query heads;
    4. each tile (flex-decompose-attention-backward-tile): `scf.for` over
       key blocks j (f32 dK_j, dV_j accumulators), the query batches, the
       G query heads and the query blocks i; each (i, j) pair classified
       as forward (`scf.if` skips empty pairs, full pairs drop mask_mod;
       BlockMask tensors folded in); a live pair computes S = scale Q·Kᵀ,
       dP = dO·Vᵀ, P and dS on global indices (score_mod, mask_mod, joint),
       dV_j += Pᵀ·dO, dK_j += dSᵀ·Q, dQ_i += dS·K (dQ in an f32 buffer);
       dK_j, dV_j are added into the outs after the query loops.

    Capture gradients (e.g. a learnable bias): the tiles share them, so
    each tile gets its own zero-filled f32 partial buffer per capture
    gradient (a row of a `[numTiles, C + 1]` tensor allocated before the
    forall, C the element count, the last column a discard slot); the score
    tile of a live pair also yields each point's joint contribution and
    flat index (the discard slot for masked, padded or out-of-range points),
    a loop over the pair's points scatter-adds them into the row, and after
    the forall a reduction over the tiles adds the rows into the
    capture_grads inits (f32 sums, rounded once). Tiles are (1, 1) when the
    batch is owned and the partials fit, else (B, 1). Ops whose partials
    would exceed 64 MiB (numTiles x sum of (C + 1) x 4 bytes), or whose
    capture gradients or kv head count are dynamic, are left to the
    scalar reference.

    With `vectorize` the five contractions are the forward's broadcast-FMA
    micro-kernels (bf16 inputs are extended to f32 as they are read).
    With `bf16-dot` and bf16 query, key, value and grad_out, when all five
    pair up (E, Ev, Mt, Nt even; E, Ev, Nt multiples of 4), they run on
    flex-to-flash's AVX512-BF16 dot kernel instead (`x86vector.avx512.dot`,
    needs convert-vector-to-llvm{enable-x86vector} and a CPU with
    avx512_bf16): Kᵀ and Vᵀ packed as bf16 pairs per key block
    (`[Bkv, Hkv, Np/Nt · E/2, 2 Nt]`), K rows as pairs of keys
    (`[Bkv, Hkv, Np/2, 2 E]`), each tile's Q and dO as pairs of query rows;
    P and dS are rounded to bf16 before their products (Pᵀ and dSᵀ packed
    in pairs of query rows), as torch's flex backward does; sums stay f32.
    With `amx` (E, Ev and the tiles multiples of 32) the same layouts feed
    AMX instead: the contractions are linalg.generic ops marked `flex.amx`
    (bf16 lhs row-major, rhs in pairs) that flex-amx-contractions turns
    into tile loops after bufferization; dK_j, dV_j are kept transposed
    (dVᵀ += dOᵀ·P, dKᵀ += Qᵀ·dS, each tile's Qᵀ and dOᵀ transposed once)
    and S is scaled in the score tile.
    Ops it cannot handle (memref operands, dynamic E/Ev, dynamic head
    counts without kv_group_size, capture gradients over the partial-buffer
    bound or of dynamic shape) are left for flex-to-loops after
    bufferization, with a remark.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "Query rows per block (0: 64, or M when smaller)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "Keys per block (0: 64, or N when smaller)">,
    Option<"blockSparsity", "block-sparsity", "bool", /*default=*/"true",
           "Skip fully masked blocks and drop the mask on full blocks">,
    Option<"denseClassify", "dense-classify", "bool", /*default=*/"true",
           "Classify blocks of non-analyzable masks with a dense pre-pass">,
    Option<"fastExp", "fast-exp", "bool", /*default=*/"true",
           "exp as inline polynomial (vectorizable) instead of math.exp">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Contractions as vector micro-kernels instead of linalg.generic">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 inputs: the five contractions on AVX512-BF16 dot products "
           "(x86vector.avx512.dot); only for CPUs with avx512_bf16">,
    Option<"amx", "amx", "bool", /*default=*/"false",
           "bf16 inputs: the five contractions as linalg.generic ops marked "
           "flex.amx (AMX tiles after bufferization, flex-amx-contractions; "
           "E, Ev, tiles multiples of 32); only for CPUs with amx_bf16">,
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "Register width the vector micro-kernels block for: 512 (AVX-512, "
           "32 zmm: 16-lane pieces, up to 16 accumulator registers) or 256 "
           "(AVX2+FMA, 16 ymm: 8-lane pieces, 4 rows x 3 registers, 12 "
           "accumulators). 256 excludes bf16-dot and amx">,
    Option<"serialBelowUs", "serial-below-us", "int64_t", /*default=*/"0",
           "Mark the scf.forall loops of an op with static shapes whose "
           "estimated one-thread time is below this many microseconds "
           "`flex.serial`. 0: never">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect"];
}

def FlexDecomposeAttentionBackwardTile
    : Pass<"flex-decompose-attention-backward-tile", "func::FuncOp"> {
  let summary = "Decompose (b, hkv) tiles of flex.attention_backward into "
                "the loop over key and query blocks";
  let description = [{
    The tile stage of flex-backward-to-flash on its own (for tests and
    transform scripts): each flex.attention_backward on tensors with one kv
    head (key `[Bkv, 1, N, E]`, query `[B, G, M, E]`; tile (B, Hkv) first,
    e.g. with `transform.structured.tile_using_forall` sizes `[1, 1]`)
    becomes the key-block / query-block loop nest with its own pre-pass and
    K/V layout. Other flex.attention_backward ops are errors.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "Query rows per block (0: 64, or M when smaller)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "Keys per block (0: 64, or N when smaller)">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Contractions as vector micro-kernels instead of linalg.generic">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 inputs: the contractions on AVX512-BF16 dot products "
           "(as flex-backward-to-flash's bf16-dot)">,
    Option<"amx", "amx", "bool", /*default=*/"false",
           "bf16 inputs: the contractions marked for AMX tiles (as "
           "flex-backward-to-flash's amx)">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_BACKWARD_PASSES
