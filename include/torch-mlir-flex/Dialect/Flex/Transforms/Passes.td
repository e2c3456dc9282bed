//===- Passes.td - flex dialect passes ---------------------*- tablegen -*-===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES

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

def FlexOutlineLoops : Pass<"flex-outline-loops", "ModuleOp"> {
  let summary = "Move each top-level loop nest of a function into a private "
                "function; merge identical ones";
  let description = [{
    Every op with regions at the top level of a function body (scf.for,
    scf.parallel, scf.if, omp.parallel, memref.alloca_scope, ...) moves into
    a new private function marked `flex.outlined`, LLVM's `noinline`
    (`passthrough`, kept by convert-func-to-llvm) and internal linkage
    (`llvm.linkage`: the JIT generates no `_mlir_<name>` wrapper), called
    where the op stood. The values it reads from above become arguments,
    except operand-free side-effect-free ops with one result (arith.constant,
    memref.get_global), which are cloned into the new function so that loop
    bounds stay constants. Outlined functions whose bodies and types print
    identically are merged: every call goes to the first.

    Why: a whole model lowers to one entry function with a loop nest per
    elementwise op, norm and attention tile loop; LLVM's O2 pipeline
    (IndVarSimplify above all) takes time quadratic in the loops of one
    function (Qwen2-0.5B's shape: 3 s of JIT for 4 layers, 80 s for 24).
    Per-function passes over small functions are linear, and the layers of
    a model, whose weights are arguments, repeat the same loop nests: after
    merging, the JIT compiles one layer's loops.

    ```mlir
    func.func @main(%a: memref<8xf32>, %o: memref<8xf32>) {
      %c0 = arith.constant 0 : index
      ...
      scf.for %i = %c0 to %c8 step %c1 { ... %a ... %o ... }
      scf.for %i = %c0 to %c8 step %c1 { ... %o ... %o ... }
      return
    }
    // becomes
    func.func private @main__loops0(%a: memref<8xf32>, %o: memref<8xf32>)
        attributes {flex.outlined, passthrough = ["noinline"]} {
      %c0 = arith.constant 0 : index
      ...
      scf.for %i = %c0 to %c8 step %c1 { ... }
      return
    }
    func.func @main(%a: memref<8xf32>, %o: memref<8xf32>) {
      call @main__loops0(%a, %o) : (memref<8xf32>, memref<8xf32>) -> ()
      call @main__loops1(%o) : (memref<8xf32>) -> ()
      return
    }
    ```
    Functions already marked `flex.outlined` are not outlined again.

    What stays in a function is straight-line glue (allocations, calls,
    descriptor arithmetic): one basic block, whose SelectionDAG instruction
    selection is superlinear too (5.3 s of 5.7 for the 24-layer model's
    entry). A function left with more than `optnone-above` top-level ops
    (0: never) gets LLVM's `optnone` (FastISel, no IR optimization: 0.9 s
    there), as glue gains little from optimization.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
  let options = [
    Option<"optnoneAbove", "optnone-above", "unsigned", /*default=*/"2000",
           "Mark functions left with more top-level ops than this optnone "
           "(0: never)">
  ];
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

def FlexInlineAllocaScopes : Pass<"flex-inline-alloca-scopes", "func::FuncOp"> {
  let summary = "Inline memref.alloca_scope ops that hold no memref.alloca";
  let description = [{
    convert-scf-to-openmp wraps each parallel-loop body in a
    memref.alloca_scope, whose region must stay a single block; a body with
    nested scf loops then breaks convert-scf-to-cf. Scopes with no
    memref.alloca (the tiled pipeline allocates on the heap) are inlined.
  }];
}

def FlexSerializeForalls : Pass<"flex-serialize-foralls", "func::FuncOp"> {
  let summary = "Turn bufferized scf.forall ops marked flex.serial into scf.for";
  let description = [{
    flex-to-flash marks the loops of ops too small to gain from threads
    (its `serial-below-us`): on this kind of machine an OpenMP parallel
    region whose workers sleep (idle past KMP_BLOCKTIME) costs about 100 us to
    start and join, more than a decode step over 1024 keys takes on one
    core. Runs after bufferization, before scf-forall-to-parallel; foralls
    that still have shared outputs are left alone.

    With `runtime-choice`, marked foralls stay parallel loops and are tagged
    instead (their location becomes the name `flex.small_parallel` around
    the old one, which scf-forall-to-parallel and convert-scf-to-openmp
    carry to the omp.parallel they build); flex-omp-if-awake then lets the
    code choose threads or one thread each time the region is reached.
  }];
  let options = [
    Option<"runtimeChoice", "runtime-choice", "bool", /*default=*/"false",
           "Tag marked foralls for flex-omp-if-awake instead of making them "
           "scf.for">,
  ];
}

def FlexOmpIfAwake : Pass<"flex-omp-if-awake", "ModuleOp"> {
  let summary = "Run tagged omp.parallel regions on the threads only while "
                "the workers still spin";
  let description = [{
    OpenMP workers spin for KMP_BLOCKTIME after a parallel region, then
    sleep; waking them costs about 100 us here, more than a small op (a
    decode step) takes on one thread, while awake workers make it faster.
    An omp.parallel whose location is the name `flex.small_parallel`
    (flex-serialize-foralls with `runtime-choice`) gets the clause
    `if(omp_get_wtime() - last_end < spin)`: with false the runtime runs the
    region on the calling thread and wakes nobody. After every outermost
    omp.parallel of the module, `last_end` becomes omp_get_wtime(), whether
    the region ran on the threads or not: in a loop of back-to-back calls
    the second call wakes the workers once and later ones find them
    spinning; regions further apart than the spin time (a pause, or other
    work between the layers of a model) stay on one thread. Both are
    public f64 globals of the module:
    `_mlir_flex_last_parallel_end` (initially -1e30) and
    `_mlir_flex_spin_seconds` (initially 0, i.e. small regions on one
    thread, until the caller stores the runtime's spin time; the `_mlir_`
    prefix lets ExecutionEngine's packed lookup find them as
    `flex_last_parallel_end` / `flex_spin_seconds`). Modules without a
    tagged region are left alone.

    ```mlir
    omp.parallel { ... } loc(#small)   // #small = loc("flex.small_parallel"(...))
    ==>
    %now = func.call @omp_get_wtime() : () -> f64
    %idle = arith.subf %now, %last_end : f64
    %awake = arith.cmpf olt, %idle, %spin : f64
    omp.parallel if(%awake) { ... }
    %t = func.call @omp_get_wtime() : () -> f64
    memref.store %t, %last_end_global[] : memref<f64>
    ```
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
}

def FlexOmpSpreadWorkers : Pass<"flex-omp-spread-workers", "ModuleOp"> {
  let summary = "OpenMP workers move off the CPU of the thread that opened "
                "the region";
  let description = [{
    After a pause (the workers asleep past KMP_BLOCKTIME), Linux often
    wakes an OpenMP worker on the CPU of the thread that wakes it. There
    both spin and take turns: on two cores a decode step that runs in 45 us
    with the threads on two CPUs took 150 us, steadily, until the next
    pause (measured: the main thread and the worker both on CPU 0 in every
    slow block, on different CPUs in every fast one).

    Before every outermost omp.parallel the opening thread stores
    sched_getcpu() and pthread_self() in the private globals
    `_mlir_flex_master_cpu` (i32) and `_mlir_flex_master_thread` (i64).
    At the start of the region every other thread compares its own CPU
    with it; on a match it calls `_mlir_flex_leave_cpu`, which sets the
    thread's affinity mask (sched_getaffinity) without that CPU, which
    moves the thread, and then sets the old mask back, so no thread stays
    pinned. A mask holding only that CPU is left as it is. (The threads are
    told apart by pthread_self, not omp_get_thread_num: with torch in the
    process libgomp is loaded too, the JIT may bind its
    omp_get_thread_num, and that answers 0 in threads of another runtime.)
    Modules without omp.parallel are left alone.

    ```mlir
    omp.parallel { ... }
    ==>
    %c = func.call @sched_getcpu() : () -> i32
    memref.store %c, %master_cpu[] : memref<i32>
    %t = func.call @pthread_self() : () -> i64
    memref.store %t, %master_thread[] : memref<i64>
    omp.parallel {
      %me = func.call @pthread_self() : () -> i64
      %cpu = func.call @sched_getcpu() : () -> i32
      %shared = (%me != master_thread) and (%cpu == master_cpu)
      scf.if %shared { func.call @_mlir_flex_leave_cpu(%m) : (i32) -> () }
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def FlexOmpDynamicSchedule : Pass<"flex-omp-dynamic-schedule", "func::FuncOp"> {
  let summary = "Give omp.wsloop ops without a schedule schedule(dynamic)";
  let description = [{
    convert-scf-to-openmp emits worksharing loops with the runtime's default
    (static) schedule: on a loaded machine, or with uneven iterations
    (causal attention tiles), one slow thread then holds up the region.
    With schedule(dynamic) idle threads take the remaining iterations.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect"];
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

def FlexInsertChecks : Pass<"flex-insert-checks", "ModuleOp"> {
  let summary = "Guard data-dependent tensor reads and turn cf.assert into flex.check";
  let description = [{
    Runs on tensors, before any lowering. Every `tensor.extract` inside a
    flex.attention or flex.attention_backward region (reads of captured
    tensors by score_mod / mask_mod / joint) or a linalg.generic body (torch-mlir's gathers: index,
    index_select, embedding) whose index is not provably in range gets,
    per such index:

    - a `flex.check` of `0 <= i < size` with the message
      "index {0} is out of bounds for dimension {1} with size {2}" followed
      by where: the modifier and the captured tensor (`captured tensor #k`,
      plus `input #j of @f` when it is a function argument), or the gather's
      source tensor type and function;
    - an in-range read: the index is replaced by `ok ? i : 0`; when a dim of
      the tensor is 0 the read is replaced by a zero, and when a dim is
      dynamic the read is done under `scf.if` (never from an empty buffer).

    torch-mlir already wraps negative indices of aten.index.Tensor
    (`x < 0 ? x + size : x`); for that pattern the check is
    `-size <= x < size` and the message reports `x` (as eager does), and
    nothing is wrapped twice. Other reads (embedding) are not wrapped, as
    in eager. An index is provably in range when interval arithmetic over
    constants, the region's (b, h, q_idx, kv_idx) and linalg.index bounds
    it by the static size.

    Each `cf.assert %c, "msg"` becomes `flex.check %c, "msg (runtime
    assert in @f)"` (braces escaped). The checks are placed right after their index is computed,
    so a guard precedes torch-mlir's own asserts on the same index.

    A flex.attention (or flex.attention_backward) with block tensors gets,
    in front of it, a loop over
    `kv_num_blocks` (and `full_kv_num_blocks`) checking every count is in
    `[0, NB]` ("kv_num_blocks value {0} at query block {1} is out of
    range ..."; the lowering clamps such counts), and for dynamic
    extents the verifier's shape rules (batch/head extent 1 or equal,
    `MB * QBS >= M`).

    ```mlir
    %e = tensor.extract %tab[%i] : tensor<8xf32>      // in score_mod
    ==>
    %ok = ... 0 <= %i < 8 ...
    flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2} in score_mod, reading captured tensor #0" details(%i64, %c0_i64, %c8_i64)
    %j = arith.select %ok, %i, %c0 : index
    %e = tensor.extract %tab[%j] : tensor<8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::flex::FlexDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexLowerChecks : Pass<"flex-lower-checks", "ModuleOp"> {
  let summary = "Lower flex.check to stores into a status buffer argument";
  let description = [{
    Runs on memrefs, after everything is loops (before convert-scf-to-cf).
    Status contract with the caller (the JIT), only when the module has at
    least one flex.check (otherwise nothing changes):

    - the module gets `flex.check_messages`, an ArrayAttr of StringAttr
      (deduplicated templates); code k > 0 means messages[k - 1];
    - every func.func with a body gets one extra last argument
      `memref<4xi64>` (the status; zero-initialized by the caller); calls
      to such functions pass the caller's status along;
    - a failed check stores, if status[0] is still 0 (first failure wins,
      races between threads pick any), status[0] = k and status[1..3] = its
      details (0 for missing ones). Execution goes on.

    ```mlir
    flex.check %ok, "index {0} ..." details(%i, %d, %n)
    ==>
    %bad = arith.xori %ok, %true : i1
    scf.if %bad {
      %s = memref.load %status[%c0] : memref<4xi64>
      %free = arith.cmpi eq, %s, %c0_i64 : i64
      scf.if %free {
        memref.store %ck, %status[%c0] ...; memref.store %i, %status[%c1] ...
      }
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def FlexExpandMath : Pass<"flex-expand-math", "ModuleOp"> {
  let summary = "Lower the math ops that LLVM IR translation cannot take";
  let description = [{
    convert-math-to-llvm leaves `math.erf`, `math.erfc`, `math.cbrt`,
    `math.asinh`, `math.acosh` and `math.atanh` untouched, and the JIT
    then fails ("missing LLVMTranslationDialectInterface"). torch-mlir's
    linalg lowering emits erf (exact GELU, `torch.erf`) and the inverse
    hyperbolic functions. This pass rewrites them, on scalars and vectors:

    - f32 `erf`, `erfc`, `cbrt`: MLIR's polynomial approximations
      (`populateMathPolynomialApproximationPatterns`); f16/bf16 operands are
      computed in f32 and truncated;
    - `asinh`, `acosh`, `atanh` (any float type): expansions in terms of
      `log`/`log1p`/`sqrt`, written for accuracy (no cancellation for
      negative or small arguments, no overflow for large ones);
    - f64 `erf`, `erfc`, `cbrt`: calls to the C library (`erf`, `erfc`,
      `cbrt`), which the JIT resolves in the process.

    With `approximate-exp`, `math.exp` gets the same treatment (MLIR's
    polynomial approximation in f32; f16/bf16 computed in f32): LLVM then
    vectorizes the loops of elementwise exp (SiLU, sigmoid, softmax outside
    attention), which otherwise call the C library's `expf` one element at
    a time.

    Any of these ops left afterwards (e.g. on an unsupported type) is an
    error naming the op. Run before convert-math-to-llvm.

    ```mlir
    %y = math.erf %x : f32
    ==>
    (arith/math ops of a rational approximation; no math.erf)
    ```
  }];
  let options = [
    Option<"approximateExp", "approximate-exp", "bool", /*default=*/"false",
           "Also replace math.exp by its polynomial approximation">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

//===----------------------------------------------------------------------===//
// Dense ops (lib/Dialect/Flex/Transforms/Dense/, docs/dense-ops.md)
//===----------------------------------------------------------------------===//

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

def FlexAmxContractions : Pass<"flex-amx-contractions", "func::FuncOp"> {
  let summary = "Bufferized bf16 tile contractions marked flex.amx -> AMX tiles";
  let description = [{
    flex-to-flash's and flex-backward-to-flash's `amx` mark their tile
    contractions (unit attribute `flex.amx` on a linalg.generic over
    (m, k, n) with lhs
    `[M, K]` bf16 at (m, k), rhs the pair-packed `[K/2, 2 N]` bf16 at
    (k floordiv 2, 2 n + k mod 2), dest `[M, N]` f32 at (m, n), body
    dest += f32(lhs) * f32(rhs)). After bufferization each becomes AMX
    tile loops: per 16 x 16 tile of dest, amx.tile_load of it, K / 32
    tile_mulf (tdpbf16ps) of 16 x 32 lhs and rhs tiles, tile_store
    (lowered by convert-vector-to-llvm{enable-amx}; needs a CPU with
    amx_bf16 and, on Linux, the process's permission for AMX tile data,
    which the Python backend requests). M and N must be multiples of 16,
    K of 32, innermost strides 1; a marked op that does not fit is an
    error. Unmarked ops are left alone.
  }];
  let dependentDialects = ["::mlir::amx::AMXDialect",
                           "::mlir::scf::SCFDialect",
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
    on buffers directly in the function body, with static loop ranges and
    at least `min-iterations` iterations in all, is tiled along its
    outermost parallel loop of more than one iteration into `chunks` tiles
    (fewer when the loop is shorter) of an `scf.parallel`; the tiled pipeline
    with OpenMP makes that a worksharing loop (convert-scf-to-openmp, with
    flex-omp-dynamic-schedule's dynamic schedule). Each tile is the same op
    on subviews of disjoint output rows, so any parallel loop may be split,
    whatever the other loops (a row reduction keeps its reduction whole in
    each tile). Smaller ops (decode steps) and dynamic shapes stay on one
    thread: a parallel region whose workers sleep costs about 100 us to
    start.

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

#endif
