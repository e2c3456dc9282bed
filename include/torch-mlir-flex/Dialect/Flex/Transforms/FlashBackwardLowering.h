//===- FlashBackwardLowering.h - tiled flex.attention_backward --*- C++ -*-===//
//
// The pieces of flex-backward-to-flash (FA2 backward, one pass over the key
// blocks, no B·H·M·N buffer), each built by one function:
//
//   flex.attention_backward
//     -- buildBackwardRowStats -->  delta, natural-log lse [B, Hq, M] f32
//     -- buildBackwardKeyValueLayout --> K^T, V^T per key block, K rows
//     -- tileAttentionBackwardHeads (TilingInterface over (B, Hkv)) -->
//   scf.forall (b, hkv) { flex.attention_backward on one kv head }
//     -- decomposeAttentionBackwardTile -->
//   scf.for key block j { dK_j, dV_j = 0;
//     scf.for b, g, query block i { classifyBlock; scf.if live {
//       buildBackwardBlock: S = Q.K^T, dP = dO.V^T (broadcast-FMA),
//         buildBackwardScoreTile (P, dS on global indices),
//         dV_j += P^T.dO, dK_j += dS^T.Q, dQ_i += dS.K } }
//     dK, dV rows of block j += dK_j, dV_j }
//
// With bf16-dot (chooseFlashBackwardConfig sets pairedKey / pairedValue):
// K^T, V^T and K rows are packed in bf16 pairs (the forward's packKeyPairs
// / packValuePairs), each tile packs its Q and dO in pairs of query rows,
// and the five contractions run on the vdpbf16ps kernel
// (buildBf16ScoreProducts, buildBf16TransposedProductTile,
// buildBf16RowProductTile in Backward/FlashBackwardBf16Dot.cpp) with P and
// dS rounded to bf16. With amx (cfg.amx, the same layouts): the products
// are linalg.generic ops marked flex.amx (Backward/FlashBackwardAmx.cpp),
// AMX tile loops after bufferization (flex-amx-contractions), dK_j and
// dV_j kept transposed.
//
// With capture gradients (lowerBackwardWithCapturePartials): each tile
// scatter-adds the joint's contributions of its live pairs into its own
// f32 partial buffer (a row of [numTiles, C + 1] per capture gradient, C
// its element count, the last column a discard slot), reduced over the
// tiles into the capture gradients after the forall.
//
// Docs: docs/tiled-lowering.md (backward section).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHBACKWARDLOWERING_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHBACKWARDLOWERING_H

#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

namespace mlir::flex {

/// Why flex-backward-to-flash leaves `op` to flex-to-loops (memrefs, dynamic
/// head dims, dynamic head counts without kv_group_size, capture gradients
/// of dynamic shape or with partial buffers over the limit), or nullopt.
std::optional<std::string>
flashBackwardUnsupportedReason(AttentionBackwardOp op);

/// Bound on the per-tile f32 partial buffers of the capture gradients
/// (numTiles x sum of (elements + 1) x 4 bytes).
constexpr int64_t kCapturePartialLimitBytes = int64_t(64) << 20;

/// How the (B, Hkv) tiles of an op with capture gradients are laid out:
/// tiles over (B, Hkv) when the batch is owned (Bkv == B, static) and the
/// partials fit, else over Hkv (whole batches in a tile); `numTiles` rows
/// of partials, `elements[j]` the element count of capture gradient j.
struct CapturePartialPlan {
  bool tileBatch = false;
  int64_t numTiles = 0;
  SmallVector<int64_t> elements;
};
/// The plan, or why there is none (dynamic shapes, over the limit).
FailureOr<CapturePartialPlan>
planCapturePartials(AttentionBackwardOp op, std::string *why = nullptr);

/// Tile sizes (Mt query rows, Nt keys): 64 x 64 or the requested ones,
/// shrunk to static M / N, nested in the BlockMask blocks. With
/// `requested.bf16Dot`, vectorize and bf16 query, key, value and grad_out
/// whose five contractions pair up (backwardCanUseBf16Dot), pairedKey and
/// pairedValue are set: the bf16 dot kernels (the forward's other kernel
/// choices are cleared).
FlashConfig chooseFlashBackwardConfig(AttentionBackwardOp op,
                                      FlashConfig requested);

/// Do the five contractions of `op` with tiles Mt x Nt pair up for the bf16
/// dot kernel (canUseBf16Dot of each: E, Ev, Mt, Nt even; E, Ev, Nt
/// multiples of 4) with bf16 query, key, value and grad_out?
bool backwardCanUseBf16Dot(AttentionBackwardOp op, int64_t tileM,
                           int64_t tileN);
/// ... and on AMX tiles (flex-amx-contractions: M, N multiples of 16, K of
/// 32): bf16 as above, E, Ev, Mt, Nt multiples of 32.
bool backwardCanUseAmx(AttentionBackwardOp op, int64_t tileM, int64_t tileN);

/// Rough one-thread run time in microseconds (2.5x the forward's
/// contractions at 150 GFLOP/s); nullopt for dynamic shapes.
std::optional<double> estimateBackwardMicros(AttentionBackwardOp op);

/// The pre-pass, [B, Hq, M] f32 each (parallel linalg.generic ops):
///   delta = sum_e f32(grad_out) * f32(out) - grad_logsumexp / ln2
///   lse   = logsumexp * ln2 (natural log units)
/// `sourceQuery` is the query of the op they were built for (tiles find
/// their slice by it).
struct BackwardRowStats {
  Value delta, lse, sourceQuery;
};
BackwardRowStats buildBackwardRowStats(OpBuilder &b, Location loc,
                                       AttentionBackwardOp op);

/// K and V for the key blocks, N padded with zeros to Np = ceil(N/Nt) Nt:
/// K^T and V^T per block [Bkv, Hkv, Np/Nt, E|Ev, Nt] (the forward's
/// buildKeyValueLayout, once with K and once with V as the "key"), K rows
/// [Bkv, Hkv, Np, E] for dQ += dS.K. `paired` (cfg.pairedKey): bf16 pairs
/// for the dot kernel, K^T and V^T [Bkv, Hkv, Np/Nt * E|Ev / 2, 2 Nt]
/// (packKeyPairs), K rows [Bkv, Hkv, Np/2, 2 E] (packValuePairs).
struct BackwardKeyValueLayout {
  Value sourceKey;
  Value keysT, valuesT, keyRows;
  Value kvLen, numBlocks;
  bool paired = false;
};
BackwardKeyValueLayout buildBackwardKeyValueLayout(OpBuilder &b, Location loc,
                                                   Value key, Value value,
                                                   const FlashConfig &cfg);

/// Tiles `op` over (B, Hkv) into an scf.forall through its TilingInterface:
/// tile sizes (1, 1) when the batch is owned by its tile (Bkv == B), else
/// (whole B, 1) (grad_key / grad_value summed over a broadcast key batch
/// inside the tile). Returns the tiled op.
FailureOr<AttentionBackwardOp>
tileAttentionBackwardHeads(RewriterBase &rewriter, AttentionBackwardOp op,
                           scf::ForallOp *forall = nullptr);

/// Rewrites a tile of flex.attention_backward with one kv head (key [Bkt,
/// 1, N, E], query [Bt, G, M, E]) into the loop nest over key blocks, query
/// batches, heads and query blocks. Uses `stats` / `layout` when the tile's
/// query / key are slices of their sources (hoisted by the caller), else
/// builds the tile's own.
///
/// Capture gradients: with `partials` (one flat [C + 1] f32 tensor per
/// capture gradient, C its element count) the tile's contributions are
/// scatter-added into them, the updated partials returned in `partialsOut`
/// and the tile's capture-gradient results must be unused; without, the
/// tile keeps its own partials and adds them into its capture-gradient
/// inits (reduceCapturePartials).
LogicalResult decomposeAttentionBackwardTile(
    RewriterBase &rewriter, AttentionBackwardOp tile, const FlashConfig &cfg,
    const BackwardRowStats *stats, const BackwardKeyValueLayout *layout,
    ValueRange partials = {}, SmallVector<Value> *partialsOut = nullptr);

/// `init + sum over t of partials[t, 0 : C]` viewed in init's shape (f32
/// sums, rounded once to init's element type) into a fresh tensor;
/// `partials` is [T, C + 1] or [C + 1] f32 (the last column discarded).
Value reduceCapturePartials(OpBuilder &b, Location loc, Value init,
                            Value partials);

/// The whole lowering of an op with capture gradients (hoisted `stats`,
/// `layout`): zero-filled partials [numTiles, C + 1] f32 per capture
/// gradient, an scf.forall over the plan's tiles whose tile decomposes into
/// the key-block loops scatter-adding into its row of the partials, then
/// reduceCapturePartials into the capture_grads inits. Replaces `op`.
LogicalResult lowerBackwardWithCapturePartials(
    RewriterBase &rewriter, AttentionBackwardOp op, const FlashConfig &cfg,
    const BackwardRowStats &stats, const BackwardKeyValueLayout &layout,
    scf::ForallOp &forall);

/// One (query block, key block) pair: global position, tiles of the
/// operands ([Mt, E] q, [Mt, Ev] dO, [Mt] lse / delta, [E, Nt] K^T,
/// [Ev, Nt] V^T, [Nt, E] K rows), valid rows / keys.
/// With `bf16Dot` K^T, V^T and K rows are the pair-packed tiles
/// ([E/2, 2 Nt], [Ev/2, 2 Nt], [Nt/2, 2 E]), `qPairs` / `doutPairs` the
/// query block's Q and dO in pairs of rows ([Mt/2, 2 E|Ev]), and the bf16
/// scratches take P^T and dS^T in pairs ([Mt/2, 2 Nt]) and dS ([Mt, Nt]).
struct BackwardBlock {
  Value b, h, m0, n0, rows, kvLen;
  Value q, dout, lse, delta, keyT, valueT, keyRows;
  bool bf16Dot = false;
  Value qPairs, doutPairs;
  Value pPairsScratch, dsPairsScratch, dsBf16Scratch;
  /// AMX (with the pair-packed key tiles and bf16 scratches above): the
  /// contractions are marked linalg.generic ops; S comes unscaled
  /// (`scaleScores`: the score tile multiplies); dK_j, dV_j are kept
  /// transposed ([E|Ev, Nt]: dV^T += dO^T . P with P as the pair-packed
  /// rhs), `qT` / `doutT` the block's Q^T, dO^T ([E|Ev, Mt] bf16).
  bool amx = false, scaleScores = false;
  Value qT, doutT;
  /// i1: apply mask_mod (block not proved full); null: always (when the
  /// op has a mask_mod).
  Value maskWhen;
  /// Scratch [Mt, Nt] f32 tensors (S, dP, P, dS), created once per tile.
  Value sScratch, dpScratch, pScratch, dsScratch;
  int64_t tileM = 0, tileN = 0;
  /// Per capture gradient: scratch [Mt, Nt] f32 contribution values and
  /// [Mt, Nt] i32 flat indices, and the capture gradient's static shape.
  SmallVector<Value> contribValues, contribIndices;
  SmallVector<SmallVector<int64_t>> captureShapes;
};

/// P and dS (times the scale) of a block from S = scale Q.K^T and
/// dP = dO.V^T, on global indices:
///   s' = score_mod(s); keep = mask_mod && row, key valid && lse finite
///   P  = keep ? exp(s' - lse) : 0
///   dS = keep ? scale * joint(s, P (dP - delta)) : 0
/// and per capture gradient the joint's contribution values (f32) and flat
/// indices (i32; C, the discard slot, for points that are masked, padding
/// or out of range; lse = -inf rows do contribute, as in the reference).
/// With `maskWhen`, the mask is applied under scf.if.
struct BackwardScores {
  Value p, ds;
  SmallVector<Value> contribValues, contribIndices;
};
BackwardScores buildBackwardScoreTile(OpBuilder &b, Location loc,
                                      AttentionBackwardOp op,
                                      const BackwardBlock &blk, Value s,
                                      Value dp, const FlashConfig &cfg);

/// S = scale Q.K^T and dP = dO.V^T ([Mt, Nt] f32) of a block.
std::pair<Value, Value> buildBackwardScoreProducts(OpBuilder &b, Location loc,
                                                   AttentionBackwardOp op,
                                                   const BackwardBlock &blk,
                                                   const FlashConfig &cfg);

/// acc[Nt, W] += lhs^T . rhs, lhs [Mt, Nt] f32 (P or dS), rhs [Mt, W]
/// (dO or Q): dV_j and dK_j.
Value buildTransposedProductTile(OpBuilder &b, Location loc, Value lhs,
                                 Value rhs, Value acc, const FlashConfig &cfg);
/// acc[Mt, E] += ds . k, ds [Mt, Nt] f32, k [Nt, E]: dQ_i.
Value buildRowProductTile(OpBuilder &b, Location loc, Value ds, Value k,
                          Value acc, const FlashConfig &cfg);

/// The bf16 dot variants (blk.bf16Dot, Backward/FlashBackwardBf16Dot.cpp),
/// products of bf16 on vdpbf16ps with f32 sums:
/// S = scale Q.K^T and dP = dO.V^T with K^T / V^T pair-packed;
std::pair<Value, Value> buildBf16ScoreProducts(OpBuilder &b, Location loc,
                                               AttentionBackwardOp op,
                                               const BackwardBlock &blk);
/// acc[Nt, W] += bf16(lhs)^T . rhs, lhs [Mt, Nt] f32 (P or dS, rounded and
/// packed in pairs of rows into `scratch` [Mt/2, 2 Nt] bf16), rhs the
/// pair-packed [Mt/2, 2 W] dO or Q: dV_j and dK_j;
Value buildBf16TransposedProductTile(OpBuilder &b, Location loc, Value lhs,
                                     Value rhs, Value acc, Value scratch);
/// acc[Mt, E] += bf16(ds) . k, ds [Mt, Nt] f32 (rounded into `scratch`
/// [Mt, Nt] bf16), k the pair-packed K rows [Nt/2, 2 E]: dQ_i.
Value buildBf16RowProductTile(OpBuilder &b, Location loc, Value ds, Value k,
                              Value acc, Value scratch);

/// The AMX variants (blk.amx, Backward/FlashBackwardAmx.cpp), each product
/// a buildAmxProduct (FlashBf16Kernel.h):
/// S = Q.K^T (unscaled) and dP = dO.V^T into the zero-filled scratch;
std::pair<Value, Value> buildAmxScoreProducts(OpBuilder &b, Location loc,
                                              const BackwardBlock &blk);
/// dV_j^T += dO^T . bf16(P), dK_j^T += Q^T . bf16(dS), dQ_i += bf16(dS) . K
/// (P, dS packed in pairs of query rows / rounded into the block's bf16
/// scratch): (dQ_i, dK_j^T, dV_j^T).
SmallVector<Value> buildAmxGradientProducts(OpBuilder &b, Location loc,
                                            const BackwardBlock &blk, Value p,
                                            Value ds, Value dq, Value dkT,
                                            Value dvT);

/// partials[j][idx] += value over the [Mt, Nt] contribution tiles (scf.for
/// over the points, tensor.extract / insert; the discard slot absorbs the
/// skipped points): the updated flat partials.
SmallVector<Value> buildCaptureScatterAdds(OpBuilder &b, Location loc,
                                           const BackwardScores &sc,
                                           ValueRange partials);

/// The whole block: the two score products, the score tile, the three
/// gradient products (the bf16 dot variants with blk.bf16Dot) and the
/// capture scatter-adds; returns (dQ_i, dK_j, dV_j, partials...).
SmallVector<Value> buildBackwardBlock(OpBuilder &b, Location loc,
                                      AttentionBackwardOp op,
                                      const BackwardBlock &blk, Value dq,
                                      Value dk, Value dv, ValueRange partials,
                                      const FlashConfig &cfg);

} // namespace mlir::flex

#endif
