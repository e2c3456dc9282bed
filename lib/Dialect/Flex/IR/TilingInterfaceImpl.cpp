//===- TilingInterfaceImpl.cpp - TilingInterface of flex.attention --------===//
//
// Iteration domain (B, Hq, M, N, Ev), N a reduction. Tiles of B, Hq, M and
// Ev are computed by a flex.attention on slices that carries the tile's
// global offsets; E and N stay whole. The scalar implementation is the
// numerically safe reference (per-row online softmax in f32).
//
//===----------------------------------------------------------------------===//
#include "AttentionCommon.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::attn;

enum { kB = 0, kH = 1, kM = 2, kN = 3, kEv = 4 };

SmallVector<utils::IteratorType> AttentionOp::getLoopIteratorTypes() {
  using utils::IteratorType;
  return {IteratorType::parallel, IteratorType::parallel,
          IteratorType::parallel, IteratorType::reduction,
          IteratorType::parallel};
}

SmallVector<Range> AttentionOp::getIterationDomain(OpBuilder &b) {
  Location loc = getLoc();
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  SmallVector<Range> domain;
  for (auto [v, d] : {std::pair<Value, int64_t>{getQuery(), 0},
                      {getQuery(), 1},
                      {getQuery(), 2},
                      {getKey(), 2},
                      {getValue(), 3}})
    domain.push_back(Range{zero, dimOf(b, loc, v, d), one});
  return domain;
}

FailureOr<TilingResult>
AttentionOp::getTiledImplementation(OpBuilder &b,
                                    ArrayRef<OpFoldResult> offsets,
                                    ArrayRef<OpFoldResult> sizes) {
  Location loc = getLoc();
  if (offsets.size() != 5 || sizes.size() != 5)
    return emitOpError("expected a tile of the 5-d iteration domain");
  // N is a reduction whose softmax cannot be split by plain tiling.
  OpFoldResult fullN = dimOf(b, loc, getKey(), 2);
  // With a dynamic N the untiled size is the `dim` op that
  // getIterationDomain created, not the one created here: compare sources.
  auto isFullN = [&](OpFoldResult size) {
    return isFullExtent(size, fullN, getKey(), 2) ||
           isFullExtent(size, fullN, getValue(), 2);
  };
  if (!isZeroInteger(offsets[kN]) || !isFullN(sizes[kN]))
    return emitOpError("cannot tile the kv (reduction) dimension N; tile "
                       "sizes for N must be 0");

  OpFoldResult zero = b.getIndexAttr(0);
  OpFoldResult one = b.getIndexAttr(1);
  OpFoldResult E = dimOf(b, loc, getQuery(), 3);
  // K/V keep every head (GQA maps a query head to h / G), and their batch
  // is sliced like the query's unless it is broadcast.
  int64_t bkv = getKeyType().getDimSize(0);
  bool kvBroadcastBatch = bkv == 1 && getQueryType().getDimSize(0) != 1;
  OpFoldResult kvBOff = kvBroadcastBatch ? zero : offsets[kB];
  OpFoldResult kvBSize = kvBroadcastBatch ? one : sizes[kB];
  if (ShapedType::isDynamic(bkv)) {
    // Bkv is B or 1 at run time: take batch row 0 (size 1) when it is 1.
    Value bk = toValue(b, loc, dimOf(b, loc, getKey(), 0));
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value isOne =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bk, c1);
    kvBOff = arith::SelectOp::create(b, loc, isOne, c0,
                                     toValue(b, loc, offsets[kB]))
                 .getResult();
    kvBSize = arith::SelectOp::create(b, loc, isOne, c1,
                                      toValue(b, loc, sizes[kB]))
                  .getResult();
  }
  // GQA ratio of the tile. With dynamic head counts and no kv_group_size it
  // is only known at run time: then the head dimension must stay whole (the
  // tile then still derives G = Hq / Hkv from its operands).
  IntegerAttr groupAttr = getKvGroupSizeAttr();
  bool staticHeads = !getQueryType().isDynamicDim(1) &&
                     !getKeyType().isDynamicDim(1);
  if (!groupAttr && staticHeads)
    groupAttr = b.getI64IntegerAttr(getGroupSize());
  if (!groupAttr &&
      (!isZeroInteger(offsets[kH]) ||
       !isFullExtent(sizes[kH], dimOf(b, loc, getQuery(), 1), getQuery(), 1)))
    return emitOpError("cannot tile the head dimension when the query or "
                       "key/value head count is dynamic and kv_group_size "
                       "is not set");
  OpFoldResult Hkv = dimOf(b, loc, getKey(), 1);

  SmallVector<Operation *> slices;
  auto take = [&](Value v, ArrayRef<OpFoldResult> off,
                  ArrayRef<OpFoldResult> sz) {
    Value s = slice(b, loc, v, off, sz);
    slices.push_back(s.getDefiningOp());
    return s;
  };
  Value q = take(getQuery(), {offsets[kB], offsets[kH], offsets[kM], zero},
                 {sizes[kB], sizes[kH], sizes[kM], E});
  Value k = take(getKey(), {kvBOff, zero, zero, zero},
                 {kvBSize, Hkv, fullN, E});
  Value v = take(getValue(), {kvBOff, zero, zero, offsets[kEv]},
                 {kvBSize, Hkv, fullN, sizes[kEv]});
  Value out = take(getOutput(),
                   {offsets[kB], offsets[kH], offsets[kM], offsets[kEv]},
                   {sizes[kB], sizes[kH], sizes[kM], sizes[kEv]});
  SmallVector<OpFoldResult> rowOff = {offsets[kB], offsets[kH], offsets[kM]};
  SmallVector<OpFoldResult> rowSize = {sizes[kB], sizes[kH], sizes[kM]};
  Value lse = getLogsumexp() ? take(getLogsumexp(), rowOff, rowSize) : Value();
  Value mx = getMaxScores() ? take(getMaxScores(), rowOff, rowSize) : Value();

  // Global offsets of the tile (added to any offsets this op already has).
  SmallVector<Value> newOffsets;
  for (int i = 0; i < 3; ++i) {
    Value off = toValue(b, loc, offsets[i]);
    if (!getOffsets().empty())
      off = arith::AddIOp::create(b, loc, getOffsets()[i], off);
    newOffsets.push_back(off);
  }

  SmallVector<Type> resultTypes;
  if (hasTensorSemantics())
    for (Value init : {out, lse, mx})
      if (init)
        resultTypes.push_back(init.getType());

  // Block tensors are read whole: the tile's rows find their block from
  // their global index (offsets).
  auto tiled = AttentionOp::create(
      b, loc, resultTypes, q, k, v, getCaptures(), newOffsets,
      getKvNumBlocks(), getKvIndices(), getFullKvNumBlocks(),
      getFullKvIndices(), out, lse, mx, getScaleAttr(), groupAttr,
      getBlockSizesAttr());
  IRMapping map;
  getScoreMod().cloneInto(&tiled.getScoreMod(), map);
  getMaskMod().cloneInto(&tiled.getMaskMod(), map);
  return TilingResult{{tiled.getOperation()},
                      SmallVector<Value>(tiled->getResults()), slices};
}

LogicalResult AttentionOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  resultOffsets.assign({offsets[kB], offsets[kH], offsets[kM]});
  resultSizes.assign({sizes[kB], sizes[kH], sizes[kM]});
  if (resultNumber == 0) {
    resultOffsets.push_back(offsets[kEv]);
    resultSizes.push_back(sizes[kEv]);
  }
  return success();
}

FailureOr<TilingResult>
AttentionOp::generateResultTileValue(OpBuilder &b, unsigned resultNumber,
                                     ArrayRef<OpFoldResult> offsets,
                                     ArrayRef<OpFoldResult> sizes) {
  Location loc = getLoc();
  SmallVector<OpFoldResult> domOff(offsets.take_front(3));
  SmallVector<OpFoldResult> domSize(sizes.take_front(3));
  domOff.push_back(b.getIndexAttr(0));
  domSize.push_back(dimOf(b, loc, getKey(), 2));
  if (resultNumber == 0) {
    domOff.push_back(offsets[3]);
    domSize.push_back(sizes[3]);
  } else {
    domOff.push_back(b.getIndexAttr(0));
    domSize.push_back(dimOf(b, loc, getValue(), 3));
  }
  return getTiledImplementation(b, domOff, domSize);
}

//===----------------------------------------------------------------------===//
// Scalar reference
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::generateScalarImplementation(OpBuilder &b,
                                                        Location loc,
                                                        ValueRange ivs) {
  if (!hasBufferSemantics())
    return emitOpError("scalar implementation requires memref operands "
                       "(bufferize first)");
  if (ivs.size() != 3)
    return emitOpError("scalar implementation expects the 3 induction "
                       "variables (b, h, q_idx) of the row loops, got ")
           << ivs.size();
  Value bi = ivs[0], hi = ivs[1], mi = ivs[2];
  Type f32 = b.getF32Type();
  auto cf = [&](double x) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(x)).getResult();
  };
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value E = toValue(b, loc, dimOf(b, loc, getQuery(), 3));
  Value N = toValue(b, loc, dimOf(b, loc, getKey(), 2));
  Value Ev = toValue(b, loc, dimOf(b, loc, getValue(), 3));

  // KV batch: broadcast when the key batch is 1.
  Value kb = emitKvBatch(b, loc, getKey(), bi, c0, c1);
  // KV head: (h_off + h) / G.
  Value hg = hi;
  if (!getOffsets().empty())
    hg = arith::AddIOp::create(b, loc, hg, getOffsets()[1]);
  std::optional<int64_t> staticG;
  if (getKvGroupSize() ||
      (!getQueryType().isDynamicDim(1) && !getKeyType().isDynamicDim(1)))
    staticG = getGroupSize();
  Value G = emitGroupSize(b, loc, getQuery(), getKey(), staticG);
  Value kh = arith::DivUIOp::create(b, loc, hg, G);

  float negInfF = -std::numeric_limits<float>::infinity();
  Value negInf = cf(negInfF);
  Value zero = cf(0.0), oneF = cf(1.0);
  Value scale = arith::ConstantOp::create(b, loc, getScaleAttr());

  // Row accumulator acc[Ev] in f32 (heap: the row loops may be deep and
  // memref.alloca_scope cannot hold the multi-block CFG of scf-to-cf). Not
  // freed here: ownership-based-buffer-deallocation, which the pipelines run
  // after flex-to-loops, frees it (it rejects IR that already has deallocs,
  // and cannot run before: flex.attention on memrefs has regions).
  auto accType = MemRefType::get({ShapedType::kDynamic}, f32);
  Value acc = memref::AllocOp::create(b, loc, accType, ValueRange{Ev});
  scf::ForOp::create(b, loc, c0, Ev, c1, ValueRange{},
                     [&](OpBuilder &nb, Location l, Value e, ValueRange) {
                       memref::StoreOp::create(nb, l, zero, acc, e);
                       scf::YieldOp::create(nb, l);
                     });

  auto kvLoop = scf::ForOp::create(
      b, loc, c0, N, c1, ValueRange{negInf, zero},
      [&](OpBuilder &nb, Location l, Value n, ValueRange state) {
        Value mx = state[0], sum = state[1];
        // s = scale * q[b,h,m,:] . k[kb,kh,n,:]  (E stays whole)
        auto dot = scf::ForOp::create(
            nb, l, c0, E, c1, ValueRange{zero},
            [&](OpBuilder &db, Location dl, Value e, ValueRange it) {
              Value qv = loadF32(db, dl, getQuery(), {bi, hi, mi, e});
              Value kv = loadF32(db, dl, getKey(), {kb, kh, n, e});
              Value p = arith::MulFOp::create(db, dl, qv, kv);
              scf::YieldOp::create(db, dl,
                                   ValueRange{arith::AddFOp::create(
                                       db, dl, it[0], p)});
            });
        Value s = arith::MulFOp::create(nb, l, dot.getResult(0), scale);
        // score_mod first, then the mask; the region sees the true score.
        s = emitModifiedScore(nb, l, s, {bi, hi, mi}, n);
        // max via compare+select: llvm.maximum.f32 becomes a libcall that
        // this LLVM's JIT cannot resolve. `ugt` keeps a NaN score.
        Value gt =
            arith::CmpFOp::create(nb, l, arith::CmpFPredicate::UGT, s, mx);
        Value mn = arith::SelectOp::create(nb, l, gt, s, mx);
        // A NaN running max stays NaN (`ugt` would let a later -inf win).
        Value mxIsNaN =
            arith::CmpFOp::create(nb, l, arith::CmpFPredicate::UNO, mx, mx);
        mn = arith::SelectOp::create(nb, l, mxIsNaN, mx, mn);
        // While every score so far is -inf keep the state (no NaN).
        Value allMasked =
            arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, mn, negInf);
        Value corr = math::ExpOp::create(
            nb, l, arith::SubFOp::create(nb, l, mx, mn));
        corr = arith::SelectOp::create(nb, l, allMasked, oneF, corr);
        Value p = math::ExpOp::create(nb, l, arith::SubFOp::create(nb, l, s, mn));
        p = arith::SelectOp::create(nb, l, allMasked, zero, p);
        Value newSum = arith::AddFOp::create(
            nb, l, arith::MulFOp::create(nb, l, sum, corr), p);
        scf::ForOp::create(
            nb, l, c0, Ev, c1, ValueRange{},
            [&](OpBuilder &eb, Location el, Value e, ValueRange) {
              Value a = memref::LoadOp::create(eb, el, acc, e);
              Value vv = loadF32(eb, el, getValue(), {kb, kh, n, e});
              Value upd = arith::AddFOp::create(
                  eb, el, arith::MulFOp::create(eb, el, a, corr),
                  arith::MulFOp::create(eb, el, p, vv));
              memref::StoreOp::create(eb, el, upd, acc, e);
              scf::YieldOp::create(eb, el);
            });
        scf::YieldOp::create(nb, l, ValueRange{mn, newSum});
      });
  Value mx = kvLoop.getResult(0), sum = kvLoop.getResult(1);
  Value rowMasked =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mx, negInf);
  Type outElt = getOutputType().getElementType();
  scf::ForOp::create(
      b, loc, c0, Ev, c1, ValueRange{},
      [&](OpBuilder &eb, Location el, Value e, ValueRange) {
        Value a = memref::LoadOp::create(eb, el, acc, e);
        Value o = arith::DivFOp::create(eb, el, a, sum);
        o = arith::SelectOp::create(eb, el, rowMasked, zero, o);
        if (outElt != f32)
          o = arith::TruncFOp::create(eb, el, outElt, o);
        memref::StoreOp::create(eb, el, o, getOutput(), {bi, hi, mi, e});
        scf::YieldOp::create(eb, el);
      });
  Value invLn2 = cf(1.0 / std::log(2.0));
  if (Value lse = getLogsumexp()) {
    Value v = arith::AddFOp::create(b, loc, mx, math::LogOp::create(b, loc, sum));
    v = arith::MulFOp::create(b, loc, v, invLn2);
    v = arith::SelectOp::create(b, loc, rowMasked, negInf, v);
    memref::StoreOp::create(b, loc, v, lse, ValueRange{bi, hi, mi});
  }
  if (Value maxScores = getMaxScores()) {
    Value v = arith::MulFOp::create(b, loc, mx, invLn2);
    memref::StoreOp::create(b, loc, v, maxScores, ValueRange{bi, hi, mi});
  }
  return success();
}
