//===- AttentionBackwardTiling.cpp - TilingInterface of attention_backward ===//
//
// Iteration domain (B, Hkv). A tile owns the grad_key / grad_value slices
// of its kv heads and the grad_query rows of their G query heads: it is a
// flex.attention_backward on slices (query-side operands sliced to heads
// [hk0 * G, (hk0 + Hkt) * G)) that carries its global offsets (B0, H0).
// Capture gradients are passed whole to every tile. The scalar
// implementation is the reference of the op's description, per (b, hk).
//
//===----------------------------------------------------------------------===//
#include "AttentionCommon.h"

#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::attn;

enum { kB = 0, kHkv = 1 };

SmallVector<utils::IteratorType> AttentionBackwardOp::getLoopIteratorTypes() {
  using utils::IteratorType;
  // Tiles share capture-gradient elements (any tile may scatter anywhere),
  // and with a broadcast key batch all batches add into grad_key[0].
  bool captureGrads = !getCaptureGrads().empty();
  int64_t bq = getQueryType().getDimSize(0), bkv = getKeyType().getDimSize(0);
  bool batchOwned =
      !captureGrads && !ShapedType::isDynamic(bq) && bq == bkv;
  return {batchOwned ? IteratorType::parallel : IteratorType::reduction,
          captureGrads ? IteratorType::reduction : IteratorType::parallel};
}

SmallVector<Range> AttentionBackwardOp::getIterationDomain(OpBuilder &b) {
  Location loc = getLoc();
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  return {Range{zero, dimOf(b, loc, getQuery(), 0), one},
          Range{zero, dimOf(b, loc, getKey(), 1), one}};
}

/// `x * c` for a constant c.
static OpFoldResult mulConst(OpBuilder &b, Location loc, OpFoldResult x,
                             int64_t c) {
  if (std::optional<int64_t> k = getConstantIntValue(x))
    return b.getIndexAttr(*k * c);
  Value cv = arith::ConstantIndexOp::create(b, loc, c);
  return arith::MulIOp::create(b, loc, toValue(b, loc, x), cv).getResult();
}

namespace {
/// Where a tile's slices lie: query side (batch, query heads) and kv side
/// (kv batch, kv heads).
struct TileFrame {
  OpFoldResult bOff, bSize, hOff, hSize, kvBOff, kvBSize, hkOff, hkSize;
};
} // namespace

/// The frame of the tile (offsets, sizes) of the (B, Hkv) domain; fails when
/// the GQA ratio is unknown and the heads are split.
static FailureOr<TileFrame> tileFrame(AttentionBackwardOp op, OpBuilder &b,
                                      ArrayRef<OpFoldResult> offsets,
                                      ArrayRef<OpFoldResult> sizes,
                                      IntegerAttr &groupAttr) {
  Location loc = op.getLoc();
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  TileFrame f;
  f.bOff = offsets[kB];
  f.bSize = sizes[kB];
  f.hkOff = offsets[kHkv];
  f.hkSize = sizes[kHkv];
  groupAttr = op.getKvGroupSizeAttr();
  bool staticHeads =
      !op.getQueryType().isDynamicDim(1) && !op.getKeyType().isDynamicDim(1);
  if (!groupAttr && staticHeads)
    groupAttr = b.getI64IntegerAttr(op.getGroupSize());
  if (groupAttr) {
    f.hOff = mulConst(b, loc, f.hkOff, groupAttr.getInt());
    f.hSize = mulConst(b, loc, f.hkSize, groupAttr.getInt());
  } else {
    if (!isZeroInteger(f.hkOff) ||
        !isFullExtent(f.hkSize, dimOf(b, loc, op.getKey(), 1), op.getKey(),
                      1))
      return op.emitOpError("cannot tile the kv head dimension when the "
                            "query or key/value head count is dynamic and "
                            "kv_group_size is not set"),
             failure();
    f.hOff = zero;
    f.hSize = dimOf(b, loc, op.getQuery(), 1);
  }
  // The kv batch follows the query's unless it is broadcast (size 1).
  int64_t bkv = op.getKeyType().getDimSize(0);
  bool broadcast = bkv == 1 && op.getQueryType().getDimSize(0) != 1;
  f.kvBOff = broadcast ? zero : f.bOff;
  f.kvBSize = broadcast ? one : f.bSize;
  if (ShapedType::isDynamic(bkv)) {
    Value bk = toValue(b, loc, dimOf(b, loc, op.getKey(), 0));
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value isOne =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bk, c1);
    f.kvBOff = arith::SelectOp::create(b, loc, isOne, c0,
                                       toValue(b, loc, f.bOff))
                   .getResult();
    f.kvBSize = arith::SelectOp::create(b, loc, isOne, c1,
                                        toValue(b, loc, f.bSize))
                    .getResult();
  }
  return f;
}

FailureOr<TilingResult>
AttentionBackwardOp::getTiledImplementation(OpBuilder &b,
                                            ArrayRef<OpFoldResult> offsets,
                                            ArrayRef<OpFoldResult> sizes) {
  Location loc = getLoc();
  if (offsets.size() != 2 || sizes.size() != 2)
    return emitOpError("expected a tile of the 2-d iteration domain (B, Hkv)");
  IntegerAttr groupAttr;
  FailureOr<TileFrame> frame = tileFrame(*this, b, offsets, sizes, groupAttr);
  if (failed(frame))
    return failure();
  const TileFrame &f = *frame;
  OpFoldResult zero = b.getIndexAttr(0);
  OpFoldResult M = dimOf(b, loc, getQuery(), 2);
  OpFoldResult E = dimOf(b, loc, getQuery(), 3);
  OpFoldResult N = dimOf(b, loc, getKey(), 2);
  OpFoldResult Ev = dimOf(b, loc, getValue(), 3);

  SmallVector<Operation *> slices;
  auto take = [&](Value v, ArrayRef<OpFoldResult> off,
                  ArrayRef<OpFoldResult> sz) -> Value {
    if (!v)
      return v;
    Value s = slice(b, loc, v, off, sz);
    slices.push_back(s.getDefiningOp());
    return s;
  };
  auto qSide = [&](Value v, OpFoldResult last) {
    return take(v, {f.bOff, f.hOff, zero, zero}, {f.bSize, f.hSize, M, last});
  };
  auto kvSide = [&](Value v, OpFoldResult last) {
    return take(v, {f.kvBOff, f.hkOff, zero, zero},
                {f.kvBSize, f.hkSize, N, last});
  };
  auto rows = [&](Value v) {
    return take(v, {f.bOff, f.hOff, zero}, {f.bSize, f.hSize, M});
  };
  Value q = qSide(getQuery(), E), k = kvSide(getKey(), E),
        v = kvSide(getValue(), Ev), out = qSide(getOut(), Ev),
        lse = rows(getLogsumexp()), dout = qSide(getGradOut(), Ev),
        glse = rows(getGradLogsumexp()), dq = qSide(getGradQuery(), E),
        dk = kvSide(getGradKey(), E), dv = kvSide(getGradValue(), Ev);

  // Global offsets (B0, H0) of the tile's first batch and query head.
  SmallVector<Value> newOffsets;
  for (auto [i, off] :
       llvm::enumerate(SmallVector<OpFoldResult>{f.bOff, f.hOff})) {
    Value o = toValue(b, loc, off);
    if (!getOffsets().empty())
      o = arith::AddIOp::create(b, loc, getOffsets()[i], o);
    newOffsets.push_back(o);
  }

  SmallVector<Type> resultTypes;
  if (hasTensorSemantics()) {
    for (Value init : {dq, dk, dv})
      resultTypes.push_back(init.getType());
    for (Value g : getCaptureGrads())
      resultTypes.push_back(g.getType());
  }
  auto tiled = AttentionBackwardOp::create(
      b, loc, resultTypes, q, k, v, out, lse, dout, glse, getCaptures(),
      newOffsets, getKvNumBlocks(), getKvIndices(), getFullKvNumBlocks(),
      getFullKvIndices(), dq, dk, dv, getCaptureGrads(), getScaleAttr(),
      getGradCapturesAttr(), groupAttr, getBlockSizesAttr());
  IRMapping map;
  getScoreMod().cloneInto(&tiled.getScoreMod(), map);
  getMaskMod().cloneInto(&tiled.getMaskMod(), map);
  getJoint().cloneInto(&tiled.getJoint(), map);
  return TilingResult{{tiled.getOperation()},
                      SmallVector<Value>(tiled->getResults()), slices};
}

LogicalResult AttentionBackwardOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  Location loc = getLoc();
  OpFoldResult zero = b.getIndexAttr(0);
  if (resultNumber >= 3) {
    // A capture gradient: the whole tensor.
    Value init = getDpsInits()[resultNumber];
    int64_t rank = cast<ShapedType>(init.getType()).getRank();
    resultOffsets.assign(rank, zero);
    resultSizes.clear();
    for (int64_t d = 0; d < rank; ++d)
      resultSizes.push_back(dimOf(b, loc, init, d));
    return success();
  }
  IntegerAttr groupAttr;
  FailureOr<TileFrame> frame = tileFrame(*this, b, offsets, sizes, groupAttr);
  if (failed(frame))
    return failure();
  const TileFrame &f = *frame;
  if (resultNumber == 0) {
    resultOffsets.assign({f.bOff, f.hOff, zero, zero});
    resultSizes.assign({f.bSize, f.hSize, dimOf(b, loc, getQuery(), 2),
                        dimOf(b, loc, getQuery(), 3)});
    return success();
  }
  Value kv = resultNumber == 1 ? getKey() : getValue();
  resultOffsets.assign({f.kvBOff, f.hkOff, zero, zero});
  resultSizes.assign({f.kvBSize, f.hkSize, dimOf(b, loc, kv, 2),
                      dimOf(b, loc, kv, 3)});
  return success();
}

//===----------------------------------------------------------------------===//
// Scalar reference
//===----------------------------------------------------------------------===//

/// memref[idx] += x (f32): the sum in f32, rounded once to the memref's
/// element type.
static void accumulate(OpBuilder &b, Location loc, Value memref,
                       ValueRange idx, Value x) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  Value sum = arith::AddFOp::create(b, loc, loadF32(b, loc, memref, idx), x);
  if (elt != sum.getType())
    sum = arith::TruncFOp::create(b, loc, elt, sum);
  memref::StoreOp::create(b, loc, sum, memref, idx);
}

/// sum over e in [0, n) of f32(a[ai..., e]) * f32(c[ci..., e]).
static Value emitDot(OpBuilder &b, Location loc, Value n, Value a,
                     ValueRange ai, Value c, ValueRange ci, Value init) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, c0, n, c1, ValueRange{init},
      [&](OpBuilder &db, Location dl, Value e, ValueRange it) {
        SmallVector<Value> aIdx(ai), cIdx(ci);
        aIdx.push_back(e);
        cIdx.push_back(e);
        Value x = loadF32(db, dl, a, aIdx);
        Value y = loadF32(db, dl, c, cIdx);
        Value p = arith::MulFOp::create(db, dl, x, y);
        Value sum = arith::AddFOp::create(db, dl, it[0], p);
        scf::YieldOp::create(db, dl, ValueRange{sum});
      });
  return loop.getResult(0);
}

/// capture_grads[j][idx...] += value for every capture gradient, skipping
/// indices outside the tensor.
static void emitScatterAdds(OpBuilder &b, Location loc, ValueRange grads,
                            ArrayRef<Value> contributions) {
  size_t pos = 0;
  for (Value grad : grads) {
    auto t = cast<MemRefType>(grad.getType());
    Value value = contributions[pos++];
    SmallVector<Value> idx(contributions.begin() + pos,
                           contributions.begin() + pos + t.getRank());
    pos += t.getRank();
    // `ult` also rejects negative indices.
    Value inBounds = arith::ConstantIntOp::create(b, loc, 1, 1);
    for (auto [d, i] : llvm::enumerate(idx)) {
      Value ext = toValue(b, loc, dimOf(b, loc, grad, d));
      Value lt =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i, ext);
      inBounds = arith::AndIOp::create(b, loc, inBounds, lt);
    }
    auto ifOp = scf::IfOp::create(b, loc, inBounds, /*withElse=*/false);
    OpBuilder tb = ifOp.getThenBodyBuilder();
    Value old = memref::LoadOp::create(tb, loc, grad, idx);
    Value sum = arith::AddFOp::create(tb, loc, old, value);
    memref::StoreOp::create(tb, loc, sum, grad, idx);
  }
}

LogicalResult AttentionBackwardOp::generateScalarImplementation(
    OpBuilder &b, Location loc, ValueRange ivs) {
  if (!hasBufferSemantics())
    return emitOpError("scalar implementation requires memref operands "
                       "(bufferize first)");
  if (ivs.size() != 2)
    return emitOpError("scalar implementation expects the 2 induction "
                       "variables (b, hk) of the (B, Hkv) loops, got ")
           << ivs.size();
  Value bi = ivs[0], hk = ivs[1];
  Type f32 = b.getF32Type();
  auto cf = [&](double x) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(x)).getResult();
  };
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value M = toValue(b, loc, dimOf(b, loc, getQuery(), 2));
  Value E = toValue(b, loc, dimOf(b, loc, getQuery(), 3));
  Value N = toValue(b, loc, dimOf(b, loc, getKey(), 2));
  Value Ev = toValue(b, loc, dimOf(b, loc, getValue(), 3));
  Value kb = emitKvBatch(b, loc, getKey(), bi, c0, c1);
  std::optional<int64_t> staticG;
  if (getKvGroupSize() ||
      (!getQueryType().isDynamicDim(1) && !getKeyType().isDynamicDim(1)))
    staticG = getGroupSize();
  Value G = emitGroupSize(b, loc, getQuery(), getKey(), staticG);
  Value zero = cf(0.0);
  Value negInf = cf(-std::numeric_limits<float>::infinity());
  Value ln2 = cf(std::log(2.0)), invLn2 = cf(1.0 / std::log(2.0));
  Value scale = arith::ConstantOp::create(b, loc, getScaleAttr());
  Value bGlobal = bi;
  if (!getOffsets().empty())
    bGlobal = arith::AddIOp::create(b, loc, bi, getOffsets()[0]);

  // f32 accumulator of one grad_query row (heap, freed by
  // ownership-based-buffer-deallocation as flex.attention's row
  // accumulator).
  Value dqAcc = memref::AllocOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, f32), ValueRange{E});
  Type qElt = getQueryType().getElementType();

  auto forLoop = [&](OpBuilder &ob, Value ub, auto body) {
    scf::ForOp::create(ob, loc, c0, ub, c1, ValueRange{},
                       [&](OpBuilder &nb, Location, Value iv, ValueRange) {
                         body(nb, iv);
                         scf::YieldOp::create(nb, loc);
                       });
  };

  // One (b, h, m, n) point that is kept.
  auto keptPoint = [&](OpBuilder &pb, Value hi, Value mi, Value ni,
                       ValueRange global, Value s, Value sMod, Value lse,
                       Value lseFinite, Value delta, Value gl) {
    Value p = math::ExpOp::create(pb, loc,
                                  arith::SubFOp::create(pb, loc, sMod, lse));
    p = arith::SelectOp::create(pb, loc, lseFinite, p, zero);
    // grad_value[bk, hk, n, :] += p * grad_out[b, h, m, :]; dp on the way.
    auto dpLoop = scf::ForOp::create(
        pb, loc, c0, Ev, c1, ValueRange{zero},
        [&](OpBuilder &eb, Location el, Value e, ValueRange it) {
          Value go = loadF32(eb, el, getGradOut(), {bi, hi, mi, e});
          Value vv = loadF32(eb, el, getValue(), {kb, hk, ni, e});
          accumulate(eb, el, getGradValue(), {kb, hk, ni, e},
                     arith::MulFOp::create(eb, el, p, go));
          Value dp = arith::AddFOp::create(
              eb, el, it[0], arith::MulFOp::create(eb, el, go, vv));
          scf::YieldOp::create(eb, el, ValueRange{dp});
        });
    Value dp = dpLoop.getResult(0);
    Value ds = arith::MulFOp::create(
        pb, loc, p,
        arith::AddFOp::create(pb, loc,
                              arith::SubFOp::create(pb, loc, dp, delta), gl));
    SmallVector<Value> joint = {ds};
    if (hasJoint())
      joint = inlineRegion(pb, getJoint(),
                           {s, global[0], global[1], global[2], ni, ds});
    Value gs = arith::MulFOp::create(pb, loc, scale, joint[0]);
    forLoop(pb, E, [&](OpBuilder &eb, Value e) {
      Value kv = loadF32(eb, loc, getKey(), {kb, hk, ni, e});
      Value qv = loadF32(eb, loc, getQuery(), {bi, hi, mi, e});
      Value acc = memref::LoadOp::create(eb, loc, dqAcc, e);
      acc = arith::AddFOp::create(eb, loc, acc,
                                  arith::MulFOp::create(eb, loc, gs, kv));
      memref::StoreOp::create(eb, loc, acc, dqAcc, e);
      accumulate(eb, loc, getGradKey(), {kb, hk, ni, e},
                 arith::MulFOp::create(eb, loc, gs, qv));
    });
    emitScatterAdds(pb, loc, getCaptureGrads(),
                    ArrayRef<Value>(joint).drop_front());
  };

  // Query heads hk * G + g of kv head hk.
  forLoop(b, G, [&](OpBuilder &gb, Value g) {
    Value hi = arith::AddIOp::create(
        gb, loc, arith::MulIOp::create(gb, loc, hk, G), g);
    Value hGlobal = hi;
    if (!getOffsets().empty())
      hGlobal = arith::AddIOp::create(gb, loc, hi, getOffsets()[1]);
    forLoop(gb, M, [&](OpBuilder &mb, Value mi) {
      SmallVector<Value> row = {bi, hi, mi};
      SmallVector<Value> global = {bGlobal, hGlobal, mi};
      Value lse = arith::MulFOp::create(
          mb, loc, memref::LoadOp::create(mb, loc, getLogsumexp(), row), ln2);
      Value lseFinite = arith::CmpFOp::create(
          mb, loc, arith::CmpFPredicate::ONE, lse, negInf);
      Value gl = zero;
      if (Value glse = getGradLogsumexp())
        gl = arith::MulFOp::create(
            mb, loc, memref::LoadOp::create(mb, loc, glse, row), invLn2);
      Value delta = emitDot(mb, loc, Ev, getGradOut(), row, getOut(), row,
                            zero);
      forLoop(mb, E, [&](OpBuilder &eb, Value e) {
        memref::StoreOp::create(
            eb, loc, loadF32(eb, loc, getGradQuery(), {bi, hi, mi, e}), dqAcc,
            e);
      });
      forLoop(mb, N, [&](OpBuilder &nb, Value ni) {
        Value dot = emitDot(nb, loc, E, getQuery(), row, getKey(),
                            ValueRange{kb, hk, ni}, zero);
        Value s = arith::MulFOp::create(nb, loc, dot, scale);
        Value sMod = s;
        if (hasScoreMod())
          sMod = inlineModifier(nb, getScoreMod(),
                                {s, global[0], global[1], global[2], ni});
        Value keep = emitKeep(nb, loc, *this, getMaskMod(), global, ni);
        if (!keep) {
          keptPoint(nb, hi, mi, ni, global, s, sMod, lse, lseFinite, delta,
                    gl);
          return;
        }
        auto ifOp = scf::IfOp::create(nb, loc, keep, /*withElse=*/false);
        OpBuilder tb = ifOp.getThenBodyBuilder();
        keptPoint(tb, hi, mi, ni, global, s, sMod, lse, lseFinite, delta, gl);
      });
      forLoop(mb, E, [&](OpBuilder &eb, Value e) {
        Value x = memref::LoadOp::create(eb, loc, dqAcc, e);
        if (qElt != f32)
          x = arith::TruncFOp::create(eb, loc, qElt, x);
        memref::StoreOp::create(eb, loc, x, getGradQuery(), {bi, hi, mi, e});
      });
    });
  });
  return success();
}
