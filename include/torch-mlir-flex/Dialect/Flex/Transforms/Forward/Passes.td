//===- Forward/Passes.td - the tiled flash lowering of flex.attention ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Forward/ (tests: test/Dialect/Flex/Forward/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FORWARD_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FORWARD_PASSES

include "mlir/Pass/PassBase.td"

def FlexToFlash : Pass<"flex-to-flash", "func::FuncOp"> {
  let summary = "Tile flex.attention on tensors into a flash-style online-softmax loop nest";
  let description = [{
    Replaces each flex.attention on tensors by a flash-style loop nest,
    in stages (docs/tiled-lowering.md; each stage is a builder in
    lib/Dialect/Flex/Transforms/Flash*.cpp and has its own lit test):

    1. Kᵀ transposed once per key block ([Bkv, Hkv, Np/Nt, E, Nt], per
       batch and kv head in an scf.forall) and padded to whole key blocks; V (and K rows for decode) read in
       place, with a zero-padded copy of the last partial block only;
    2. (B, Hq, M) tiled with tile sizes (1, 1, Mt) through flex.attention's
       TilingInterface (upstream SCF tiling) into an `scf.forall`;
    3. each row tile rewritten (flex-decompose-attention-tile) into the
       online-softmax state (row max [Mt], row sum [Mt], f32 accumulator
       [Mt, Ev]), an `scf.for` over key blocks of `flex.online_attention`
       and the normalization;
    4. each flex.online_attention rewritten
       (flex-decompose-online-attention) into S = Q·Kᵀ, the scale /
       score_mod / mask_mod tile op on global indices, the softmax update
       (row max, correction, exp, row sum) and acc = acc·corr + P·V.

    Only tiles are allocated (plus the padded last key block when N is not
    a multiple of the block, padded Q rows of a partial row tile, and Kᵀ).

    Block sparsity: when the mask_mod region is built from integer index
    arithmetic (add, sub, mul, min, max, abs, division and remainder by a
    positive constant, casts, floor division through sitofp / divf /
    floor / fptosi), selects, integer and ordered float comparisons, i1
    logic and reads of captured tensors (`tensor.extract` from values
    defined above the region: document ids, bool or float tables), the
    pass classifies each (M-tile, N-tile) block at run time by interval
    arithmetic over the block's index ranges: a read is bounded by the
    min / max of the capture over its index box (Mt or Nt elements for
    `doc[q]` / `doc[kv]`; the row tile's part runs once per row tile).
    All-false blocks are skipped, all-true blocks run without the mask.
    Other masks (e.g. reads whose index is itself data, which
    flex-insert-checks guards) are classified by a dense per-block
    pre-pass (`dense-classify`) or not at all. With BlockMask tensors
    (`kv_blocks`), the tiles nest in the mask's blocks and each block's
    listed / full status is folded in: unlisted blocks are skipped, full
    ones run without mask_mod.

    Ops it cannot handle (dynamic E/Ev, memref operands) are left for
    flex-to-loops after bufferization, with a remark.

    With `vectorize` (default), when Nt and Ev are at most 128, Q·Kᵀ, the
    softmax update and P·V are vector-dialect micro-kernels instead
    (register-blocked broadcast-FMA over rows of 1-D vectors; needs
    convert-vector-to-llvm later). math.tanh inside the scores is replaced
    by a polynomial approximation (with `fast-exp`).

    With `bf16-dot` and bf16 query/key/value, the two contractions of the
    vector path use AVX512-BF16 (`x86vector.avx512.dot`, vdpbf16ps; needs
    convert-vector-to-llvm{enable-x86vector} and a CPU that has it): Kᵀ is
    packed as bf16 pairs of E per key block
    ([Bkv, Hkv, Np/Nt * E/2, 2 Nt]), V as pairs of key rows
    ([Bkv, Hkv, Np/2, 2 Ev]), P is rounded to bf16 before P·V (as
    torch.compile's flex kernel does); accumulation stays f32. Shapes it
    cannot pair (odd E or Nt, or a row width not a multiple of 4) and few
    query rows (Mt <= 2, where packing would cost as much as the attention)
    keep the f32 kernels.

    `vector-bits` is the register width the micro-kernels block for (the
    host's: 512 with AVX-512, 256 on AVX2-only hosts, where LLVM would
    split each 16-lane vector in two ymm registers and the 512-bit blocking
    would need twice the 16 registers there are): with 256, Q·Kᵀ and P·V
    run in column chunks of whole 8-lane registers (at most 24 columns: 4
    rows x 3 ymm accumulators, each a vector<8xf32>), K is
    transposed in 8 x 8 blocks and the key-row dots fold 8 keys at a time.
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
           "Softmax exp as inline polynomial (vectorizable) instead of math.exp">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Q.K^T, softmax and P.V tile ops as vector-dialect micro-kernels "
           "(rows of the tile in registers) instead of linalg.generic">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 inputs: Q.K^T and P.V on AVX512-BF16 dot products "
           "(x86vector.avx512.dot); only for CPUs with avx512_bf16">,
    Option<"amx", "amx", "bool", /*default=*/"false",
           "bf16 inputs: Q.K^T and P.V (pair-packed K^T / V as with bf16-dot) "
           "as linalg.generic ops marked flex.amx where the tiles fit (AMX "
           "tiles after bufferization, flex-amx-contractions); only for "
           "CPUs with amx_bf16">,
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "Register width the vector micro-kernels block for: 512 (AVX-512, "
           "32 zmm: 16-lane pieces, up to 16 accumulator registers) or 256 "
           "(AVX2+FMA, 16 ymm: 8-lane pieces, 4 rows x 3 registers, 12 "
           "accumulators). 256 excludes bf16-dot and amx">,
    Option<"splitKeysTasks", "split-keys-tasks", "int64_t", /*default=*/"0",
           "Decode (M <= 4, static shapes) with fewer than this many (b, h) "
           "row tiles: split the key blocks into chunks computed in "
           "parallel and merged (flash-decoding); about 4x the threads. "
           "0: never split">,
    Option<"serialBelowUs", "serial-below-us", "int64_t", /*default=*/"0",
           "Mark the scf.forall loops of an op with static shapes whose "
           "estimated one-thread time is below this many microseconds "
           "`flex.serial` (flex-serialize-foralls makes them scf.for): "
           "waking idle OpenMP workers costs more than they would save. "
           "0: never">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect"];
}

def FlexDecomposeAttentionTile
    : Pass<"flex-decompose-attention-tile", "func::FuncOp"> {
  let summary = "Decompose row tiles of flex.attention into a loop over key "
                "blocks of flex.online_attention";
  let description = [{
    The second stage of flex-to-flash, on its own (for tests and transform
    scripts): each flex.attention on tensors whose query is a row tile
    `[1, 1, M, E]` (tile B, Hq and M first, e.g. with
    `transform.structured.tile_using_forall` sizes `[1, 1, Mt]`), or for GQA
    decode `[1, G, M, E]` with the G query heads of one kv head (sizes
    `[1, G, M]`, G = kv_group_size, G * M <= 16: one tile of G * M rows),
    becomes
    the online-softmax state, an `scf.for` over key blocks of
    `flex.online_attention` (empty blocks skipped and full blocks unmasked
    when the mask can be classified) and the normalization. K/V are padded
    and K transposed for the tile. Other flex.attention ops are errors.

    ```mlir
    %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x32xf32>, ...) ...
    ==>
    %s:3 = scf.for %j = %c0 to %nb step %c1 iter_args(%mx, %l, %acc) {
      ... %n:3 = flex.online_attention ins(...) at(%b, %h, %m0, %n0) ...
    }
    %o = linalg.generic ... arith.divf ...
    ```
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "Upper bound of the rows of a row tile with a dynamic M">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "Keys per block (0: 64, or N when smaller)">,
    Option<"blockSparsity", "block-sparsity", "bool", /*default=*/"true",
           "Skip fully masked blocks and drop the mask on full blocks">,
    Option<"denseClassify", "dense-classify", "bool", /*default=*/"true",
           "Classify blocks of non-analyzable masks with a dense pre-pass">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexDecomposeOnlineAttention
    : Pass<"flex-decompose-online-attention", "func::FuncOp"> {
  let summary = "Decompose flex.online_attention into its tile builders";
  let description = [{
    The last stage of flex-to-flash, on its own: each flex.online_attention
    becomes S = Q·Kᵀ, the scale / score_mod / mask_mod / padding tile op on
    global indices, the online-softmax update (new max, correction, P,
    row sums) and acc = acc · corr + P·V. With `vectorize` (and Nt <= 128)
    the contractions are broadcast-FMA vector micro-kernels and the softmax
    works on rows as vectors; else linalg.generic ops.
  }];
  let options = [
    Option<"fastExp", "fast-exp", "bool", /*default=*/"true",
           "Softmax exp as inline polynomial instead of math.exp">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Vector micro-kernels instead of linalg.generic tile ops">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect"];
}

def FlexFuseDequantizeIntoBlocks
    : Pass<"flex-fuse-dequantize-into-blocks", "func::FuncOp"> {
  let summary = "Dequantize an int8 K/V per key block inside the flash loop";
  let description = [{
    Runs after flex-to-flash. An elementwise linalg.generic with a float
    result that reads an integer tensor (directly or through other such
    generics: `sitofp(k_i8) * scale[b, h, n]`, an int8 KV cache) and whose
    every user is a unit-stride tensor.extract_slice (the key blocks the
    flash loop reads, the padded last block) is tiled to each slice
    (upstream `tensor::replaceExtractSliceWithTiledProducer`): the block is
    computed from the same slice of its inputs, its init is a tensor.empty
    of the block's size, and the whole-tensor generic is erased (a chain
    of such generics is fused into one first). With static shapes the
    block's generic becomes an scf.for over its rows, each row one vector
    read of the int8 values, the body on 1-D vectors and one vector write
    (upstream linalg::vectorize). Decode then reads the int8 bytes inside
    the key-block loop and dequantizes one block into a small f32 tile; no
    f32 copy of the whole cache exists.
    A producer with any other user (e.g. the transposed K copy of a
    prefill) is left as it is: dequantized once per op.

    ```mlir
    %kf = linalg.generic ins(%k_i8, %scale) ... sitofp, mulf ... -> tensor<1x2x300x64xf32>
    scf.for %j ... { %blk = tensor.extract_slice %kf[0, %h, %n0, 0] [1, 1, 128, 64] ... }
    ==>
    scf.for %j ... {
      %ki = tensor.extract_slice %k_i8[0, %h, %n0, 0] [1, 1, 128, 64] ...
      %si = tensor.extract_slice %scale[0, %h, %n0] [1, 1, 128] ...
      %e = tensor.empty() : tensor<1x1x128x64xf32>
      %b = linalg.generic ins(%ki, %si) outs(%e) ... sitofp, mulf ...  (as vector rows)
      %blk = tensor.extract_slice %b[0, 0, 0, 0] [1, 1, 128, 64] ... to tensor<128x64xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FORWARD_PASSES
