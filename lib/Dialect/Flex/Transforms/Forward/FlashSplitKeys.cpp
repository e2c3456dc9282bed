//===- FlashSplitKeys.cpp - decode: key chunks across threads -------------===//
//
// Flash-decoding for ops with few query rows and few (b, h) pairs, where the
// row tiles alone cannot keep the threads busy:
//
//   scf.forall (b, h, s) in (B, Hq, S) {
//     row tile (b, h) of flex.attention (TilingInterface);
//     key loop over blocks [s * nb / S, (s + 1) * nb / S) -> (mx, l, acc)
//     parallel_insert into partial states [B, Hq, S, M(, Ev)]
//   }
//   merge over s: mx = max_s mx_s, w_s = exp(mx_s - mx) (0 when mx_s = -inf),
//   l = sum_s w_s l_s, acc = sum_s w_s acc_s; buildFinalization.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/TilingInterface.h"

#include <limits>

using namespace mlir;
using namespace mlir::flex;

int64_t mlir::flex::chooseKeySplit(AttentionOp op, const FlashConfig &cfg,
                                   int64_t parallelTasks) {
  ShapedType q = op.getQueryType();
  int64_t n = op.getKeyType().getDimSize(2);
  if (parallelTasks <= 1 || !q.hasStaticShape() || ShapedType::isDynamic(n) ||
      q.getDimSize(2) != cfg.tileM || q.getDimSize(2) > 4)
    return 1;
  int64_t rowTiles = q.getDimSize(0) * q.getDimSize(1);
  if (rowTiles <= 0 || rowTiles >= parallelTasks)
    return 1;
  // At least two key blocks per chunk: a chunk costs a state and a merge.
  int64_t blocks = llvm::divideCeil(n, cfg.tileN);
  int64_t chunks = std::min<int64_t>(llvm::divideCeil(parallelTasks, rowTiles),
                            blocks / 2);
  return chunks >= 2 ? chunks : 1;
}


/// Block s * nb / S of chunk `s` (nb = number of key blocks).
static Value chunkStart(OpBuilder &b, Location loc, Value s, Value nb,
                        int64_t chunks) {
  Value c = arith::ConstantIndexOp::create(b, loc, chunks);
  return arith::DivUIOp::create(b, loc, arith::MulIOp::create(b, loc, s, nb),
                                c);
}

/// parallel_insert_slice of a chunk state [M] / [M, Ev] at (b, h, s).
static void insertPartial(OpBuilder &b, Location loc, Value part, Value dest,
                          ValueRange bhs) {
  auto destTy = cast<RankedTensorType>(dest.getType());
  OpFoldResult z = b.getIndexAttr(0), one = b.getIndexAttr(1);
  SmallVector<OpFoldResult> offs = {bhs[0], bhs[1], bhs[2]};
  SmallVector<OpFoldResult> sizes = {one, one, one};
  for (int64_t d = 3; d < destTy.getRank(); ++d) {
    offs.push_back(z);
    sizes.push_back(b.getIndexAttr(destTy.getDimSize(d)));
  }
  SmallVector<OpFoldResult> strides(destTy.getRank(), one);
  tensor::ParallelInsertSliceOp::create(b, loc, part, dest, offs, sizes,
                                        strides);
}

/// The forall over (b, h, chunk) computing partial states.
static FailureOr<scf::ForallOp>
buildChunkForall(RewriterBase &rewriter, AttentionOp op, const FlashConfig &cfg,
                 const KeyValueLayout &layout, int64_t chunks) {
  Location loc = op.getLoc();
  ShapedType q = op.getQueryType();
  int64_t bs = q.getDimSize(0), hs = q.getDimSize(1), m = q.getDimSize(2);
  int64_t mt = cfg.tileM, ev = op.getValueType().getDimSize(3);
  SmallVector<Value> outs = {
      tensor::EmptyOp::create(rewriter, loc, {bs, hs, chunks, mt},
                              rewriter.getF32Type()),
      tensor::EmptyOp::create(rewriter, loc, {bs, hs, chunks, mt},
                              rewriter.getF32Type()),
      tensor::EmptyOp::create(rewriter, loc, {bs, hs, chunks, mt, ev},
                              rewriter.getF32Type())};
  SmallVector<OpFoldResult> ubs = {rewriter.getIndexAttr(bs),
                                   rewriter.getIndexAttr(hs),
                                   rewriter.getIndexAttr(chunks)};
  auto forall =
      scf::ForallOp::create(rewriter, loc, ubs, outs, std::nullopt);
  OpBuilder::InsertionGuard g(rewriter);
  rewriter.setInsertionPointToStart(forall.getBody());
  SmallVector<Value> iv = forall.getInductionVars();
  OpFoldResult z = rewriter.getIndexAttr(0);
  SmallVector<OpFoldResult> offsets = {iv[0], iv[1], z, z, z};
  SmallVector<OpFoldResult> sizes = {
      rewriter.getIndexAttr(1), rewriter.getIndexAttr(1),
      rewriter.getIndexAttr(m),
      rewriter.getIndexAttr(op.getKeyType().getDimSize(2)),
      rewriter.getIndexAttr(ev)};
  FailureOr<TilingResult> tiled =
      cast<TilingInterface>(op.getOperation())
          .getTiledImplementation(rewriter, offsets, sizes);
  if (failed(tiled) || tiled->tiledOps.size() != 1)
    return op.emitOpError("flex-to-flash: row tile of the key split failed");
  auto tile = cast<AttentionOp>(tiled->tiledOps.front());
  Value first = chunkStart(rewriter, loc, iv[2], layout.numBlocks, chunks);
  Value next = arith::AddIOp::create(
      rewriter, loc, iv[2], arith::ConstantIndexOp::create(rewriter, loc, 1));
  Value last = chunkStart(rewriter, loc, next, layout.numBlocks, chunks);
  FailureOr<SmallVector<Value>> state =
      buildRowTileState(rewriter, tile, cfg, &layout, first, last);
  if (failed(state))
    return failure();
  rewriter.eraseOp(tile);
  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  for (auto [part, dest] : llvm::zip(*state, forall.getRegionIterArgs()))
    insertPartial(rewriter, loc, part, dest, iv);
  return forall;
}

/// linalg.generic over dims (b, h, m[, e], s) with s the reduction.
static Value reduceChunks(
    OpBuilder &b, Location loc, ValueRange ins, Value init,
    function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = cast<RankedTensorType>(init.getType()).getRank();
  int64_t dims = rank + 1; // + s
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineMap> maps;
  for (Value in : ins) {
    int64_t r = cast<RankedTensorType>(in.getType()).getRank();
    // [B, H, S, M(, Ev)] partials, [B, H, M] merged rows.
    SmallVector<AffineExpr> e = {d(0), d(1)};
    if (r == 3) {
      e.push_back(d(2));
    } else {
      e.push_back(d(rank));
      for (int64_t i = 2; i < r - 1; ++i)
        e.push_back(d(i));
    }
    maps.push_back(AffineMap::get(dims, 0, e, ctx));
  }
  SmallVector<AffineExpr> outE;
  for (int64_t i = 0; i < rank; ++i)
    outE.push_back(d(i));
  maps.push_back(AffineMap::get(dims, 0, outE, ctx));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ins, ValueRange{init}, maps,
             iters,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               linalg::YieldOp::create(nb, l, fn(nb, l, a));
             })
      .getResult(0);
}

/// w = exp(mx_s - mx), 0 when mx_s = -inf (an empty or fully masked chunk).
static Value chunkWeight(OpBuilder &b, Location loc, Value mxS, Value mx) {
  Value empty = emitIsNegInf(b, loc, mxS);
  Value w = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, mxS, mx));
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  return arith::SelectOp::create(b, loc, empty, zero, w);
}

LogicalResult mlir::flex::splitKeysAttention(RewriterBase &rewriter,
                                             AttentionOp op,
                                             const FlashConfig &cfg,
                                             const KeyValueLayout &layout,
                                             int64_t chunks,
                                             scf::ForallOp &forall) {
  ShapedType q = op.getQueryType();
  if (!q.hasStaticShape() || q.getDimSize(2) != cfg.tileM)
    return op.emitOpError("flex-to-flash: key split needs static B, Hq and "
                          "M = tile-m");
  OpBuilder::InsertionGuard g(rewriter);
  rewriter.setInsertionPoint(op);
  FailureOr<scf::ForallOp> loop =
      buildChunkForall(rewriter, op, cfg, layout, chunks);
  if (failed(loop))
    return failure();
  forall = *loop;
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  Value pmx = forall.getResult(0), pl = forall.getResult(1),
        pacc = forall.getResult(2);
  int64_t bs = q.getDimSize(0), hs = q.getDimSize(1), m = q.getDimSize(2);
  int64_t ev = op.getValueType().getDimSize(3);
  float negInf = -std::numeric_limits<float>::infinity();
  Value mx = reduceChunks(b, loc, {pmx}, filled(b, loc, {bs, hs, m}, negInf),
                          [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                            return arith::MaximumFOp::create(nb, l, a[0], a[1]);
                          });
  Value l = reduceChunks(
      b, loc, {pmx, pl, mx}, filled(b, loc, {bs, hs, m}, 0.0),
      [](OpBuilder &nb, Location lc, ValueRange a) -> Value {
        Value w = chunkWeight(nb, lc, a[0], a[2]);
        return arith::AddFOp::create(nb, lc, a[3],
                                     arith::MulFOp::create(nb, lc, w, a[1]));
      });
  Value acc = reduceChunks(
      b, loc, {pmx, pacc, mx}, filled(b, loc, {bs, hs, m, ev}, 0.0),
      [](OpBuilder &nb, Location lc, ValueRange a) -> Value {
        Value w = chunkWeight(nb, lc, a[0], a[2]);
        return arith::AddFOp::create(nb, lc, a[3],
                                     arith::MulFOp::create(nb, lc, w, a[1]));
      });
  FinalTiles fin = buildFinalization(b, loc, mx, l, acc, op.getOutput(),
                                     static_cast<bool>(op.getLogsumexp()),
                                     static_cast<bool>(op.getMaxScores()));
  SmallVector<Value> results = {fin.out};
  if (op.getLogsumexp())
    results.push_back(fin.lse);
  if (op.getMaxScores())
    results.push_back(fin.max);
  rewriter.replaceOp(op, results);
  return success();
}
