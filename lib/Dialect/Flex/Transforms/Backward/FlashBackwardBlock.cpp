//===- FlashBackwardBlock.cpp - one (query block, key block) of the backward ===//
//
// The five contractions and the score tile of one block pair of
// flex.attention_backward, in f32:
//   S  = scale Q.K^T, dP = dO.V^T      (buildBackwardScoreProducts: the
//                                       forward's broadcast-FMA kernel over
//                                       K^T / V^T blocks, as Q.K^T)
//   P, dS on global indices             (buildBackwardScoreTile)
//   dV_j += P^T.dO, dK_j += dS^T.Q      (buildTransposedProductTile: the
//                                       kernel reading the [Mt, Nt] tile
//                                       transposed, as P.V)
//   dQ_i += dS.K                        (buildRowProductTile: as P.V)
//   capture partials[idx] += value      (buildCaptureScatterAdds: a loop
//                                       over the tile's points)
// Without `vectorize`, linalg.generic contractions; with bf16-dot the
// contractions of FlashBackwardBf16Dot.cpp.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

static int64_t dimOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

/// True unless `v` is the constant `c`.
static bool mayDiffer(Value v, int64_t c) {
  std::optional<int64_t> k = getConstantIntValue(v);
  return !k || *k != c;
}

static Value zeroFilled(OpBuilder &b, Location loc, Value dest) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  return linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{dest})
      .getResult(0);
}

std::pair<Value, Value> mlir::flex::buildBackwardScoreProducts(
    OpBuilder &b, Location loc, AttentionBackwardOp op,
    const BackwardBlock &blk, const FlashConfig &cfg) {
  int64_t mt = blk.tileM, nt = blk.tileN, e = dimOf(blk.q, 1),
          ev = dimOf(blk.dout, 1);
  Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  if (cfg.vectorize) {
    int64_t chunk = qkChunkFor(cfg.vectorBits);
    BroadcastFmaTiles st{blk.q, blk.keyT, blk.sScratch, Value(), mt, e, nt,
                         scale, chunk};
    BroadcastFmaTiles dpt{blk.dout, blk.valueT, blk.dpScratch, Value(),
                          mt,       ev,         nt,            Value(),
                          chunk};
    st.vectorBits = dpt.vectorBits = cfg.vectorBits;
    Value s = buildBroadcastFmaKernel(b, loc, st);
    Value dp = buildBroadcastFmaKernel(b, loc, dpt);
    return {s, dp};
  }
  MLIRContext *ctx = b.getContext();
  AffineMap kMap = AffineMap::get(
      3, 0, {getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)}, ctx);
  Value s = buildGenericContraction(b, loc, blk.q, blk.keyT, kMap,
                                    zeroFilled(b, loc, blk.sScratch));
  AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
  s = linalg::GenericOp::create(
          b, loc, TypeRange{s.getType()}, ValueRange{}, ValueRange{s},
          ArrayRef<AffineMap>{id2},
          ArrayRef<IteratorType>{IteratorType::parallel,
                                 IteratorType::parallel},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            linalg::YieldOp::create(
                nb, l, ValueRange{arith::MulFOp::create(nb, l, a[0], scale)});
          })
          .getResult(0);
  Value dp = buildGenericContraction(b, loc, blk.dout, blk.valueT, kMap,
                                     zeroFilled(b, loc, blk.dpScratch));
  return {s, dp};
}

/// The score tile with the mask applied or not.
static BackwardScores buildScores(OpBuilder &b, Location loc,
                                  AttentionBackwardOp op,
                                  const BackwardBlock &blk, Value s, Value dp,
                                  bool withMask, const FlashConfig &cfg) {
  MLIRContext *ctx = b.getContext();
  int64_t mt = blk.tileM, nt = blk.tileN;
  bool clampRows = mayDiffer(blk.rows, mt);
  std::optional<int64_t> kvLen = getConstantIntValue(blk.kvLen);
  bool padKeys = !kvLen || *kvLen % nt != 0;
  bool hasScore = op.hasScoreMod(), hasMask = withMask && op.hasMaskMod(),
       hasJoint = op.hasJoint();
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value lastRow =
      clampRows ? b.createOrFold<arith::SubIOp>(loc, blk.rows, one) : Value();
  Value lastKey =
      padKeys ? b.createOrFold<arith::SubIOp>(loc, blk.kvLen, one) : Value();
  Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value expCap = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(88.0));
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  IteratorType par = IteratorType::parallel;
  // Outputs: P, dS, then per capture gradient its contribution values and
  // flat indices.
  size_t numCaptures = blk.captureShapes.size();
  SmallVector<Value> outs = {blk.pScratch, blk.dsScratch};
  for (size_t c = 0; c < numCaptures; ++c)
    outs.append({blk.contribValues[c], blk.contribIndices[c]});
  SmallVector<Type> outTypes = llvm::map_to_vector(
      outs, [](Value v) { return v.getType(); });
  SmallVector<AffineMap> maps = {id2, id2, row, row};
  maps.append(outs.size(), id2);
  auto gen = linalg::GenericOp::create(
      b, loc, outTypes, ValueRange{s, dp, blk.lse, blk.delta}, outs, maps,
      ArrayRef<IteratorType>{par, par},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value sv = a[0], dpv = a[1], lse = a[2], delta = a[3];
        if (blk.scaleScores)
          sv = arith::MulFOp::create(nb, l, sv, scale);
        Value i = linalg::IndexOp::create(nb, l, 0);
        Value j = linalg::IndexOp::create(nb, l, 1);
        Value ci = clampRows ? arith::MinSIOp::create(nb, l, i, lastRow)
                                   .getResult()
                             : i;
        Value gm = arith::AddIOp::create(nb, l, blk.m0, ci);
        Value n = arith::AddIOp::create(nb, l, blk.n0, j);
        Value gn = padKeys
                       ? arith::MinSIOp::create(nb, l, n, lastKey).getResult()
                       : n;
        Value sMod = sv;
        if (hasScore)
          sMod = inlineModifier(nb, op.getScoreMod(), {sv, blk.b, blk.h, gm, gn});
        Value keep = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::ONE,
                                           lse, negInf);
        // The points that contribute to capture gradients: mask, padding
        // (not lse; the reference evaluates the joint at ds = 0 there).
        // Null: all.
        Value keepPoint;
        auto both = [&](Value c) {
          keep = arith::AndIOp::create(nb, l, keep, c);
          if (numCaptures)
            keepPoint = keepPoint
                            ? arith::AndIOp::create(nb, l, keepPoint, c)
                                  .getResult()
                            : c;
        };
        if (hasMask)
          both(inlineModifier(nb, op.getMaskMod(), {blk.b, blk.h, gm, gn}));
        if (clampRows)
          both(arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, i,
                                     blk.rows));
        if (padKeys)
          both(arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, n,
                                     blk.kvLen));
        // s' - lse <= 0 up to rounding (lse is the row's log-sum-exp);
        // capped so that an inconsistent lse cannot overflow 2^k.
        Value x = arith::SubFOp::create(nb, l, sMod, lse);
        // (compare + select: llvm.minimum would be a libcall.)
        Value big = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT, x,
                                          expCap);
        x = arith::SelectOp::create(nb, l, big, expCap, x);
        Value p = cfg.fastExp ? emitExpNonPositive(nb, l, x)
                              : math::ExpOp::create(nb, l, x).getResult();
        p = arith::SelectOp::create(nb, l, keep, p, zero);
        Value ds = arith::MulFOp::create(
            nb, l, p, arith::SubFOp::create(nb, l, dpv, delta));
        SmallVector<Value> joint;
        if (hasJoint) {
          joint = inlineRegion(nb, op.getJoint(),
                               {sv, blk.b, blk.h, gm, gn, ds});
          ds = joint[0];
        }
        ds = arith::MulFOp::create(nb, l, ds, scale);
        ds = arith::SelectOp::create(nb, l, keep, ds, zero);
        SmallVector<Value> results = {p, ds};
        // Per capture gradient: the value in f32 and the flat index
        // (row-major), or C (the discard slot) when the point is not kept
        // or an index is outside the capture (`ult` rejects negatives).
        size_t pos = 1;
        for (ArrayRef<int64_t> shape : blk.captureShapes) {
          Value v = joint[pos++];
          if (!v.getType().isF32())
            v = arith::ExtFOp::create(nb, l, nb.getF32Type(), v);
          Value inBounds = keepPoint;
          Value flat = arith::ConstantIndexOp::create(nb, l, 0);
          int64_t count = 1;
          for (int64_t extent : shape) {
            Value idx = joint[pos++];
            Value ext = arith::ConstantIndexOp::create(nb, l, extent);
            Value lt = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult,
                                             idx, ext);
            inBounds = inBounds ? arith::AndIOp::create(nb, l, inBounds, lt)
                                      .getResult()
                                : lt;
            flat = arith::AddIOp::create(
                nb, l, arith::MulIOp::create(nb, l, flat, ext), idx);
            count *= extent;
          }
          Value flat32 =
              arith::IndexCastOp::create(nb, l, nb.getI32Type(), flat);
          if (inBounds)
            flat32 = arith::SelectOp::create(
                nb, l, inBounds, flat32,
                arith::ConstantIntOp::create(nb, l, count, 32));
          results.append({v, flat32});
        }
        linalg::YieldOp::create(nb, l, results);
      });
  BackwardScores r{gen.getResult(0), gen.getResult(1), {}, {}};
  for (size_t c = 0; c < numCaptures; ++c) {
    r.contribValues.push_back(gen.getResult(2 + 2 * c));
    r.contribIndices.push_back(gen.getResult(3 + 2 * c));
  }
  return r;
}

/// The results of `sc` in buildScores' output order.
static SmallVector<Value> scoreValues(const BackwardScores &sc) {
  SmallVector<Value> v = {sc.p, sc.ds};
  for (auto [x, i] : llvm::zip(sc.contribValues, sc.contribIndices))
    v.append({x, i});
  return v;
}

BackwardScores mlir::flex::buildBackwardScoreTile(OpBuilder &b, Location loc,
                                                  AttentionBackwardOp op,
                                                  const BackwardBlock &blk,
                                                  Value s, Value dp,
                                                  const FlashConfig &cfg) {
  if (!blk.maskWhen || !op.hasMaskMod())
    return buildScores(b, loc, op, blk, s, dp, true, cfg);
  SmallVector<Type> types = {s.getType(), s.getType()};
  for (auto [x, i] : llvm::zip(blk.contribValues, blk.contribIndices))
    types.append({x.getType(), i.getType()});
  auto ifOp = scf::IfOp::create(b, loc, types, blk.maskWhen,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  BackwardScores m = buildScores(b, loc, op, blk, s, dp, true, cfg);
  scf::YieldOp::create(b, loc, scoreValues(m));
  b.setInsertionPointToStart(ifOp.elseBlock());
  BackwardScores f = buildScores(b, loc, op, blk, s, dp, false, cfg);
  scf::YieldOp::create(b, loc, scoreValues(f));
  BackwardScores r{ifOp.getResult(0), ifOp.getResult(1), {}, {}};
  for (size_t c = 0; c < blk.contribValues.size(); ++c) {
    r.contribValues.push_back(ifOp.getResult(2 + 2 * c));
    r.contribIndices.push_back(ifOp.getResult(3 + 2 * c));
  }
  return r;
}

SmallVector<Value> mlir::flex::buildCaptureScatterAdds(OpBuilder &b,
                                                       Location loc,
                                                       const BackwardScores &sc,
                                                       ValueRange partials) {
  if (partials.empty())
    return {};
  int64_t mt = dimOf(sc.p, 0), nt = dimOf(sc.p, 1);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  auto rows = scf::ForOp::create(
      b, loc, c0, arith::ConstantIndexOp::create(b, loc, mt), c1, partials,
      [&](OpBuilder &rb, Location rl, Value r, ValueRange rIt) {
        auto cols = scf::ForOp::create(
            rb, rl, c0, arith::ConstantIndexOp::create(rb, rl, nt), c1, rIt,
            [&](OpBuilder &cb, Location cl, Value c, ValueRange cIt) {
              SmallVector<Value> next;
              for (auto [k, part] : llvm::enumerate(cIt)) {
                Value v = tensor::ExtractOp::create(
                    cb, cl, sc.contribValues[k], ValueRange{r, c});
                Value flat = tensor::ExtractOp::create(
                    cb, cl, sc.contribIndices[k], ValueRange{r, c});
                flat = arith::IndexCastOp::create(cb, cl, cb.getIndexType(),
                                                  flat);
                Value old = tensor::ExtractOp::create(cb, cl, part, flat);
                Value sum = arith::AddFOp::create(cb, cl, old, v);
                next.push_back(
                    tensor::InsertOp::create(cb, cl, sum, part, flat));
              }
              scf::YieldOp::create(cb, cl, next);
            });
        scf::YieldOp::create(rb, rl, cols.getResults());
      });
  return SmallVector<Value>(rows.getResults());
}

Value mlir::flex::buildTransposedProductTile(OpBuilder &b, Location loc,
                                             Value lhs, Value rhs, Value acc,
                                             const FlashConfig &cfg) {
  int64_t mt = dimOf(lhs, 0), nt = dimOf(lhs, 1), w = dimOf(acc, 1);
  if (cfg.vectorize) {
    BroadcastFmaTiles t{lhs, rhs, acc, Value(), nt, mt, w};
    t.accumulate = true;
    t.lhsTransposed = true;
    t.vectorBits = cfg.vectorBits;
    return buildBroadcastFmaKernel(b, loc, t);
  }
  Value init = tensor::EmptyOp::create(b, loc, {nt, mt}, b.getF32Type());
  Value lt = linalg::TransposeOp::create(b, loc, lhs, init,
                                         ArrayRef<int64_t>{1, 0})
                 .getResult()[0];
  MLIRContext *ctx = b.getContext();
  AffineMap rMap = AffineMap::get(
      3, 0, {getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)}, ctx);
  return buildGenericContraction(b, loc, lt, rhs, rMap, acc);
}

Value mlir::flex::buildRowProductTile(OpBuilder &b, Location loc, Value ds,
                                      Value k, Value acc,
                                      const FlashConfig &cfg) {
  int64_t mt = dimOf(ds, 0), nt = dimOf(ds, 1), e = dimOf(acc, 1);
  if (cfg.vectorize) {
    BroadcastFmaTiles t{ds, k, acc, Value(), mt, nt, e};
    t.accumulate = true;
    t.vectorBits = cfg.vectorBits;
    return buildBroadcastFmaKernel(b, loc, t);
  }
  MLIRContext *ctx = b.getContext();
  AffineMap rMap = AffineMap::get(
      3, 0, {getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)}, ctx);
  return buildGenericContraction(b, loc, ds, k, rMap, acc);
}

SmallVector<Value> mlir::flex::buildBackwardBlock(
    OpBuilder &b, Location loc, AttentionBackwardOp op,
    const BackwardBlock &blk, Value dq, Value dk, Value dv,
    ValueRange partials, const FlashConfig &cfg) {
  if (blk.amx) {
    auto [s, dp] = buildAmxScoreProducts(b, loc, blk);
    BackwardScores sc = buildBackwardScoreTile(b, loc, op, blk, s, dp, cfg);
    SmallVector<Value> r =
        buildAmxGradientProducts(b, loc, blk, sc.p, sc.ds, dq, dk, dv);
    llvm::append_range(r, buildCaptureScatterAdds(b, loc, sc, partials));
    return r;
  }
  if (blk.bf16Dot) {
    auto [s, dp] = buildBf16ScoreProducts(b, loc, op, blk);
    BackwardScores sc = buildBackwardScoreTile(b, loc, op, blk, s, dp, cfg);
    dv = buildBf16TransposedProductTile(b, loc, sc.p, blk.doutPairs, dv,
                                        blk.pPairsScratch);
    dk = buildBf16TransposedProductTile(b, loc, sc.ds, blk.qPairs, dk,
                                        blk.dsPairsScratch);
    dq = buildBf16RowProductTile(b, loc, sc.ds, blk.keyRows, dq,
                                 blk.dsBf16Scratch);
    SmallVector<Value> r = {dq, dk, dv};
    llvm::append_range(r, buildCaptureScatterAdds(b, loc, sc, partials));
    return r;
  }
  auto [s, dp] = buildBackwardScoreProducts(b, loc, op, blk, cfg);
  BackwardScores sc = buildBackwardScoreTile(b, loc, op, blk, s, dp, cfg);
  dv = buildTransposedProductTile(b, loc, sc.p, blk.dout, dv, cfg);
  dk = buildTransposedProductTile(b, loc, sc.ds, blk.q, dk, cfg);
  dq = buildRowProductTile(b, loc, sc.ds, blk.keyRows, dq, cfg);
  SmallVector<Value> r = {dq, dk, dv};
  llvm::append_range(r, buildCaptureScatterAdds(b, loc, sc, partials));
  return r;
}
