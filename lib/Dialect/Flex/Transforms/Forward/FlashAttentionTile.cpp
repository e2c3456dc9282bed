//===- FlashAttentionTile.cpp - a row tile as an online-softmax loop ------===//
//
// Rewrites a row tile of flex.attention (query [1, 1, M <= Mt, E], or
// [1, G, Mt, E] for the G query heads of one kv head in GQA decode; global
// position in its offsets) into
//
//   Q tile [Mt, E] (padded when M < Mt; [G * Mt, E], row g * Mt + m for
//   head g); mx = -inf, l = 0, acc = 0
//   scf.for j over key blocks iter_args(mx, l, acc) {
//     classifyBlock -> live, full
//     scf.if live { flex.online_attention on block j (no mask when full) }
//   }
//   buildFinalization; rows [0, M) inserted into the tile's outputs
//
// Keys and values come from a KeyValueLayout: the caller's (hoisted ahead
// of the row tiles) when the tile's key is a slice of it, else built here
// from the tile's own K and V.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::flex;

namespace {
/// What every key block of one row tile shares.
struct RowTile {
  mutable AttentionOp op;
  const KeyValueLayout *layout;
  Value q, b, h, m0, rows, kb, kh;
  /// The last row's query index and head, and the last key (N - 1).
  Value mHi, hHi, lastKey;
  /// tileM rows in all: `heads` heads of rowsPerHead rows each.
  int64_t tileM, tileN, e, ev, heads, rowsPerHead;
};
} // namespace

static Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value mlir::flex::filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                    double v) {
  Value init = tensor::EmptyOp::create(b, loc, shape, b.getF32Type());
  Value c = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  return linalg::FillOp::create(b, loc, ValueRange{c}, ValueRange{init})
      .getResult(0);
}

static Value slice2d(OpBuilder &b, Location loc, Value src,
                     ArrayRef<OpFoldResult> offsets, int64_t rows,
                     int64_t cols, ArrayRef<OpFoldResult> sizes) {
  Type elt = cast<RankedTensorType>(src.getType()).getElementType();
  SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({rows, cols}, elt), src, offsets, sizes,
      strides);
}

/// [1, G, M(, Ev)] -> [G * M(, Ev)] and back: the rows of a multi-head
/// tile (heads after each other).
static SmallVector<ReassociationIndices> headRows(int64_t rank) {
  if (rank == 3)
    return {{0, 1, 2}};
  return {{0, 1, 2}, {3}};
}
static Value collapseHeads(OpBuilder &b, Location loc, Value t) {
  int64_t rank = cast<RankedTensorType>(t.getType()).getRank();
  return tensor::CollapseShapeOp::create(b, loc, t, headRows(rank));
}
static Value expandHeads(OpBuilder &b, Location loc, Value t, Type to) {
  auto ty = cast<RankedTensorType>(to);
  return tensor::ExpandShapeOp::create(b, loc, ty, t,
                                       headRows(ty.getRank()));
}

/// flex.online_attention of key block `n0` on the state; without the mask
/// when `withMask` is false (a block proved full), with it where
/// `maskWhen` is true when that is set (a block classified at run time).
/// The last, partial block (`tail`) reads the layout's padded tail copies
/// where it has them.
static SmallVector<Value> buildBlock(OpBuilder &b, Location loc,
                                     const RowTile &t, Value n0,
                                     ValueRange state, bool withMask,
                                     bool tail, Value maskWhen = {}) {
  const KeyValueLayout &lay = *t.layout;
  OpFoldResult z = b.getIndexAttr(0), one = b.getIndexAttr(1);
  OpFoldResult eA = b.getIndexAttr(t.e), ntA = b.getIndexAttr(t.tileN);
  bool tailK = tail && lay.tailKeys, tailV = tail && lay.tailValues;
  OpFoldResult kRow = tailK ? z : OpFoldResult(n0);
  OpFoldResult vRow = tailV ? z : OpFoldResult(n0);
  Value keys = tailK ? lay.tailKeys : lay.keys;
  Value values = tailV ? lay.tailValues : lay.values;
  Value k;
  if (lay.pairedKey)
    k = sliceKeyPairs(b, loc, keys, t.kb, t.kh, n0, t.e, t.tileN);
  else if (lay.transposedKey)
    k = slice2d(b, loc, keys,
                {t.kb, t.kh,
                 b.createOrFold<arith::DivUIOp>(
                     loc, n0, arith::ConstantIndexOp::create(b, loc, t.tileN)),
                 z, z},
                t.e, t.tileN, {one, one, one, eA, ntA});
  else
    k = slice2d(b, loc, keys, {t.kb, t.kh, kRow, z}, t.tileN, t.e,
                {one, one, ntA, eA});
  Value v =
      lay.pairedValue
          ? sliceValuePairs(b, loc, values, t.kb, t.kh, n0, t.tileN, t.ev)
          : slice2d(b, loc, values, {t.kb, t.kh, vRow, z}, t.tileN, t.ev,
                    {one, one, ntA, b.getIndexAttr(t.ev)});
  auto online = OnlineAttentionOp::create(
      b, loc, state.getTypes(), t.q, k, v, t.op.getCaptures(), t.b, t.h, t.m0,
      n0, t.rows, lay.kvLen, state[0], state[1], state[2],
      withMask ? maskWhen : Value(), t.op.getScaleAttr(),
      lay.transposedKey ? b.getUnitAttr() : UnitAttr(),
      lay.pairedKey ? b.getUnitAttr() : UnitAttr(),
      lay.pairedValue ? b.getUnitAttr() : UnitAttr(),
      t.heads > 1 ? b.getI64IntegerAttr(t.rowsPerHead) : IntegerAttr());
  IRMapping map;
  t.op.getScoreMod().cloneInto(&online.getScoreMod(), map);
  if (withMask)
    t.op.getMaskMod().cloneInto(&online.getMaskMod(), map);
  return SmallVector<Value>(online->getResults());
}

/// `scf.if cond { then() } else { other() }` yielding the state types.
static SmallVector<Value>
ifElse(OpBuilder &b, Location loc, Value cond, TypeRange types,
       function_ref<SmallVector<Value>()> thenFn,
       function_ref<SmallVector<Value>()> elseFn) {
  auto ifOp = scf::IfOp::create(b, loc, types, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, thenFn());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, elseFn());
  return SmallVector<Value>(ifOp.getResults());
}

/// Moves the ops of `loop`'s body up to `last` (the block classification)
/// that use only values defined outside the loop in front of it: the parts
/// of an interval classification that depend on the row tile alone (e.g.
/// the range of doc[q] over its rows) run once per row tile. They are pure
/// (arith, clamped tensor.extract, scf.for over them).
static void hoistRowInvariants(scf::ForOp loop, Operation *last) {
  if (!last)
    return;
  auto outside = [&](Value v) {
    return !loop->isAncestor(v.getParentRegion()->getParentOp());
  };
  SmallVector<Operation *> ops;
  for (Operation &op : loop.getBody()->without_terminator()) {
    ops.push_back(&op);
    if (&op == last)
      break;
  }
  for (Operation *op : ops) {
    SetVector<Value> above;
    getUsedValuesDefinedAbove(op->getRegions(), above);
    if (llvm::all_of(op->getOperands(), outside) &&
        llvm::all_of(above, outside))
      op->moveBefore(loop);
  }
}

/// One key block `j` on the state: classification, then the block (with or
/// without mask) when live; the next state.
static SmallVector<Value> buildKeyStep(OpBuilder &b, Location loc,
                                       const RowTile &t, StringRef kind,
                                       Value j, ValueRange st, bool tail,
                                       Operation **classification) {
  const KeyValueLayout &lay = *t.layout;
  Value n0 = arith::MulIOp::create(b, loc, j, cIdx(b, loc, t.tileN));
  Value nHi = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, n0, cIdx(b, loc, t.tileN - 1)),
      t.lastKey);
  BlockBox box{t.b,     t.h,    t.hHi,     t.m0,    t.mHi,   n0,
               nHi,     t.rows, lay.kvLen, t.tileM, t.tileN, t.rowsPerHead};
  BlockClass cls = classifyBlock(b, loc, t.op, kind, box);
  if (kind == "interval" && classification)
    *classification = &b.getBlock()->back();
  if (t.op.hasBlockTensors())
    cls = withBlockStatus(b, loc, t.op, t.op.hasMaskMod(), t.b, t.h, t.m0, n0,
                          cls);
  bool hasMask = t.op.hasMaskMod();
  // One block for full and partial ones: the mask applies where the block
  // is not full (one copy of the kernels instead of two).
  auto compute = [&]() -> SmallVector<Value> {
    if (!cls.full || !hasMask) // no run-time verdict, or nothing to mask
      return buildBlock(b, loc, t, n0, st, hasMask, tail);
    Value notFull = arith::XOrIOp::create(
        b, loc, cls.full, arith::ConstantIntOp::create(b, loc, 1, 1));
    return buildBlock(b, loc, t, n0, st, true, tail, notFull);
  };
  if (!cls.live)
    return compute();
  return ifElse(b, loc, cls.live, st.getTypes(), compute,
                [&] { return SmallVector<Value>(st); });
}

/// The key blocks [first, last), carrying (mx, l, acc): a loop over the
/// blocks read in place, then the layout's padded tail block (when `last`
/// is all blocks and the layout has one); the final state.
static SmallVector<Value> buildKeyLoop(OpBuilder &b, Location loc,
                                       const RowTile &t, StringRef kind,
                                       ValueRange init, Value first,
                                       Value last) {
  const KeyValueLayout &lay = *t.layout;
  bool peeled = last == lay.numBlocks && lay.fullBlocks != lay.numBlocks;
  Operation *classification = nullptr;
  auto loop = scf::ForOp::create(
      b, loc, first, peeled ? lay.fullBlocks : last, cIdx(b, loc, 1), init,
      [&](OpBuilder &nb, Location l, Value j, ValueRange st) {
        scf::YieldOp::create(nb, l, buildKeyStep(nb, l, t, kind, j, st,
                                                 false, &classification));
      });
  hoistRowInvariants(loop, classification);
  SmallVector<Value> state(loop.getResults());
  if (!peeled)
    return state;
  auto step = [&]() {
    return buildKeyStep(b, loc, t, kind, lay.fullBlocks, state, true,
                        nullptr);
  };
  if (getConstantIntValue(lay.numBlocks) && getConstantIntValue(lay.fullBlocks))
    return step();
  Value hasTail = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        lay.fullBlocks, lay.numBlocks);
  return ifElse(b, loc, hasTail, TypeRange(ValueRange(state)), step,
                [&] { return state; });
}

/// Inserts rows [0, rows) of `t` ([Mt] or [Mt, Ev]) into `init` ([1, 1,
/// rows] or [1, 1, rows, Ev]).
static Value placeRows(OpBuilder &b, Location loc, Value t, Value init,
                       Value rows, bool padded) {
  auto initTy = cast<RankedTensorType>(init.getType());
  auto tTy = cast<RankedTensorType>(t.getType());
  OpFoldResult z = b.getIndexAttr(0), one = b.getIndexAttr(1);
  SmallVector<OpFoldResult> offs(initTy.getRank(), z);
  SmallVector<OpFoldResult> sizes = {one, one, getAsOpFoldResult(rows)};
  SmallVector<int64_t> shape = {initTy.getDimSize(2)};
  if (initTy.getRank() == 4) {
    sizes.push_back(b.getIndexAttr(initTy.getDimSize(3)));
    shape.push_back(initTy.getDimSize(3));
  }
  if (padded) {
    SmallVector<OpFoldResult> tOffs(tTy.getRank(), z);
    SmallVector<OpFoldResult> tSizes(sizes.begin() + 2, sizes.end());
    SmallVector<OpFoldResult> strides(tTy.getRank(), one);
    t = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get(shape, tTy.getElementType()), t, tOffs,
        tSizes, strides);
  }
  SmallVector<OpFoldResult> strides(initTy.getRank(), one);
  return tensor::InsertSliceOp::create(b, loc, t, init, offs, sizes, strides);
}

/// Fills `t` for the row tile `tile` (Q tile padded to Mt, position, K/V
/// layout: `layout` when the tile's key is its slice, else `own`).
static LogicalResult initRowTile(OpBuilder &b, AttentionOp tile,
                                 const FlashConfig &cfg,
                                 const KeyValueLayout *layout, RowTile &t,
                                 KeyValueLayout &own, bool peelTail) {
  if (std::optional<std::string> why = flashUnsupportedReason(tile))
    return tile.emitOpError("cannot decompose into key blocks: ") << *why;
  auto qTy = cast<RankedTensorType>(tile.getQuery().getType());
  int64_t mStatic = qTy.getDimSize(2), mt = cfg.tileM;
  int64_t heads = qTy.getDimSize(1);
  bool grouped = heads == cfg.headsPerTile && heads > 1 && mStatic == mt;
  if (qTy.getDimSize(0) != 1 || (heads != 1 && !grouped) ||
      (!ShapedType::isDynamic(mStatic) && mStatic > mt)) {
    InFlightDiagnostic diag =
        tile.emitOpError("expected a row tile with query [1, 1, M, E], "
                         "M <= tile-m = ")
        << mt;
    if (cfg.headsPerTile > 1)
      diag << ", or [1, " << cfg.headsPerTile << ", " << mt << ", E]";
    return diag << " (tile B, Hq and M first), got " << qTy;
  }
  if (std::optional<ArrayRef<int64_t>> bs = tile.getBlockSizes())
    if ((*bs)[0] % mt || (*bs)[1] % cfg.tileN)
      return tile.emitOpError("the row tile (")
             << mt << " rows, key blocks of " << cfg.tileN
             << ") must nest in the BlockMask blocks (" << (*bs)[0] << ", "
             << (*bs)[1] << ")";
  Location loc = tile.getLoc();
  t = RowTile{tile, layout};
  t.heads = grouped ? heads : 1;
  t.rowsPerHead = mt;
  t.tileM = t.heads * mt;
  t.tileN = cfg.tileN;
  t.e = qTy.getDimSize(3);
  t.ev = tile.getValueType().getDimSize(3);
  Value zero = cIdx(b, loc, 0);
  ValueRange offs = tile.getOffsets();
  t.b = offs.empty() ? zero : offs[0];
  t.h = offs.empty() ? zero : offs[1];
  t.m0 = offs.empty() ? zero : offs[2];
  t.rows = ShapedType::isDynamic(mStatic)
               ? tensor::DimOp::create(b, loc, tile.getQuery(), 2).getResult()
               : cIdx(b, loc, mStatic);

  // The Q tile, padded with zero rows to Mt (heads after each other).
  OpFoldResult z = b.getIndexAttr(0), one = b.getIndexAttr(1);
  if (grouped)
    t.q = collapseHeads(b, loc, tile.getQuery());
  else
    t.q = slice2d(b, loc, tile.getQuery(), {z, z, z, z}, mStatic, t.e,
                {one, one, getAsOpFoldResult(t.rows), b.getIndexAttr(t.e)});
  if (!grouped && mStatic != mt) {
    Value padZero =
        arith::ConstantOp::create(b, loc, b.getZeroAttr(qTy.getElementType()));
    OpFoldResult high = getAsOpFoldResult(
        b.createOrFold<arith::SubIOp>(loc, cIdx(b, loc, mt), t.rows));
    t.q = tensor::PadOp::create(
        b, loc, RankedTensorType::get({mt, t.e}, qTy.getElementType()), t.q,
        {z, z}, {high, z}, padZero);
  }

  // Keys/values: the hoisted layout when the tile's key is its slice.
  t.kb = zero;
  if (layout) {
    auto keySlice = tile.getKey().getDefiningOp<tensor::ExtractSliceOp>();
    if (keySlice && keySlice.getSource() == layout->sourceKey)
      t.kb = getValueOrCreateConstantIndexOp(b, loc,
                                             keySlice.getMixedOffsets()[0]);
    else
      t.layout = nullptr;
  }
  if (!t.layout) {
    own = buildKeyValueLayout(b, loc, tile.getKey(), tile.getValue(), cfg,
                              peelTail);
    t.layout = &own;
  }
  t.kh = arith::DivUIOp::create(b, loc, t.h,
                                cIdx(b, loc, tile.getGroupSize()));
  Value c1 = cIdx(b, loc, 1);
  t.mHi = arith::AddIOp::create(b, loc, t.m0,
                                arith::SubIOp::create(b, loc, t.rows, c1));
  t.hHi = t.heads > 1 ? arith::AddIOp::create(b, loc, t.h,
                                              cIdx(b, loc, t.heads - 1))
                            .getResult()
                      : t.h;
  t.lastKey = arith::SubIOp::create(b, loc, t.layout->kvLen, c1);
  return success();
}

/// The key blocks [first, last) (all when null) from the empty state
/// (mx = -inf, l = 0, acc = 0); the final state.
static SmallVector<Value> buildStateLoop(OpBuilder &b, Location loc,
                                         const RowTile &t,
                                         const FlashConfig &cfg, Value first,
                                         Value last) {
  float negInf = -std::numeric_limits<float>::infinity();
  SmallVector<Value> init = {filled(b, loc, {t.tileM}, negInf),
                             filled(b, loc, {t.tileM}, 0.0),
                             filled(b, loc, {t.tileM, t.ev}, 0.0)};
  return buildKeyLoop(b, loc, t, blockClassificationKind(t.op, cfg), init,
                      first ? first : cIdx(b, loc, 0),
                      last ? last : t.layout->numBlocks);
}

FailureOr<SmallVector<Value>> mlir::flex::buildRowTileState(
    OpBuilder &b, AttentionOp tile, const FlashConfig &cfg,
    const KeyValueLayout *layout, Value firstBlock, Value lastBlock) {
  RowTile t;
  KeyValueLayout own;
  // A block range (key chunks) needs a layout without a peeled tail.
  bool range = firstBlock || lastBlock;
  if (failed(initRowTile(b, tile, cfg, layout, t, own, !range)))
    return failure();
  if (range && t.layout->fullBlocks != t.layout->numBlocks)
    return tile.emitOpError("key block ranges need a layout padded to whole "
                            "blocks (no peeled tail)");
  return buildStateLoop(b, tile.getLoc(), t, cfg, firstBlock, lastBlock);
}

LogicalResult mlir::flex::decomposeAttentionTile(RewriterBase &rewriter,
                                                 AttentionOp tile,
                                                 const FlashConfig &cfg,
                                                 const KeyValueLayout *layout) {
  OpBuilder::InsertionGuard g(rewriter);
  rewriter.setInsertionPoint(tile);
  Location loc = tile.getLoc();
  OpBuilder &b = rewriter;
  RowTile t;
  KeyValueLayout own;
  if (failed(initRowTile(b, tile, cfg, layout, t, own, true)))
    return failure();
  SmallVector<Value> state = buildStateLoop(b, loc, t, cfg, Value(), Value());

  // Normalization, written straight into the output tile when unpadded.
  int64_t mt = t.tileM;
  bool padRows =
      cast<RankedTensorType>(tile.getQuery().getType()).getDimSize(2) !=
      t.rowsPerHead;
  OpFoldResult z = b.getIndexAttr(0), one = b.getIndexAttr(1);
  Type outElt = tile.getOutputType().getElementType();
  Value outDest =
      padRows ? tensor::EmptyOp::create(b, loc, {mt, t.ev}, outElt).getResult()
      : t.heads > 1
          ? collapseHeads(b, loc, tile.getOutput())
          : slice2d(b, loc, tile.getOutput(), {z, z, z, z}, mt, t.ev,
                    {one, one, b.getIndexAttr(mt), b.getIndexAttr(t.ev)});
  FinalTiles fin = buildFinalization(
      b, loc, state[0], state[1], state[2], outDest,
      static_cast<bool>(tile.getLogsumexp()),
      static_cast<bool>(tile.getMaxScores()));
  if (t.heads > 1) {
    // Unpadded: the [G * Mt] rows are the tile's [1, G, Mt] results.
    SmallVector<Value> results = {
        expandHeads(b, loc, fin.out, tile.getOutput().getType())};
    if (Value lse = tile.getLogsumexp())
      results.push_back(expandHeads(b, loc, fin.lse, lse.getType()));
    if (Value mx = tile.getMaxScores())
      results.push_back(expandHeads(b, loc, fin.max, mx.getType()));
    rewriter.replaceOp(tile, results);
    return success();
  }
  SmallVector<Value> results = {
      placeRows(b, loc, fin.out, tile.getOutput(), t.rows, padRows)};
  if (Value lse = tile.getLogsumexp())
    results.push_back(placeRows(b, loc, fin.lse, lse, t.rows, padRows));
  if (Value mx = tile.getMaxScores())
    results.push_back(placeRows(b, loc, fin.max, mx, t.rows, padRows));
  rewriter.replaceOp(tile, results);
  return success();
}
