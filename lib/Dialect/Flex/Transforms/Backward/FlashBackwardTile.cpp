//===- FlashBackwardTile.cpp - a (b, hkv) tile as a loop over key blocks --===//
//
// Rewrites a tile of flex.attention_backward with one kv head (key [Bkt, 1,
// N, E], query [Bt, G, M, E]; global position in its offsets) into
//
//   Q, dO, lse, delta padded to Mp = ceil(M / Mt) Mt rows;
//   dQacc = f32(grad_query init) [Bt, G, Mp, E]
//   scf.for kb in [0, Bkt) {                 kv batches of the tile
//     scf.for j over key blocks {
//       dK_j = 0 [Nt, E], dV_j = 0 [Nt, Ev]
//       scf.for b over the query batches of kb (b = kb, or all when the
//           key batch is broadcast) { scf.for g in [0, G) {
//         scf.for i over query blocks {
//           classifyBlock (+ BlockMask status) -> live, full
//           scf.if live { buildBackwardBlock } } } }
//       grad_key / grad_value rows of block j += dK_j, dV_j (rounded once)
//   } }
//   grad_query = dQacc rounded
//
// With capture gradients the live pairs also scatter-add the joint's
// contributions into flat f32 partials (threaded through the loops): the
// caller's row of its [numTiles, C + 1] buffer, else the tile's own, added
// into the capture-gradient inits at the end (reduceCapturePartials).
//
// The tile owns grad_key / grad_value of its kv head and grad_query of its
// G query heads: tiles never write the same element.
//
// With the bf16 dot kernels (cfg.pairedKey) the tile also packs its padded
// Q and dO in pairs of query rows ([Bt, G, Mp/2, 2 E|Ev], loops inside the
// tile) and reads the pair-packed key blocks of the layout. With AMX
// (cfg.amx) it transposes Q and dO instead ([Bt, G, E|Ev, Mp], 16 x 16
// vector blocks) and keeps dK_j, dV_j transposed ([E|Ev, Nt]), added into
// the grad_key / grad_value rows through a transposed map.
//
//===----------------------------------------------------------------------===//
#include "FlashBackwardOperands.h"
#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;
using namespace mlir::flex::backward_tile;

namespace {
/// What every block pair of one tile shares.
struct BackwardTile {
  mutable AttentionBackwardOp op;
  int64_t mt, nt, e, ev, g;
  Value b0, h0, m, numQB, kvLen, numKB;
  Value q, dout, lse, delta;              // [Bt, G, Mp, *]
  Value keysT, valuesT, keyRows, kb0, kh; // layout and the tile's place
  Value sS, sDp, sP, sDs, sDk, sDv;       // scratch
  // bf16 dot kernels: Q, dO in pairs of rows [Bt, G, Mp/2, 2 *]; bf16
  // scratch for P^T, dS^T pairs and dS.
  bool dot = false, amx = false;
  Value qPairs, doutPairs, sPPairs, sDsPairs, sDsBf16;
  // AMX: Q^T, dO^T [Bt, G, E|Ev, Mp] bf16 (dK_j, dV_j kept transposed).
  Value qT, doutT;
  // Capture gradients: contribution tiles (scratch) and static shapes.
  SmallVector<Value> contribValues, contribIndices;
  SmallVector<SmallVector<int64_t>> captureShapes;
  StringRef kind;
};
} // namespace

/// One (query block i, key block j) step of query batch `bl`, head `g`:
/// classification, then the block when live; (dQacc, dK_j, dV_j,
/// capture partials...).
static SmallVector<Value> buildPairStep(OpBuilder &b, Location loc,
                                        const BackwardTile &t,
                                        const FlashConfig &cfg, Value bl,
                                        Value g, Value i, Value n0,
                                        Value nHi, Value keyT, Value valueT,
                                        Value keyRows, ValueRange st) {
  Value bG = arith::AddIOp::create(b, loc, t.b0, bl);
  Value hG = arith::AddIOp::create(b, loc, t.h0, g);
  Value m0 = arith::MulIOp::create(b, loc, i, cIdx(b, loc, t.mt));
  Value rows = arith::MinSIOp::create(
      b, loc, cIdx(b, loc, t.mt), arith::SubIOp::create(b, loc, t.m, m0));
  if (auto m = getConstantIntValue(t.m); m && *m % t.mt == 0)
    rows = cIdx(b, loc, t.mt);
  Value mHi = arith::AddIOp::create(
      b, loc, m0, arith::SubIOp::create(b, loc, rows, cIdx(b, loc, 1)));
  BlockBox box{bG, hG, hG, m0, mHi, n0, nHi, rows, t.kvLen, t.mt, t.nt, t.mt};
  BlockClass cls = classifyBlock(b, loc, t.op.getMaskMod(), t.kind, box);
  if (t.op.hasBlockTensors())
    cls = withBlockStatus(b, loc, t.op, t.op.hasMaskMod(), bG, hG, m0, n0, cls);
  auto compute = [&]() -> SmallVector<Value> {
    BackwardBlock blk;
    blk.b = bG;
    blk.h = hG;
    blk.m0 = m0;
    blk.n0 = n0;
    blk.rows = rows;
    blk.kvLen = t.kvLen;
    blk.q = rowTile(b, loc, t.q, bl, g, m0, t.mt);
    blk.dout = rowTile(b, loc, t.dout, bl, g, m0, t.mt);
    blk.lse = rowTile(b, loc, t.lse, bl, g, m0, t.mt);
    blk.delta = rowTile(b, loc, t.delta, bl, g, m0, t.mt);
    blk.keyT = keyT;
    blk.valueT = valueT;
    blk.keyRows = keyRows;
    if (cls.full && t.op.hasMaskMod())
      blk.maskWhen = arith::XOrIOp::create(
          b, loc, cls.full, arith::ConstantIntOp::create(b, loc, 1, 1));
    if (t.dot) {
      blk.bf16Dot = !t.amx;
      blk.amx = blk.scaleScores = t.amx;
      if (t.amx) {
        blk.qT = columnTile(b, loc, t.qT, bl, g, m0, t.e, t.mt);
        blk.doutT = columnTile(b, loc, t.doutT, bl, g, m0, t.ev, t.mt);
      } else {
        blk.qPairs =
            sliceValuePairs(b, loc, t.qPairs, bl, g, m0, t.mt, t.e);
        blk.doutPairs =
            sliceValuePairs(b, loc, t.doutPairs, bl, g, m0, t.mt, t.ev);
      }
      blk.pPairsScratch = t.sPPairs;
      blk.dsPairsScratch = t.sDsPairs;
      blk.dsBf16Scratch = t.sDsBf16;
    }
    blk.sScratch = t.sS;
    blk.dpScratch = t.sDp;
    blk.pScratch = t.sP;
    blk.dsScratch = t.sDs;
    blk.tileM = t.mt;
    blk.tileN = t.nt;
    blk.contribValues = t.contribValues;
    blk.contribIndices = t.contribIndices;
    blk.captureShapes = t.captureShapes;
    Value dqAcc = st[0];
    Value dqTile = rowTile(b, loc, dqAcc, bl, g, m0, t.mt);
    SmallVector<Value> r = buildBackwardBlock(b, loc, t.op, blk, dqTile, st[1],
                                              st[2], st.drop_front(3), cfg);
    OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
    Value dq = tensor::InsertSliceOp::create(
        b, loc, r[0], dqAcc, ArrayRef<OpFoldResult>{bl, g, m0, z},
        ArrayRef<OpFoldResult>{one, one, b.getIndexAttr(t.mt),
                               b.getIndexAttr(t.e)},
        SmallVector<OpFoldResult>(4, one));
    SmallVector<Value> next = {dq, r[1], r[2]};
    llvm::append_range(next, ArrayRef<Value>(r).drop_front(3));
    return next;
  };
  if (!cls.live)
    return compute();
  auto ifOp = scf::IfOp::create(b, loc, st.getTypes(), cls.live,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, compute());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, st);
  return SmallVector<Value>(ifOp.getResults());
}

LogicalResult mlir::flex::decomposeAttentionBackwardTile(
    RewriterBase &rewriter, AttentionBackwardOp tile, const FlashConfig &cfg,
    const BackwardRowStats *stats, const BackwardKeyValueLayout *layout,
    ValueRange partials, SmallVector<Value> *partialsOut) {
  if (std::optional<std::string> why = flashBackwardUnsupportedReason(tile))
    return tile.emitOpError("cannot decompose into key blocks: ") << *why;
  size_t numCaptures = tile.getCaptureGrads().size();
  if (!partials.empty() &&
      (partials.size() != numCaptures || !partialsOut))
    return tile.emitOpError("expected one partial buffer per capture "
                            "gradient and a place for the updated ones");
  auto qTy = cast<RankedTensorType>(tile.getQuery().getType());
  auto kTy = cast<RankedTensorType>(tile.getKey().getType());
  int64_t g = qTy.getDimSize(1);
  if (kTy.getDimSize(1) != 1 || ShapedType::isDynamic(g) ||
      g != tile.getGroupSize())
    return tile.emitOpError("expected a tile with one kv head (key [Bkv, 1, "
                            "N, E], query [B, G, M, E] with G the group "
                            "size; tile B and Hkv first), got query ")
           << qTy << " and key " << kTy;
  if (std::optional<ArrayRef<int64_t>> bs = tile.getBlockSizes())
    if ((*bs)[0] % cfg.tileM || (*bs)[1] % cfg.tileN)
      return tile.emitOpError("the tiles (")
             << cfg.tileM << " rows, key blocks of " << cfg.tileN
             << ") must nest in the BlockMask blocks (" << (*bs)[0] << ", "
             << (*bs)[1] << ")";
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(tile);
  OpBuilder &b = rewriter;
  Location loc = tile.getLoc();
  BackwardTile t;
  t.op = tile;
  t.mt = cfg.tileM;
  t.nt = cfg.tileN;
  t.e = qTy.getDimSize(3);
  t.ev = tile.getValueType().getDimSize(3);
  t.g = g;
  t.kind = blockClassificationKind(tile.getMaskMod(), cfg);
  Value zero = cIdx(b, loc, 0), one = cIdx(b, loc, 1);
  ValueRange offs = tile.getOffsets();
  t.b0 = offs.empty() ? zero : offs[0];
  t.h0 = offs.empty() ? zero : offs[1];
  t.m = emitDim(b, loc, tile.getQuery(), 2);
  Value mtV = cIdx(b, loc, t.mt);
  t.numQB = b.createOrFold<arith::CeilDivUIOp>(loc, t.m, mtV);
  Value mp = b.createOrFold<arith::MulIOp>(loc, t.numQB, mtV);
  int64_t mStatic = qTy.getDimSize(2);
  bool pad = ShapedType::isDynamic(mStatic) || mStatic % t.mt != 0;
  int64_t mpStatic = ShapedType::isDynamic(mStatic)
                         ? ShapedType::kDynamic
                         : llvm::divideCeil(mStatic, t.mt) * t.mt;
  Value bt = emitDim(b, loc, tile.getQuery(), 0);
  Value bkt = emitDim(b, loc, tile.getKey(), 0);

  // Row statistics: slices of the caller's pre-pass, else the tile's own.
  Value delta, lse;
  if (auto o = offsetsIn(b, tile.getQuery(), stats ? stats->sourceQuery
                                                   : Value())) {
    OpFoldResult z = b.getIndexAttr(0), o1 = b.getIndexAttr(1);
    SmallVector<OpFoldResult> off = {(*o)[0], (*o)[1], z};
    SmallVector<OpFoldResult> sz = {getAsOpFoldResult(bt),
                                    b.getIndexAttr(g),
                                    getAsOpFoldResult(t.m)};
    SmallVector<OpFoldResult> strides(3, o1);
    delta = tensor::ExtractSliceOp::create(b, loc, stats->delta, off, sz,
                                           strides);
    lse = tensor::ExtractSliceOp::create(b, loc, stats->lse, off, sz,
                                         strides);
  } else {
    BackwardRowStats own = buildBackwardRowStats(b, loc, tile);
    delta = own.delta;
    lse = own.lse;
  }
  t.q = tile.getQuery();
  t.dout = tile.getGradOut();
  t.lse = lse;
  t.delta = delta;
  if (pad) {
    t.q = padRows(b, loc, t.q, t.m, mp, mpStatic);
    t.dout = padRows(b, loc, t.dout, t.m, mp, mpStatic);
    t.lse = padRows(b, loc, t.lse, t.m, mp, mpStatic);
    t.delta = padRows(b, loc, t.delta, t.m, mp, mpStatic);
  }

  // Keys and values: the hoisted layout when the tile's key is its slice.
  BackwardKeyValueLayout own;
  if (auto o = offsetsIn(b, tile.getKey(),
                         layout ? layout->sourceKey : Value())) {
    t.kb0 = getValueOrCreateConstantIndexOp(b, loc, (*o)[0]);
    t.kh = getValueOrCreateConstantIndexOp(b, loc, (*o)[1]);
  } else {
    own = buildBackwardKeyValueLayout(b, loc, tile.getKey(), tile.getValue(),
                                      cfg);
    layout = &own;
    t.kb0 = zero;
    t.kh = zero;
  }
  t.dot = cfg.pairedKey && cfg.pairedValue;
  t.amx = t.dot && cfg.amx;
  if (layout->paired != t.dot)
    return tile.emitOpError("the key/value layout is ")
           << (layout->paired ? "" : "not ")
           << "packed in bf16 pairs but the tile's kernels need it "
           << (t.dot ? "" : "not ") << "packed";
  if (t.dot && (t.mt % 2 || t.nt % 2))
    return tile.emitOpError("bf16 dot kernels need even tile sizes, got ")
           << t.mt << " x " << t.nt;
  t.keysT = layout->keysT;
  t.valuesT = layout->valuesT;
  t.keyRows = layout->keyRows;
  t.kvLen = layout->kvLen;
  t.numKB = layout->numBlocks;

  // S, dP, P, dS and the capture contribution values: slices of one
  // tensor.empty (separate ones of one shape would be merged by CSE).
  SmallVector<std::pair<int64_t, int64_t>> tileShapes(4 + numCaptures,
                                                      {t.mt, t.nt});
  SmallVector<Value> sc = scratches(b, loc, tile, tileShapes);
  t.sS = sc[0];
  t.sDp = sc[1];
  t.sP = sc[2];
  t.sDs = sc[3];
  if (numCaptures) {
    t.contribValues.assign(sc.begin() + 4, sc.end());
    t.contribIndices = scratches(
        b, loc, tile,
        SmallVector<std::pair<int64_t, int64_t>>(numCaptures, {t.mt, t.nt}),
        b.getI32Type());
    for (Value grad : tile.getCaptureGrads())
      t.captureShapes.emplace_back(
          cast<RankedTensorType>(grad.getType()).getShape());
  }
  // dK_j, dV_j: [Nt, E|Ev], transposed with AMX.
  SmallVector<Value> acc =
      t.amx ? scratches(b, loc, tile, {{t.e, t.nt}, {t.ev, t.nt}})
            : scratches(b, loc, tile, {{t.nt, t.e}, {t.nt, t.ev}});
  t.sDk = acc[0];
  t.sDv = acc[1];
  if (t.dot) {
    SmallVector<Value> bf = scratches(
        b, loc, tile,
        {{t.mt / 2, 2 * t.nt}, {t.mt / 2, 2 * t.nt}, {t.mt, t.nt}},
        b.getBF16Type());
    t.sPPairs = bf[0];
    t.sDsPairs = bf[1];
    t.sDsBf16 = bf[2];
  }
  if (t.amx) {
    t.qT = transposeRows(b, loc, t.q);
    t.doutT = transposeRows(b, loc, t.dout);
  } else if (t.dot) {
    t.qPairs = packValuePairs(b, loc, t.q, /*parallel=*/false);
    t.doutPairs = packValuePairs(b, loc, t.dout, /*parallel=*/false);
  }

  // dQ accumulator: f32, padded rows; the init itself when that is both.
  Value dqAcc = tile.getGradQuery();
  Type qElt = qTy.getElementType();
  if (pad) {
    dqAcc = padRows(b, loc, dqAcc, t.m, mp, mpStatic);
  }
  {
    auto accTy = cast<RankedTensorType>(dqAcc.getType());
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < 4; ++d)
      if (accTy.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(b, loc, dqAcc, d));
    Value dest = bufferization::AllocTensorOp::create(
        b, loc, RankedTensorType::get(accTy.getShape(), b.getF32Type()), dyn);
    dqAcc = convert(b, loc, dqAcc, dest);
  }

  std::optional<int64_t> nStatic = getConstantIntValue(t.kvLen);
  bool wholeBlocks = nStatic && *nStatic % t.nt == 0;
  Value ntV = cIdx(b, loc, t.nt);
  Value lastKey = arith::SubIOp::create(b, loc, t.kvLen, one);

  // The results go to fresh allocations, the inits are only read: the
  // frontend's zero-filled inits of equal shapes are one value after CSE,
  // and empty-tensor elimination then made the dK and dV chains (or dQ)
  // write one buffer. alloc_tensor is not merged; the copy into the
  // caller's buffer costs O(N E) per tile.
  auto fresh = [&](Value like) -> Value {
    auto ty = cast<RankedTensorType>(like.getType());
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < ty.getRank(); ++d)
      if (ty.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(b, loc, like, d));
    return bufferization::AllocTensorOp::create(b, loc, ty, dyn);
  };
  Value dkInit = tile.getGradKey(), dvInit = tile.getGradValue();
  SmallVector<Value> init = {dqAcc, fresh(dkInit), fresh(dvInit)};
  // Capture gradients: the caller's partials, else the tile's own
  // zero-filled [C + 1] f32 buffers (added into the inits at the end).
  bool ownPartials = partials.empty() && numCaptures;
  if (ownPartials) {
    Value f0 = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    for (ArrayRef<int64_t> shape : t.captureShapes) {
      auto ty = RankedTensorType::get(
          {ShapedType::getNumElements(shape) + 1}, b.getF32Type());
      Value buf = bufferization::AllocTensorOp::create(b, loc, ty,
                                                       ValueRange{});
      init.push_back(
          linalg::FillOp::create(b, loc, ValueRange{f0}, ValueRange{buf})
              .getResult(0));
    }
  } else {
    llvm::append_range(init, partials);
  }
  SmallVector<Value> res = forLoop(
      b, loc, zero, bkt, init,
      [&](OpBuilder &kbB, Location l, Value kbl, ValueRange kbIt) {
        // The query batches of kv batch kbl: itself, or all of them when
        // the key batch is broadcast.
        Value same =
            arith::CmpIOp::create(kbB, l, arith::CmpIPredicate::eq, bkt, bt);
        Value bLo = arith::SelectOp::create(kbB, l, same, kbl, zero);
        Value bHi = arith::SelectOp::create(
            kbB, l, same, arith::AddIOp::create(kbB, l, kbl, one), bt);
        Value kbG = arith::AddIOp::create(kbB, l, t.kb0, kbl);
        return forLoop(
            kbB, l, zero, t.numKB, kbIt,
            [&](OpBuilder &jb, Location l2, Value j, ValueRange jIt) {
              Value n0 = arith::MulIOp::create(jb, l2, j, ntV);
              Value nHi = arith::MinSIOp::create(
                  jb, l2,
                  arith::AddIOp::create(jb, l2, n0, cIdx(jb, l2, t.nt - 1)),
                  lastKey);
              Value keyT, valueT, keyRows;
              if (t.dot) {
                keyT = sliceKeyPairs(jb, l2, t.keysT, kbG, t.kh, n0, t.e,
                                     t.nt);
                valueT = sliceKeyPairs(jb, l2, t.valuesT, kbG, t.kh, n0, t.ev,
                                       t.nt);
                keyRows = sliceValuePairs(jb, l2, t.keyRows, kbG, t.kh, n0,
                                          t.nt, t.e);
              } else {
                keyT = layoutTile(jb, l2, t.keysT, kbG, t.kh, j, t.e, t.nt);
                valueT =
                    layoutTile(jb, l2, t.valuesT, kbG, t.kh, j, t.ev, t.nt);
                keyRows =
                    layoutTile(jb, l2, t.keyRows, kbG, t.kh, n0, t.nt, t.e);
              }
              Value f0 = arith::ConstantOp::create(jb, l2,
                                                   jb.getF32FloatAttr(0));
              Value dk0 = linalg::FillOp::create(jb, l2, ValueRange{f0},
                                                 ValueRange{t.sDk})
                              .getResult(0);
              Value dv0 = linalg::FillOp::create(jb, l2, ValueRange{f0},
                                                 ValueRange{t.sDv})
                              .getResult(0);
              SmallVector<Value> accInit = {jIt[0], dk0, dv0};
              llvm::append_range(accInit, jIt.drop_front(3));
              SmallVector<Value> acc = forLoop(
                  jb, l2, bLo, bHi, accInit,
                  [&](OpBuilder &bb, Location l3, Value bl, ValueRange bIt) {
                    return forLoop(
                        bb, l3, zero, cIdx(bb, l3, t.g), bIt,
                        [&](OpBuilder &gb, Location l4, Value gi,
                            ValueRange gIt) {
                          return forLoop(
                              gb, l4, zero, t.numQB, gIt,
                              [&](OpBuilder &ib, Location l5, Value i,
                                  ValueRange iIt) {
                                return buildPairStep(ib, l5, t, cfg, bl, gi, i,
                                                     n0, nHi, keyT, valueT,
                                                     keyRows, iIt);
                              });
                        });
                  });
              OpFoldResult valid =
                  wholeBlocks
                      ? OpFoldResult(jb.getIndexAttr(t.nt))
                      : OpFoldResult(
                            arith::MinSIOp::create(
                                jb, l2, ntV,
                                arith::SubIOp::create(jb, l2, t.kvLen, n0))
                                .getResult());
              Value dk = addKeyRows(jb, l2, dkInit, jIt[1], acc[1], kbl, n0,
                                    valid, t.amx);
              Value dv = addKeyRows(jb, l2, dvInit, jIt[2], acc[2], kbl, n0,
                                    valid, t.amx);
              SmallVector<Value> next = {acc[0], dk, dv};
              llvm::append_range(next, ArrayRef<Value>(acc).drop_front(3));
              return next;
            });
      });

  // grad_query: the accumulator's rows [0, M), rounded.
  Value dq = res[0];
  if (pad) {
    OpFoldResult z = b.getIndexAttr(0), o1 = b.getIndexAttr(1);
    SmallVector<OpFoldResult> sz = {getAsOpFoldResult(bt), b.getIndexAttr(g),
                                    getAsOpFoldResult(t.m),
                                    b.getIndexAttr(t.e)};
    SmallVector<int64_t> shape(qTy.getShape());
    dq = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get(shape, b.getF32Type()), dq,
        SmallVector<OpFoldResult>(4, z), sz, SmallVector<OpFoldResult>(4, o1));
  }
  if (!qElt.isF32())
    dq = convert(b, loc, dq, fresh(tile.getGradQuery()));
  SmallVector<Value> results = {dq, res[1], res[2]};
  ArrayRef<Value> newPartials = ArrayRef<Value>(res).drop_front(3);
  if (ownPartials) {
    for (auto [init, part] : llvm::zip(tile.getCaptureGrads(), newPartials))
      results.push_back(reduceCapturePartials(b, loc, init, part));
  } else if (numCaptures) {
    // The caller adds the partials; the tile's own results stay unused.
    for (OpResult r : tile->getResults().drop_front(3))
      if (!r.use_empty())
        return tile.emitOpError("capture gradient results of a tile "
                                "decomposed into partials must be unused");
    partialsOut->assign(newPartials.begin(), newPartials.end());
    llvm::append_range(results, tile.getCaptureGrads());
  }
  rewriter.replaceOp(tile, results);
  return success();
}

Value mlir::flex::reduceCapturePartials(OpBuilder &b, Location loc,
                                        Value init, Value partials) {
  MLIRContext *ctx = b.getContext();
  auto initTy = cast<RankedTensorType>(init.getType());
  auto partTy = cast<RankedTensorType>(partials.getType());
  bool tiles = partTy.getRank() == 2;
  int64_t rank = initTy.getRank();
  // Loops (t?, d0, ..., d{r-1}); partials at (t?, row-major flat index).
  unsigned numLoops = rank + (tiles ? 1 : 0);
  unsigned first = tiles ? 1 : 0;
  AffineExpr flat = getAffineConstantExpr(0, ctx);
  for (int64_t d = 0; d < rank; ++d)
    flat = flat * initTy.getDimSize(d) + getAffineDimExpr(first + d, ctx);
  SmallVector<AffineExpr> partExprs;
  if (tiles)
    partExprs.push_back(getAffineDimExpr(0, ctx));
  partExprs.push_back(flat);
  SmallVector<AffineExpr> accExprs;
  for (int64_t d = 0; d < rank; ++d)
    accExprs.push_back(getAffineDimExpr(first + d, ctx));
  AffineMap partMap = AffineMap::get(numLoops, 0, partExprs, ctx);
  AffineMap accMap = AffineMap::get(numLoops, 0, accExprs, ctx);
  SmallVector<IteratorType> iters(numLoops, IteratorType::parallel);
  if (tiles)
    iters[0] = IteratorType::reduction;
  // f32 copy of the init (a fresh allocation: inits of equal shapes may be
  // one value after CSE), the partials added, rounded once.
  auto accTy = RankedTensorType::get(initTy.getShape(), b.getF32Type());
  Value acc = convert(
      b, loc, init,
      bufferization::AllocTensorOp::create(b, loc, accTy, ValueRange{}));
  // Without the discard column.
  SmallVector<int64_t> used(partTy.getShape());
  used.back() = initTy.getNumElements();
  OpFoldResult z = b.getIndexAttr(0), o1 = b.getIndexAttr(1);
  SmallVector<OpFoldResult> usedSizes = llvm::map_to_vector(
      used, [&](int64_t n) -> OpFoldResult { return b.getIndexAttr(n); });
  partials = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(used, b.getF32Type()), partials,
      SmallVector<OpFoldResult>(used.size(), z), usedSizes,
      SmallVector<OpFoldResult>(used.size(), o1));
  acc = linalg::GenericOp::create(
            b, loc, TypeRange{accTy}, ValueRange{partials}, ValueRange{acc},
            ArrayRef<AffineMap>{partMap, accMap}, iters,
            [&](OpBuilder &nb, Location l, ValueRange a) {
              linalg::YieldOp::create(
                  nb, l, ValueRange{arith::AddFOp::create(nb, l, a[1], a[0])});
            })
            .getResult(0);
  if (initTy.getElementType().isF32())
    return acc;
  return convert(
      b, loc, acc,
      bufferization::AllocTensorOp::create(b, loc, initTy, ValueRange{}));
}
