//===- FlashTiling.cpp - row tiles of flex.attention ----------------------===//
//
// What the tiled lowering accepts, its tile sizes, and the (B, Hq, M)
// tiling through flex.attention's TilingInterface with upstream SCF tiling;
// the operand rules, tile sizes and forall tiling it shares with the
// backward (flex-backward-to-flash).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"

using namespace mlir;
using namespace mlir::flex;

std::optional<std::string>
mlir::flex::flashOperandsUnsupportedReason(bool tensorSemantics,
                                           ShapedType query, ShapedType key,
                                           ShapedType value,
                                           bool hasKvGroupSize) {
  if (!tensorSemantics)
    return std::string("operands are memrefs");
  if (query.isDynamicDim(3) || value.isDynamicDim(3))
    return std::string("dynamic head dimension E/Ev");
  // Without kv_group_size, dynamic head counts leave G = Hq / Hkv unknown
  // here; the scalar reference computes it at run time.
  if (!hasKvGroupSize && (query.isDynamicDim(1) || key.isDynamicDim(1)))
    return std::string("dynamic head counts without kv_group_size");
  return std::nullopt;
}

std::optional<std::string> mlir::flex::flashUnsupportedReason(AttentionOp op) {
  return flashOperandsUnsupportedReason(
      op.hasTensorSemantics(), op.getQueryType(), op.getKeyType(),
      op.getValueType(), op.getKvGroupSize().has_value());
}

std::optional<double> mlir::flex::estimateOneThreadMicros(AttentionOp op) {
  ShapedType q = op.getQueryType(), k = op.getKeyType(),
             v = op.getValueType();
  // A dynamic size counts as a long context (kDynamicLength), a dynamic
  // batch or head count as 1: a decode step (static M of a few rows) over a
  // cache of any length stays on one thread unless its heads alone would
  // make it long; a prefill whose length is dynamic gets the threads.
  auto size = [](ShapedType t, unsigned d, double dynamic) {
    return t.isDynamicDim(d) ? dynamic : double(t.getDimSize(d));
  };
  if (q.isDynamicDim(3) || v.isDynamicDim(3))
    return std::nullopt;
  constexpr double kDynamicLength = 4096;
  double b = size(q, 0, 1), hq = size(q, 1, 1), m = size(q, 2, kDynamicLength),
         n = size(k, 2, kDynamicLength), hkv = size(k, 1, 1),
         e = q.getDimSize(3), ev = v.getDimSize(3);
  double width = (e + ev) * q.getElementTypeBitWidth() / 8.0;
  // Q.K^T and P.V over every (q, kv) pair (masks ignored), and K/V plus Q
  // read once. Rates of the vector kernels on one core of the development
  // machine (AMD Zen 5), rounded down: 150 GFLOP/s, 80 GB/s from cache.
  double flops = 2.0 * b * hq * m * n * (e + ev);
  double bytes = b * (hkv * n + hq * m) * width;
  return flops / 150e3 + bytes / 80e3;
}

/// The largest divisor of `block` that is at most `limit` (tiles nest in
/// the blocks of a BlockMask).
int64_t mlir::flex::largestDivisorAtMost(int64_t block, int64_t limit) {
  for (int64_t d = std::min(block, limit); d > 1; --d)
    if (block % d == 0)
      return d;
  return 1;
}

/// True when `op`'s BlockMask tensors give every query head one status
/// (their head dimension is 1), or it has none.
static bool blockTensorsShareHeads(AttentionOp op) {
  if (!op.hasBlockTensors())
    return true;
  auto oneHead = [](Value num) {
    return !num || cast<ShapedType>(num.getType()).getDimSize(1) == 1;
  };
  return oneHead(op.getKvNumBlocks()) && oneHead(op.getFullKvNumBlocks());
}

/// GQA decode: G = kv_group_size query heads per row tile when the whole
/// of a small M is one row tile of each head (G * M <= kMaxGroupedRows rows)
/// and the block tensors, if any, are shared by the heads; else 1.
static int64_t chooseHeadsPerTile(AttentionOp op, int64_t tileM) {
  ShapedType q = op.getQueryType();
  int64_t hq = q.getDimSize(1), m = q.getDimSize(2);
  if (!blockTensorsShareHeads(op) || ShapedType::isDynamic(hq) ||
      ShapedType::isDynamic(m) || m != tileM)
    return 1;
  int64_t g = op.getGroupSize();
  if (g <= 1 || hq % g || g * m > kMaxGroupedRows)
    return 1;
  return g;
}

void mlir::flex::chooseTileSizes(FlashConfig &cfg, int64_t m, int64_t n,
                                 std::optional<ArrayRef<int64_t>> blockSizes,
                                 int64_t decodeTileN) {
  if (cfg.tileM <= 0)
    cfg.tileM = 64;
  if (!ShapedType::isDynamic(m) && m > 0 && m < cfg.tileM)
    cfg.tileM = m;
  if (cfg.tileN <= 0)
    cfg.tileN = cfg.tileM <= 16 ? decodeTileN : 64;
  if (!ShapedType::isDynamic(n) && n > 0 && n < cfg.tileN)
    cfg.tileN = n;
  // With BlockMask tensors every tile lies in one (query, kv) block pair,
  // whose status then classifies the whole tile.
  if (blockSizes) {
    cfg.tileM = largestDivisorAtMost((*blockSizes)[0], cfg.tileM);
    cfg.tileN = largestDivisorAtMost((*blockSizes)[1], cfg.tileN);
  }
}

FlashConfig mlir::flex::chooseFlashConfig(AttentionOp op,
                                          FlashConfig requested) {
  FlashConfig cfg = requested;
  int64_t e = op.getQueryType().getDimSize(3);
  // A decode-sized M gets a longer key block.
  chooseTileSizes(cfg, op.getQueryType().getDimSize(2),
                  op.getKeyType().getDimSize(2), op.getBlockSizes(),
                  /*decodeTileN=*/128);
  // The decode key split tiles per (b, h): no head groups there.
  cfg.keyChunks = chooseKeySplit(op, cfg, cfg.parallelTasks);
  if (cfg.keyChunks <= 1)
    cfg.headsPerTile = chooseHeadsPerTile(op, cfg.tileM);
  // Rows of S are single vectors in the softmax: Nt <= kMaxFmaChunk.
  cfg.vectorize = requested.vectorize && cfg.tileN <= kMaxFmaChunk;
  // Few query rows (decode): transposing K would cost as much as the
  // attention; dot products with rows of K instead.
  int64_t rows = cfg.headsPerTile * cfg.tileM;
  cfg.keyRows = cfg.vectorize && (cfg.headsPerTile > 1
                                      ? rows * e <= kMaxKeyRowFloats
                                      : cfg.tileM <= 2 && cfg.tileM * e <= 256);
  // AVX512-BF16 kernels for bf16 inputs where the shapes pair up; few query
  // rows keep the f32 kernels (packing would cost as much as the work).
  int64_t ev = op.getValueType().getDimSize(3);
  bool bf16 = op.getQueryType().getElementType().isBF16();
  bool dot = (requested.bf16Dot || requested.amx) && bf16 && cfg.vectorize &&
             !cfg.keyRows;
  cfg.pairedKey = dot && canUseBf16Dot(e, cfg.tileN);
  cfg.pairedValue = dot && canUseBf16Dot(cfg.tileN, ev);
  // AMX for the paired products whose tiles fit (decided per product).
  cfg.amx = requested.amx && dot;
  return cfg;
}

FailureOr<AttentionOp> mlir::flex::tileAttentionRows(RewriterBase &rewriter,
                                                     AttentionOp op,
                                                     int64_t tileM,
                                                     scf::ForallOp *forall,
                                                     int64_t tileH) {
  Builder b(op.getContext());
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(tileH),
                                     b.getIndexAttr(tileM), b.getIndexAttr(0),
                                     b.getIndexAttr(0)};
  FailureOr<Operation *> tile = tileIntoForall(rewriter, op, sizes,
                                               "flex-to-flash", "(B, Hq, M)",
                                               forall);
  if (failed(tile))
    return failure();
  return cast<AttentionOp>(*tile);
}

FailureOr<Operation *>
mlir::flex::tileIntoForall(RewriterBase &rewriter, Operation *op,
                           ArrayRef<OpFoldResult> sizes, StringRef pass,
                           StringRef dims, scf::ForallOp *forall) {
  scf::SCFTilingOptions options;
  options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
  options.setTileSizes(sizes);
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled =
      scf::tileUsingSCF(rewriter, cast<TilingInterface>(op), options);
  if (failed(tiled))
    return op->emitOpError(pass + ": tiling " + dims + " failed");
  if (tiled->tiledOps.size() != 1 || tiled->loops.size() != 1)
    return op->emitOpError(pass + ": expected one tiled op in one loop");
  Operation *tile = tiled->tiledOps.front();
  if (tile->getName() != op->getName())
    return op->emitOpError(pass + ": tiling produced no " +
                           op->getName().getStringRef());
  if (forall)
    *forall = dyn_cast<scf::ForallOp>(tiled->loops.front().getOperation());
  rewriter.replaceOp(op, tiled->replacements);
  return tile;
}
