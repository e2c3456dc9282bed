//===- FlashLowering.h - builders of the tiled flash lowering ---*- C++ -*-===//
//
// The pieces of flex-to-flash, each built by one small function:
//
//   flex.attention
//     -- tileAttentionRows (TilingInterface, upstream SCF tiling) -->
//   scf.forall (b, h, m0) { flex.attention on a [1, 1, <=Mt, E] row tile,
//                            or [1, G, Mt, E] for GQA decode }
//     -- decomposeAttentionTile -->
//   state init; scf.for over key blocks {
//     classifyBlock; scf.if live { flex.online_attention } }; finalization
//     -- decomposeOnlineAttention -->
//   buildQKTile; buildScoreTile; buildSoftmaxUpdate; buildPVTile
//
// buildKeyValueLayout pads K/V to whole blocks and transposes K once, ahead
// of the row tiles that share it.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHLOWERING_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHLOWERING_H

#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <string>

namespace mlir::flex {

/// Most rows (G * M) of a GQA decode row tile (FlashConfig::headsPerTile).
constexpr int64_t kMaxGroupedRows = 16;
/// Most query floats (rows x E) of a row tile on the row-dot kernel (K as
/// rows, FlashContractions.cpp).
constexpr int64_t kMaxKeyRowFloats = 4096;

/// Options of the tiled lowering (flex-to-flash and its stage passes).
struct FlashConfig {
  int64_t tileM = 64, tileN = 64;
  /// GQA decode: the query heads of one row tile (tile sizes (1, G, tileM)
  /// over (B, Hq, M)), all G heads of one kv head, so that their G * tileM
  /// rows read each key block once. 1: one head per row tile.
  int64_t headsPerTile = 1;
  bool blockSparsity = true, denseClassify = true, fastExp = true,
       vectorize = true;
  /// Decode (few query rows): dot products with rows of K as they are
  /// instead of a transposed K.
  bool keyRows = false;
  /// bf16 inputs on AVX512-BF16 dot products (requested), and the
  /// contractions that can use them (FlashBf16Kernel.h): Q.K^T with K^T in
  /// pairs of E, P.V with V in pairs of keys.
  bool bf16Dot = false, pairedKey = false, pairedValue = false;
  /// The backward's contractions as linalg.generic ops marked `flex.amx`
  /// (AMX tiles after bufferization, flex-amx-contractions): requested,
  /// and chosen by chooseFlashBackwardConfig (with pairedKey / pairedValue).
  bool amx = false;
  /// Parallel iterations wanted (about 4x the threads); decode ops with
  /// fewer (b, h) row tiles split their keys into chunks. 0: no split.
  int64_t parallelTasks = 0;
  /// The chunks chosen for the op (chooseKeySplit); 1: no split.
  int64_t keyChunks = 1;
  /// The vector registers the micro-kernels block for (option
  /// `vector-bits`, VectorIsa in FlashMicroKernel.h): 512 (AVX-512) or
  /// 256 (AVX2+FMA: 8-lane pieces, 4 x 3 register blocks, 8 x 8 blocks
  /// in the K transposes, 8 keys per fold of the key-row dots).
  int64_t vectorBits = 512;
};

/// Why flex-to-flash leaves `op` to flex-to-loops (memrefs, dynamic head
/// dims, dynamic head counts without kv_group_size), or nullopt.
std::optional<std::string> flashUnsupportedReason(AttentionOp op);
/// The operand rules of both tiled lowerings (flex.attention and
/// flex.attention_backward), for flashUnsupportedReason and
/// flashBackwardUnsupportedReason.
std::optional<std::string>
flashOperandsUnsupportedReason(bool tensorSemantics, ShapedType query,
                               ShapedType key, ShapedType value,
                               bool hasKvGroupSize);

/// The tile sizes and kernel choices for `op`: 64 x 64 by default (or the
/// requested sizes); a dimension smaller than the tile shrinks it; a
/// decode-sized M gets a longer key block; GQA decode groups the query
/// heads of a kv head (headsPerTile).
FlashConfig chooseFlashConfig(AttentionOp op, FlashConfig requested);

/// Tile sizes Mt x Nt of both tiled lowerings, in place: the requested ones
/// in `cfg` (> 0) or 64 x 64 (Nt `decodeTileN` when Mt <= 16), each shrunk
/// to a static M / N and nested in the BlockMask blocks `blockSizes`.
void chooseTileSizes(FlashConfig &cfg, int64_t m, int64_t n,
                     std::optional<ArrayRef<int64_t>> blockSizes,
                     int64_t decodeTileN = 64);

/// Rough one-thread run time of `op` in microseconds, to leave small ops on
/// one thread; a dynamic length counts as 4096, a dynamic batch or head
/// count as 1; None for a dynamic head dimension.
std::optional<double> estimateOneThreadMicros(AttentionOp op);

/// Keys and values laid out for the key blocks: K transposed per block to
/// [Bkv, Hkv, Np / Nt, E, Nt] unless `keyRows`, N padded with zeros to a multiple
/// of the block. With `peelTail`, K rows and V are read in place instead
/// of padded copies: blocks [0, fullBlocks) from `keys`/`values`, the last,
/// partial block (when numBlocks > fullBlocks) from `tailKeys`/`tailValues`
/// ([Bkv, Hkv, Nt, E|Ev], its rows zero-padded) where those are set.
struct KeyValueLayout {
  Value sourceKey;   // the K it was built from
  Value keys;        // [Bkv, Hkv, Np / Nt, E, Nt] or [Bkv, Hkv, Np|N, E]
  Value values;      // [Bkv, Hkv, Np|N, Ev]
  Value tailKeys, tailValues;
  Value kvLen;       // N (index)
  Value numBlocks;   // ceil(N / Nt) (index)
  Value fullBlocks;  // blocks read from keys/values (index)
  bool transposedKey = true;
  /// Pair-packed for the bf16 dot kernels: keys [Bkv, Hkv, Np/Nt * E/2, 2 Nt],
  /// values [Bkv, Hkv, Np/2, 2 Ev].
  bool pairedKey = false, pairedValue = false;
};
KeyValueLayout buildKeyValueLayout(OpBuilder &b, Location loc, Value key,
                                   Value value, const FlashConfig &cfg,
                                   bool peelTail = true);

/// Tiles `op` over (B, Hq, M) with tile sizes (1, tileH, tileM) into an
/// scf.forall through its TilingInterface; returns the tiled op.
FailureOr<AttentionOp> tileAttentionRows(RewriterBase &rewriter,
                                         AttentionOp op, int64_t tileM,
                                         scf::ForallOp *forall = nullptr,
                                         int64_t tileH = 1);

/// Tiles `op` (a TilingInterface op) with tile sizes `sizes` into one
/// scf.forall through upstream SCF tiling and replaces it; returns the
/// tiled op, of `op`'s kind. `pass` and `dims` (e.g. "(B, Hq, M)") name the
/// errors (tileAttentionRows, tileAttentionBackwardHeads).
FailureOr<Operation *> tileIntoForall(RewriterBase &rewriter, Operation *op,
                                      ArrayRef<OpFoldResult> sizes,
                                      StringRef pass, StringRef dims,
                                      scf::ForallOp *forall);

/// Rewrites a row tile of flex.attention (query [1, 1, M, E] with M <= Mt,
/// or [1, G, Mt, E] with G = headsPerTile: G * Mt rows, row g * Mt + m of
/// head h0 + g, over the one kv head h0 / G)
/// into the online-softmax state, a loop over key blocks of
/// flex.online_attention (with block classification) and the
/// normalization. Uses `layout` when the tile's key is a slice of its
/// source (hoisted by the caller), else lays out the tile's own K/V.
LogicalResult decomposeAttentionTile(RewriterBase &rewriter, AttentionOp tile,
                                     const FlashConfig &cfg,
                                     const KeyValueLayout *layout);

/// The online-softmax state (mx [Mt], l [Mt], acc [Mt, Ev], f32) of a row
/// tile after key blocks [firstBlock, lastBlock) (all blocks when null),
/// unnormalized; built before `tile`, which is left in place.
FailureOr<SmallVector<Value>>
buildRowTileState(OpBuilder &b, AttentionOp tile, const FlashConfig &cfg,
                  const KeyValueLayout *layout, Value firstBlock,
                  Value lastBlock);

/// Decode key split (FlashSplitKeys.cpp): how many chunks of key blocks
/// each (b, h) row tile of `op` is split into so that about
/// `parallelTasks` iterations run in parallel; 1 (no split) unless the
/// shapes are static, M <= 4 is one row tile and B * Hq < parallelTasks.
int64_t chooseKeySplit(AttentionOp op, const FlashConfig &cfg,
                       int64_t parallelTasks);
/// Replaces `op` by an scf.forall over (b, h, chunk) of partial online-
/// softmax states (row tiles through the TilingInterface, key blocks of
/// the chunk) and their merge + finalization; the forall is returned.
LogicalResult splitKeysAttention(RewriterBase &rewriter, AttentionOp op,
                                 const FlashConfig &cfg,
                                 const KeyValueLayout &layout, int64_t chunks,
                                 scf::ForallOp &forall);

/// The index box of one (row tile, key block) pair, global indices: heads
/// [hLo, hHi], rows [mLo, mHi], keys [nLo, nHi] (valid ones). The dense
/// pre-pass walks the whole tileM x Nt block from (hLo, mLo, nLo): row i is
/// head hLo + i / rowsPerHead, query mLo + i % rowsPerHead (clamped to
/// `rows` valid ones), keys clamped to `kvLen`.
struct BlockBox {
  Value b, hLo, hHi, mLo, mHi, nLo, nHi;
  Value rows, kvLen;
  int64_t tileM = 0, tileN = 0, rowsPerHead = 0;
};
/// Block classification: `live` false when no point of the box is kept,
/// `full` true when every point is. Both null when not classified.
struct BlockClass {
  Value live, full;
};
/// Which classification `op`'s mask gets: "interval" (region of integer
/// arithmetic), "dense" (a pre-pass evaluating the mask on the block) or
/// "none".
StringRef blockClassificationKind(AttentionOp op, const FlashConfig &cfg);
BlockClass classifyBlock(OpBuilder &b, Location loc, AttentionOp op,
                         StringRef kind, const BlockBox &box);
/// The same for any op with a flex.attention mask_mod region
/// (flex.attention_backward).
StringRef blockClassificationKind(Region &maskMod, const FlashConfig &cfg);
BlockClass classifyBlock(OpBuilder &b, Location loc, Region &maskMod,
                         StringRef kind, const BlockBox &box);
/// The BlockMask status of the (query block of row `m0`, kv block of key
/// `n0`) pair of global batch `batch`, head `head` folded into the mask's
/// classification `mask` (null parts: not classified): live when the kv
/// block is listed full, or partial and the mask may keep a point; full
/// when listed full, or partial and the mask keeps all (unclassified: only
/// without mask_mod, `hasMaskMod` false). `op` must have block tensors.
BlockClass withBlockStatus(OpBuilder &b, Location loc, BlockTensorOperands op,
                           bool hasMaskMod, Value batch, Value head, Value m0,
                           Value n0, BlockClass mask);
/// The largest divisor of `block` that is at most `limit` (tiles nest in
/// the blocks of a BlockMask).
int64_t largestDivisorAtMost(int64_t block, int64_t limit);
/// dest[m, j] += lhs[m, k] * rhs(k, j) as a linalg.generic over (m, k, j),
/// products and sums in f32; `rhsMap` indexes rhs by (d0, d1, d2) = (m, k,
/// j) (the contractions without the vector kernels).
Value buildGenericContraction(OpBuilder &b, Location loc, Value lhs, Value rhs,
                              AffineMap rhsMap, Value dest);

/// Interval analysis of a mask_mod (MaskIntervals.cpp): integer index
/// arithmetic, casts, selects, comparisons (integer and ordered float) and
/// reads of captured tensors. emitMaskBounds returns (true on the whole
/// box, false on the whole box) for the box `argRanges` of (b, h, q, kv).
bool isIntervalAnalyzableMask(Region &region);
std::pair<Value, Value>
emitMaskBounds(OpBuilder &b, Location loc, Region &region,
               ArrayRef<std::pair<Value, Value>> argRanges);
/// Bounds of `src[indices]` with index k in [lo_k, hi_k] (clamped to the
/// extents of `src`): (min, max) of the elements, or (all, any) for i1
/// (MaskCaptureReads.cpp).
std::pair<Value, Value>
emitCaptureReadBounds(OpBuilder &b, Location loc, Value src,
                      ArrayRef<std::pair<Value, Value>> indices);

/// Rewrites one flex.online_attention into the tile builders below.
LogicalResult decomposeOnlineAttention(RewriterBase &rewriter,
                                       OnlineAttentionOp op,
                                       const FlashConfig &cfg);

/// S[Mt, Nt] = Q . K^T (f32), as a vector micro-kernel or linalg.generic;
/// times the op's scale when qkTileAppliesScale.
Value buildQKTile(OpBuilder &b, Location loc, OnlineAttentionOp op,
                  const FlashConfig &cfg);
/// Whether buildQKTile's kernel multiplies by the scale as it writes S
/// (the broadcast-FMA kernel over K^T, the key-row dot kernel).
bool qkTileAppliesScale(OnlineAttentionOp op, const FlashConfig &cfg);
/// S = scale * Q . K^T with K as rows (q [Mt, E], k [Nt, E], s [Mt, Nt]
/// f32, scale an f32 scalar), `lanes` keys per step (16, or 8 with 256-bit
/// registers; FlashKeyRowDots.cpp); canUseKeyRowDots: E and Nt are
/// multiples of `lanes`.
bool canUseKeyRowDots(int64_t e, int64_t nt, int64_t lanes = 16);
Value buildKeyRowDots(OpBuilder &b, Location loc, Value q, Value k, Value s,
                      Value scale, int64_t lanes = 16);
/// scale (unless `scaled`), score_mod, mask_mod (when the op has one) and
/// key padding applied to S in place, on global indices; S itself when
/// there is nothing to apply.
Value buildScoreTile(OpBuilder &b, Location loc, OnlineAttentionOp op,
                     Value s, bool scaled);
/// The online-softmax update of one block: P = exp(S - mn) and the new
/// max, sum and correction exp(mx - mn) of each row.
struct SoftmaxUpdate {
  Value p, max, sum, corr;
};
SoftmaxUpdate buildSoftmaxUpdate(OpBuilder &b, Location loc, Value s,
                                 Value max, Value sum,
                                 const FlashConfig &cfg);
/// acc' = acc * corr + P . V (`pairedValue`: V in pairs of keys, on the
/// bf16 dot kernel).
Value buildPVTile(OpBuilder &b, Location loc, Value p, Value v, Value acc,
                  Value corr, bool pairedValue, const FlashConfig &cfg);

/// The normalized row tile: out = acc / l (0 for fully masked rows)
/// written into `outDest` ([Mt, Ev], the output element type), and when
/// asked lse = (mx + log l) / ln 2 and max = mx / ln 2 ([Mt], f32; -inf for
/// fully masked rows). Leading dims are allowed (mx, l [..., Mt], acc and
/// outDest [..., Mt, Ev], static).
struct FinalTiles {
  Value out, lse, max;
};
FinalTiles buildFinalization(OpBuilder &b, Location loc, Value mx, Value l,
                             Value acc, Value outDest, bool withLse,
                             bool withMax);

/// An f32 tensor of `shape` filled with `v` (the online-softmax states).
Value filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, double v);

/// x == -inf (scalar f32): a fully masked row's max, or an empty chunk's.
Value emitIsNegInf(OpBuilder &b, Location loc, Value x);
/// exp(x) for x <= 0 (scalar or vector f32) as a polynomial (FlashMath.cpp).
Value emitExpNonPositive(OpBuilder &b, Location loc, Value x);
/// Reduces a 1-D vector by halving with `comb`.
Value treeReduce(OpBuilder &b, Location loc, Value v,
                 function_ref<Value(Value, Value)> comb);

} // namespace mlir::flex

#endif
