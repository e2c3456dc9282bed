//===- FlexOps.td - flex dialect operations ----------------*- tablegen -*-===//
//
// flex.attention, flex.online_attention, flex.attention_backward
// (FlexBackwardOps.td), their region terminator, flex.check and
// flex.quant_matmul (FlexQuantOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_OPS
#define TORCH_MLIR_FLEX_DIALECT_FLEX_OPS

include "torch-mlir-flex/Dialect/Flex/IR/FlexBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/TilingInterface.td"

// flex.attention and flex.attention_backward: the methods they define
// alike (declared in each op's extraClassDeclaration), once. FlexOps.cpp
// compiles them with the helpers of AttentionCommon.h.
class Flex_AttentionLikeOp<string mnemonic, list<Trait> traits = []>
    : Flex_Op<mnemonic, traits> {
  let extraClassDefinition = [{
    bool $cppClass::hasTensorSemantics() {
      return ::mlir::flex::attn::hasTensorSemantics(getOperation());
    }
    bool $cppClass::hasBufferSemantics() {
      return ::mlir::flex::attn::hasBufferSemantics(getOperation());
    }
    int64_t $cppClass::getGroupSize() {
      return ::mlir::flex::attn::groupSize(getKvGroupSize(), getQueryType(),
                                           getKeyType());
    }
    void $cppClass::getEffects(
        ::llvm::SmallVectorImpl<::mlir::SideEffects::EffectInstance<
            ::mlir::MemoryEffects::Effect>> &effects) {
      ::mlir::flex::attn::getShapedOperandEffects(*this, effects);
    }
  }];
}

def Flex_AttentionOp : Flex_AttentionLikeOp<"attention", [
    AttrSizedOperandSegments,
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
        "getIterationDomain",
        "getLoopIteratorTypes",
        "getTiledImplementation",
        "getResultTilePosition",
        "generateResultTileValue",
        "generateScalarImplementation"]>,
    SingleBlock
  ]> {
  let summary = "Attention with score_mod and mask_mod regions (PyTorch flex_attention)";
  let description = [{
    Computes PyTorch's `flex_attention` for one call. Shapes:

    - `query`  `[B, Hq, M, E]`, `key` `[Bkv, Hkv, N, E]`, `value`
      `[Bkv, Hkv, N, Ev]`; element type f32, f16 or bf16 (all three equal).
      `Bkv` is `B` or 1 (broadcast). `Hq` is a multiple of `Hkv` (GQA/MQA).
    - `output` `[B, Hq, M, Ev]` with the element type of `query`;
      optional `logsumexp` and `max_scores` `[B, Hq, M]`, f32.
    - `captures`: tensors (or memrefs) that the regions read with
      `tensor.extract` (`memref.load` after bufferization). They are passed
      whole to every tile.

    For every `b, h, m` (with `hk = (h_off + h) / G`, `G = kv_group_size`,
    default `Hq / Hkv`, and `bk = Bkv == 1 ? 0 : b`), and every `n`:

    ```
    s(n)   = scale * sum_e f32(query[b, h, m, e]) * f32(key[bk, hk, n, e])
    s'(n)  = score_mod(s(n), B0 + b, H0 + h, M0 + m, n)      // identity if empty
    s''(n) = mask_mod(B0 + b, H0 + h, M0 + m, n) ? s'(n) : -inf  // after score_mod
    mx     = max_n s''(n)
    l      = sum_n exp(s''(n) - mx)
    output[b, h, m, e] = l == 0 ? 0 : sum_n exp(s''(n) - mx) / l * value[bk, hk, n, e]
    logsumexp[b, h, m] = (mx + log(l)) / ln(2)    // log2 units, -inf if l == 0
    max_scores[b, h, m] = mx / ln(2)              // log2 units, -inf if masked
    ```

    All arithmetic is in f32 (the working precision of PyTorch's CPU
    kernel); the output is rounded to the element type of `query` once.
    A row whose scores are all `-inf` (fully masked, or `score_mod` returns
    `-inf`) gives output 0 and `logsumexp = -inf`, never NaN. The two
    auxiliary results use the units of the `flex_attention` higher-order op
    (log2); the public PyTorch API multiplies them by `ln 2`.

    `offsets` (`B0, H0, M0`, default 0) are the global position of this op's
    tile: tiling adds them so that the regions always see global indices.
    `kv_group_size` is set by tiling, where the head extent of `query` no
    longer tells the GQA ratio.

    Block sparsity (optional; PyTorch's `BlockMask` tensors). With
    `kv_blocks(%kv_num_blocks, %kv_indices)` and `block_sizes [QBS, KVBS]`
    (both > 0), the query rows are grouped into blocks of `QBS` rows and
    the keys into blocks of `KVBS` columns. `kv_num_blocks` is `[Bb, Hb,
    MB]` and `kv_indices` `[Bb, Hb, MB, NB]`, both i32; `Bb` is 1 or `B`
    and `Hb` is 1 or `Hq` (1 broadcasts), `MB * QBS >= M`.
    `full_kv_blocks(%full_kv_num_blocks, %full_kv_indices)` is an optional
    second pair of the same shapes. For a point with global indices
    `(b, h, m, n)`, `qb = m / QBS`, `kb = n / KVBS`, `bb = Bb == 1 ? 0 : b`,
    `hb = Hb == 1 ? 0 : h`:

    ```
    full    = kb in full_kv_indices[bb, hb, qb, 0 : full_kv_num_blocks[bb, hb, qb]]
    partial = kb in kv_indices[bb, hb, qb, 0 : kv_num_blocks[bb, hb, qb]]
    keep    = full || (partial && mask_mod(b, h, m, n))
    s''(n)  = keep ? s'(n) : -inf
    ```

    i.e. a block listed in neither list is masked, a full block skips
    `mask_mod` (`score_mod` still applies) and a partial block evaluates it;
    this is what `torch.compile(flex_attention)` computes (eager
    `flex_attention` ignores the block tensors). The counts are clamped to
    `[0, NB]`, so a bad count never reads outside `kv_indices`; index
    values outside `[0, ceil(N / KVBS))` list no block. A block listed twice
    counts once (torch.compile's CPU kernel would visit it twice). The
    block tensors are read whole by every tile (tiling keeps global
    offsets, so the block of a row is found from its global index).

    ```mlir
    %out = flex.attention
        ins(%q, %k, %v : tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>,
                         tensor<1x2x256x64xf32>)
        kv_blocks(%kvn, %kvi : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
        full_kv_blocks(%fkvn, %fkvi : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
        block_sizes [128, 128]
        outs(%init : tensor<1x2x256x64xf32>)
        scale(1.250000e-01) -> tensor<1x2x256x64xf32>
    ```

    Regions: `score_mod` has arguments `(score: f32, b, h, q_idx, kv_idx:
    index)` and yields an f32; `mask_mod` has `(b, h, q_idx, kv_idx:
    index)` and yields an i1. An empty region is the identity score / no
    mask. Regions may use values defined above only through `captures`
    (and scalars or constants).

    Example (causal mask, tanh soft-cap, ALiBi slopes captured):

    ```mlir
    %out:2 = flex.attention
        ins(%q, %k, %v : tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>,
                         tensor<1x8x128x64xf32>)
        captures(%slopes : tensor<8xf32>)
        outs(%init : tensor<1x8x128x64xf32>)
        logsumexp(%lse_init : tensor<1x8x128xf32>)
        scale(1.250000e-01)
        score_mod {
        ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
          %slope = tensor.extract %slopes[%h] : tensor<8xf32>
          %d = arith.subi %n, %m : index
          %di = arith.index_cast %d : index to i64
          %df = arith.sitofp %di : i64 to f32
          %bias = arith.mulf %slope, %df : f32
          %t = arith.addf %s, %bias : f32
          flex.yield %t : f32
        } mask_mod {
        ^bb0(%b: index, %h: index, %m: index, %n: index):
          %c = arith.cmpi sge, %m, %n : index
          flex.yield %c : i1
        } -> tensor<1x8x128x64xf32>, tensor<1x8x128xf32>
    ```

    Lowering. As a TilingInterface op its iteration domain is
    `(B, Hq, M, N, Ev)` with `N` a reduction; tiling splits `B`, `Hq`, `M`
    and `Ev` (never `E`, which stays whole in each tile, nor `N`).
    `generateScalarImplementation` takes the three induction variables
    `(b, h, m)` of the row loops on buffers and emits, per row, one pass over
    `n` with a running max, running sum and rescaled f32 accumulator
    (online softmax), then the normalization:

    ```
    scf.for %b, %h, %m {            // flex-to-loops
      mx = -inf; l = 0; acc[0..Ev) = 0
      scf.for %n {
        s'' = ...; mn = max(mx, s''); c = exp(mx - mn); p = exp(s'' - mn)
        l = l * c + p; acc[e] = acc[e] * c + p * value[n, e]; mx = mn
      }
      output[e] = l > 0 ? acc[e] / l : 0 ...
    }
    ```
  }];

  let arguments = (ins
    AnyShaped:$query,
    AnyShaped:$key,
    AnyShaped:$value,
    Variadic<AnyShaped>:$captures,
    Variadic<Index>:$offsets,
    Optional<AnyShaped>:$kv_num_blocks,
    Optional<AnyShaped>:$kv_indices,
    Optional<AnyShaped>:$full_kv_num_blocks,
    Optional<AnyShaped>:$full_kv_indices,
    AnyShaped:$output,
    Optional<AnyShaped>:$logsumexp,
    Optional<AnyShaped>:$max_scores,
    F32Attr:$scale,
    OptionalAttr<I64Attr>:$kv_group_size,
    OptionalAttr<DenseI64ArrayAttr>:$block_sizes
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
        type($value) `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`offsets` `(` $offsets^ `)`)?
    (`kv_blocks` `(` $kv_num_blocks^ `,` $kv_indices `:`
        type($kv_num_blocks) `,` type($kv_indices) `)`)?
    (`full_kv_blocks` `(` $full_kv_num_blocks^ `,` $full_kv_indices `:`
        type($full_kv_num_blocks) `,` type($full_kv_indices) `)`)?
    (`block_sizes` $block_sizes^)?
    `outs` `(` $output `:` type($output) `)`
    (`logsumexp` `(` $logsumexp^ `:` type($logsumexp) `)`)?
    (`max_scores` `(` $max_scores^ `:` type($max_scores) `)`)?
    `scale` `(` $scale `)`
    attr-dict
    (`score_mod` $score_mod^)?
    (`mask_mod` $mask_mod^)?
    (`->` type($results)^)?
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;

  let builders = [
    // Without block-sparsity operands (every caller that predates them).
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value,
      "::mlir::ValueRange":$captures, "::mlir::ValueRange":$offsets,
      "::mlir::Value":$output, "::mlir::Value":$logsumexp,
      "::mlir::Value":$max_scores, "::mlir::FloatAttr":$scale,
      "::mlir::IntegerAttr":$kv_group_size), [{
      build($_builder, $_state, results, query, key, value, captures, offsets,
            ::mlir::Value(), ::mlir::Value(), ::mlir::Value(), ::mlir::Value(),
            output, logsumexp, max_scores, scale, kv_group_size,
            ::mlir::DenseI64ArrayAttr());
    }]>
  ];

  let extraClassDeclaration = [{
    // DestinationStyleOpInterface: output, then logsumexp / max_scores.
    ::mlir::MutableOperandRange getDpsInitsMutable();

    ::mlir::ShapedType getQueryType() {
      return ::llvm::cast<::mlir::ShapedType>(getQuery().getType());
    }
    ::mlir::ShapedType getKeyType() {
      return ::llvm::cast<::mlir::ShapedType>(getKey().getType());
    }
    ::mlir::ShapedType getValueType() {
      return ::llvm::cast<::mlir::ShapedType>(getValue().getType());
    }
    ::mlir::ShapedType getOutputType() {
      return ::llvm::cast<::mlir::ShapedType>(getOutput().getType());
    }
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    /// True when the op carries BlockMask tensors (kv_blocks).
    bool hasBlockTensors() { return static_cast<bool>(getKvNumBlocks()); }
    bool hasFullBlockTensors() {
      return static_cast<bool>(getFullKvNumBlocks());
    }
    bool hasTensorSemantics();
    bool hasBufferSemantics();

    /// The GQA ratio Hq / Hkv (or the kv_group_size attribute).
    int64_t getGroupSize();

    /// Emits the masked, modified score s'' for one (b, h, m, n) point
    /// (indices local to this op; offsets are added here), block tensors
    /// included (BlockTensors.h).
    ::mlir::Value emitModifiedScore(::mlir::OpBuilder &b, ::mlir::Location loc,
                                    ::mlir::Value rawScore,
                                    ::mlir::ValueRange localIdx,
                                    ::mlir::Value kvIdx);
  }];
}

def Flex_OnlineAttentionOp : Flex_Op<"online_attention", [
    AttrSizedOperandSegments,
    RecursiveMemoryEffects,
    SingleBlock
  ]> {
  let summary = "One online-softmax step of a query tile over a key/value block";
  let description = [{
    The tile-level form of `flex.attention` that the tiled lowering
    (`flex-to-flash`) iterates over key/value blocks. It takes the running
    online-softmax state of `Mt` query rows (row max `mx`, row sum `l`, f32
    accumulator `acc`), one block of `Nt` keys and values, and returns the
    state updated with that block. All shapes are static, tensors only:

    - `query` `[Mt, E]`; `key` `[Nt, E]`, or `[E, Nt]` with
      `transposed_key`; `value` `[Nt, Ev]` (f32, f16 or bf16, all equal);
    - `max`, `sum` `[Mt]` and `acc` `[Mt, Ev]`, f32 (the results have the
      same types).

    `at(b, h, m0, n0)` is the global position of the block: the regions see
    `(b, h, m0 + i, n0 + j)` for row `i` and key `j`, like flex.attention's.
    `bounds(rows, kv_len)` mark padding: rows `i >= rows` are computed and
    meant to be dropped (their region indices are clamped to `m0 + rows -
    1` so captured tensors are never read out of range) and keys with
    `n0 + j >= kv_len` are masked (indices clamped to `kv_len - 1`).
    For each row `i`:

    ```
    s[j]  = mask(score_mod(scale * q[i] . k[j], b, h, m0 + i, n0 + j))
    mn    = max(mx[i], max_j s[j])
    c     = mn == -inf ? 1 : exp(mx[i] - mn)
    p[j]  = mn == -inf ? 0 : exp(s[j] - mn)
    max'[i] = mn;  sum'[i] = sum[i] * c + sum_j p[j]
    acc'[i, :] = acc[i, :] * c + sum_j p[j] * v[j, :]
    ```

    With `rows_per_head = R` the tile holds the query rows of several heads
    (GQA decode: the G query heads of one kv head share each key block):
    `Mt` is a multiple of `R` and row `i` is query index `m0 + i % R` of
    head `h + i / R`, so the regions see `(b, h + i / R, m0 + i % R,
    n0 + j)`; `rows` then counts the valid rows of each head (padding rows
    are those with `i % R >= rows`, clamped to `m0 + rows - 1`).

    ```mlir
    // Rows 0, 1 are head %h, rows 2, 3 head %h + 1 (2 query rows each).
    %mx1, %l1, %acc1 = flex.online_attention
        ins(%q, %k, %v : tensor<4x64xf32>, tensor<128x64xf32>,
                         tensor<128x64xf32>)
        at(%b, %h, %m0, %n0) bounds(%c2, %n)
        outs(%mx, %l, %acc : tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>)
        scale(0.125) {rows_per_head = 2 : i64}
        -> tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>
    ```

    Folding the op over all blocks of `N` from `mx = -inf, l = 0, acc = 0`
    and normalizing (`acc / l`, `0` for rows whose `mx` stays `-inf`) gives
    flex.attention's output. An empty `mask_mod` keeps every key (the
    lowering drops the mask on blocks it proved full); the regions are
    those of flex.attention.

    `mask_when(%c)` (an `i1`, with a `mask_mod`) applies the mask only
    when `%c` is true: the lowering passes "not proved full" for blocks it
    classifies at run time, so that full and partial blocks share one copy
    of the contractions and the softmax update.

    ```mlir
    %not_full = arith.xori %full, %true : i1
    %mx1, %l1, %acc1 = flex.online_attention
        ins(%q, %kt, %v : ...) at(%b, %h, %m0, %n0) bounds(%c64, %n)
        outs(%mx, %l, %acc : ...) scale(0.125) mask_when(%not_full)
        mask_mod { ... } -> ...
    ```

    ```mlir
    %mx1, %l1, %acc1 = flex.online_attention
        ins(%q, %kt, %v : tensor<64x32xf32>, tensor<32x64xf32>,
                          tensor<64x32xf32>)
        at(%b, %h, %m0, %n0) bounds(%c64, %n)
        outs(%mx, %l, %acc : tensor<64xf32>, tensor<64xf32>,
                             tensor<64x32xf32>)
        scale(0.176776692) {transposed_key}
        mask_mod {
        ^bb0(%bb: index, %hh: index, %m: index, %kv: index):
          %c = arith.cmpi sge, %m, %kv : index
          flex.yield %c : i1
        } -> tensor<64xf32>, tensor<64xf32>, tensor<64x32xf32>
    ```

    Pair-packed layouts for the AVX512-BF16 kernels (bf16 only):
    `paired_key` is Kᵀ with pairs of E interleaved, `[E/2, 2 Nt]`, element
    `(n, e)` at `[e / 2, 2 n + e % 2]`; `paired_value` is V with pairs of
    keys interleaved, `[Nt/2, 2 Ev]`, element `(n, ev)` at
    `[n / 2, 2 ev + n % 2]`.

    `flex-decompose-online-attention` rewrites it into the tile builders
    (Q·Kᵀ, scores, softmax update, P·V).
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key,
    AnyRankedTensor:$value,
    Variadic<AnyRankedTensor>:$captures,
    Index:$b, Index:$h, Index:$m0, Index:$n0,
    Index:$rows, Index:$kv_len,
    AnyRankedTensor:$max,
    AnyRankedTensor:$sum,
    AnyRankedTensor:$acc,
    Optional<I1>:$mask_when,
    F32Attr:$scale,
    UnitAttr:$transposed_key,
    UnitAttr:$paired_key,
    UnitAttr:$paired_value,
    OptionalAttr<I64Attr>:$rows_per_head
  );
  let results = (outs AnyRankedTensor:$new_max, AnyRankedTensor:$new_sum,
                      AnyRankedTensor:$new_acc);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
        type($value) `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `at` `(` $b `,` $h `,` $m0 `,` $n0 `)`
    `bounds` `(` $rows `,` $kv_len `)`
    `outs` `(` $max `,` $sum `,` $acc `:` type($max) `,` type($sum) `,`
        type($acc) `)`
    `scale` `(` $scale `)`
    (`mask_when` `(` $mask_when^ `)`)?
    attr-dict
    (`score_mod` $score_mod^)?
    (`mask_mod` $mask_mod^)?
    `->` type($new_max) `,` type($new_sum) `,` type($new_acc)
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;

  let extraClassDeclaration = [{
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    int64_t getTileRows() {
      return ::llvm::cast<::mlir::ShapedType>(getQuery().getType())
          .getDimSize(0);
    }
    /// Rows of one head in the tile (rows_per_head, else all of them).
    int64_t getTileRowsPerHead() {
      return getRowsPerHeadAttr() ? getRowsPerHeadAttr().getInt()
                                  : getTileRows();
    }
    int64_t getTileKeys() {
      int64_t n = ::llvm::cast<::mlir::ShapedType>(getValue().getType())
                      .getDimSize(0);
      return getPairedValue() ? 2 * n : n;
    }
  }];
}

include "torch-mlir-flex/Dialect/Flex/IR/FlexBackwardOps.td"
include "torch-mlir-flex/Dialect/Flex/IR/FlexQuantOps.td"

def Flex_YieldOp : Flex_Op<"yield", [Pure, Terminator,
    ReturnLike, ParentOneOf<["::mlir::flex::AttentionOp",
                             "::mlir::flex::OnlineAttentionOp",
                             "::mlir::flex::AttentionBackwardOp"]>]> {
  let summary = "Yields the values of a flex.attention, flex.online_attention or flex.attention_backward region";
  let description = [{
    Terminates `score_mod` (yields an f32 score), `mask_mod` (yields an
    i1, true for a kept score) and flex.attention_backward's `joint`
    (yields the score gradient, then a value and indices per capture
    gradient).
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}


def Flex_CheckOp : Flex_Op<"check", [MemoryEffects<[MemWrite]>]> {
  let summary = "A runtime check recorded for the caller (no abort)";
  let description = [{
    When `condition` is false at run time, records a failure that the
    caller turns into a Python exception after the call; execution goes
    on (the code around the check must stay safe on failure, e.g. read a
    clamped index). `message` is a Python `str.format` template whose
    fields `{0}`, `{1}`, `{2}` are the (at most three) i64 `details`
    (`{{` and `}}` are literal braces). Index errors start with the word
    "index".

    Produced by `flex-insert-checks` (guarded tensor.extract indices,
    torch-mlir's `cf.assert`); lowered by `flex-lower-checks` to stores into
    the status buffer of the enclosing function (see that pass). It writes
    that buffer, hence the write effect: it is never erased, hoisted or
    merged with another check.

    ```mlir
    %ok = arith.andi %ge0, %ltN : i1
    flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2}"
        details(%i, %c0_i64, %c8_i64)
    flex.check %same, "mismatched size for broadcast"
    ```
  }];
  let arguments = (ins I1:$condition, StrAttr:$message,
                       Variadic<I64>:$details);
  let assemblyFormat = [{
    $condition `,` $message (`details` `(` $details^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_OPS
