//===- FlashOnlineAttention.cpp - decomposition of flex.online_attention --===//
//
// One block of the online softmax as its four tile builders:
//   S = Q.K^T (buildQKTile, times the scale in the broadcast-FMA kernel);
//   S = mask(score_mod(scale * S)) on global indices (buildScoreTile, here;
//     the mask under scf.if when the op has mask_when);
//   P, max, sum, corr (buildSoftmaxUpdate);
//   acc = acc * corr + P.V (buildPVTile).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

/// True unless `v` is the constant `c`.
static bool mayDiffer(Value v, int64_t c) {
  std::optional<int64_t> k = getConstantIntValue(v);
  return !k || *k != c;
}

/// Padding keys may exist unless kv_len is a constant multiple of Nt.
static bool mayPadKeys(OnlineAttentionOp op) {
  std::optional<int64_t> kvLen = getConstantIntValue(op.getKvLen());
  return !kvLen || *kvLen % op.getTileKeys() != 0;
}

/// The score tile with the mask applied or not (`withMask`); `padKeys`:
/// the block may hold keys at or past kv_len (clamped and masked).
static Value buildScores(OpBuilder &b, Location loc, OnlineAttentionOp op,
                         Value s, bool scaled, bool withMask, bool padKeys) {
  MLIRContext *ctx = b.getContext();
  AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
  int64_t rph = op.getTileRowsPerHead();
  // Several heads in the tile (rows_per_head): row i is head h + i / rph.
  bool grouped = rph != op.getTileRows();
  // Padding rows exist unless rows == rph.
  bool clampRows = mayDiffer(op.getRows(), rph);
  bool hasScore = op.hasScoreMod(), hasMask = withMask && op.hasMaskMod();
  if (scaled && !hasScore && !hasMask && !padKeys)
    return s;
  Value scale =
      scaled ? Value() : arith::ConstantOp::create(b, loc, op.getScaleAttr());
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value lastRow = clampRows ? b.createOrFold<arith::SubIOp>(loc, op.getRows(), one)
                            : Value();
  Value lastKey = padKeys ? b.createOrFold<arith::SubIOp>(loc, op.getKvLen(), one)
                          : Value();
  auto gen = linalg::GenericOp::create(
      b, loc, TypeRange{s.getType()}, ValueRange{}, ValueRange{s},
      ArrayRef<AffineMap>{id2},
      ArrayRef<IteratorType>{IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = scaled ? args[0]
                         : arith::MulFOp::create(nb, l, args[0], scale).getResult();
        if (hasScore || hasMask || padKeys) {
          Value i = linalg::IndexOp::create(nb, l, 0);
          Value j = linalg::IndexOp::create(nb, l, 1);
          Value h = op.getH();
          if (grouped) {
            Value r = arith::ConstantIndexOp::create(nb, l, rph);
            h = arith::AddIOp::create(nb, l, h,
                                      arith::DivUIOp::create(nb, l, i, r));
            i = arith::RemUIOp::create(nb, l, i, r);
          }
          if (clampRows)
            i = arith::MinSIOp::create(nb, l, i, lastRow);
          Value gm = arith::AddIOp::create(nb, l, op.getM0(), i);
          Value n = arith::AddIOp::create(nb, l, op.getN0(), j);
          Value gn = padKeys ? arith::MinSIOp::create(nb, l, n, lastKey).getResult()
                             : n;
          if (hasScore)
            x = inlineModifier(nb, op.getScoreMod(),
                               {x, op.getB(), h, gm, gn});
          if (hasMask) {
            Value keep = inlineModifier(nb, op.getMaskMod(),
                                        {op.getB(), h, gm, gn});
            x = arith::SelectOp::create(nb, l, keep, x, negInf);
          }
          if (padKeys) {
            Value valid = arith::CmpIOp::create(
                nb, l, arith::CmpIPredicate::slt, n, op.getKvLen());
            x = arith::SelectOp::create(nb, l, valid, x, negInf);
          }
        }
        linalg::YieldOp::create(nb, l, x);
      });
  return gen.getResult(0);
}

/// `scf.if cond { thenFn() } else { elseFn() }` yielding a tile of `type`.
static Value ifElseTile(OpBuilder &b, Location loc, Value cond, Type type,
                        function_ref<Value()> thenFn,
                        function_ref<Value()> elseFn) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, cond,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, thenFn());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, elseFn());
  return ifOp.getResult(0);
}

/// True if a modifier the tile applies reads a captured tensor.
static bool readsCaptures(OnlineAttentionOp op, bool withMask) {
  auto reads = [](Region &r) {
    return r
        .walk([](tensor::ExtractOp) { return WalkResult::interrupt(); })
        .wasInterrupted();
  };
  return reads(op.getScoreMod()) || (withMask && reads(op.getMaskMod()));
}

/// buildScores; where keys may be padding and a modifier reads a captured
/// tensor, a block below kv_len (all but the last) is built apart, under
/// scf.if, without the clamp of the key index: its reads `cap[..., kv]`
/// stay contiguous in the key, so LLVM vectorizes them.
static Value buildScoresSplitKeys(OpBuilder &b, Location loc,
                                  OnlineAttentionOp op, Value s, bool scaled,
                                  bool withMask) {
  bool padKeys = mayPadKeys(op);
  if (!padKeys || !readsCaptures(op, withMask))
    return buildScores(b, loc, op, s, scaled, withMask, padKeys);
  Value end = b.createOrFold<arith::AddIOp>(
      loc, op.getN0(), arith::ConstantIndexOp::create(b, loc, op.getTileKeys()));
  Value inside = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::sle,
                                               end, op.getKvLen());
  if (std::optional<int64_t> k = getConstantIntValue(inside))
    return buildScores(b, loc, op, s, scaled, withMask, !*k);
  return ifElseTile(
      b, loc, inside, s.getType(),
      [&] { return buildScores(b, loc, op, s, scaled, withMask, false); },
      [&] { return buildScores(b, loc, op, s, scaled, withMask, true); });
}

Value mlir::flex::buildScoreTile(OpBuilder &b, Location loc,
                                 OnlineAttentionOp op, Value s,
                                 bool scaled) {
  Value when = op.getMaskWhen(); // verified: only with a mask_mod
  if (!when)
    return buildScoresSplitKeys(b, loc, op, s, scaled, true);
  return ifElseTile(
      b, loc, when, s.getType(),
      [&] { return buildScoresSplitKeys(b, loc, op, s, scaled, true); },
      [&] { return buildScoresSplitKeys(b, loc, op, s, scaled, false); });
}

LogicalResult mlir::flex::decomposeOnlineAttention(RewriterBase &rewriter,
                                                   OnlineAttentionOp op,
                                                   const FlashConfig &cfg) {
  FlashConfig c = cfg;
  int64_t e = cast<RankedTensorType>(op.getQuery().getType()).getDimSize(1);
  // Rows of S are single vectors in the vector softmax; the row-dot kernel
  // (K as rows) reads the Q rows of the tile for every key.
  c.vectorize = cfg.vectorize && op.getTileKeys() <= kMaxFmaChunk &&
                (op.getTransposedKey() || op.getPairedKey() ||
                 op.getTileRows() * e <= kMaxKeyRowFloats);
  Location loc = op.getLoc();
  if ((op.getPairedKey() || op.getPairedValue()) && !c.vectorize)
    return op.emitOpError("pair-packed key/value need the vector kernels "
                          "(at most ")
           << kMaxFmaChunk << " keys per block)";
  rewriter.setInsertionPoint(op);
  Value s = buildQKTile(rewriter, loc, op, c);
  s = buildScoreTile(rewriter, loc, op, s, qkTileAppliesScale(op, c));
  SoftmaxUpdate sm =
      buildSoftmaxUpdate(rewriter, loc, s, op.getMax(), op.getSum(), c);
  Value acc = buildPVTile(rewriter, loc, sm.p, op.getValue(), op.getAcc(),
                          sm.corr, op.getPairedValue(), c);
  rewriter.replaceOp(op, ValueRange{sm.max, sm.sum, acc});
  return success();
}
