//===- FlashBlockClassification.cpp - empty / full key blocks -------------===//
//
// Whether a (row tile, key block) box of a mask_mod is empty (skipped) or
// full (computed without the mask): by interval arithmetic when the mask is
// integer index arithmetic (MaskIntervals.cpp), else by a dense pre-pass
// that evaluates the mask on every valid point of the block; the BlockMask
// tensors' status folded into a classification (withBlockStatus).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::flex;

StringRef mlir::flex::blockClassificationKind(AttentionOp op,
                                              const FlashConfig &cfg) {
  return blockClassificationKind(op.getMaskMod(), cfg);
}

StringRef mlir::flex::blockClassificationKind(Region &maskMod,
                                              const FlashConfig &cfg) {
  if (!cfg.blockSparsity || maskMod.empty())
    return "none";
  if (isIntervalAnalyzableMask(maskMod))
    return "interval";
  return cfg.denseClassify ? "dense" : "none";
}

/// any / all of the mask over the block's valid points: rows past `rows`
/// (of each head) repeat the last row, keys past kv_len are neither kept nor
/// a reason for "not all".
static BlockClass denseClassification(OpBuilder &b, Location loc,
                                      Region &maskMod, const BlockBox &box) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value f = arith::ConstantIntOp::create(b, loc, 0, 1);
  Value t = arith::ConstantIntOp::create(b, loc, 1, 1);
  Value lastRow = arith::SubIOp::create(b, loc, box.rows, c1);
  Value lastKey = arith::SubIOp::create(b, loc, box.kvLen, c1);
  auto rowLoop = scf::ForOp::create(
      b, loc, c0, arith::ConstantIndexOp::create(b, loc, box.tileM), c1,
      ValueRange{f, t},
      [&](OpBuilder &rb, Location rl, Value i, ValueRange rowIt) {
        // Row i of a multi-head tile: head hLo + i / R, query i % R.
        Value h = box.hLo;
        if (box.rowsPerHead != box.tileM) {
          Value r = arith::ConstantIndexOp::create(rb, rl, box.rowsPerHead);
          h = arith::AddIOp::create(rb, rl, h,
                                    arith::DivUIOp::create(rb, rl, i, r));
          i = arith::RemUIOp::create(rb, rl, i, r);
        }
        Value gm = arith::AddIOp::create(
            rb, rl, box.mLo, arith::MinSIOp::create(rb, rl, i, lastRow));
        auto keyLoop = scf::ForOp::create(
            rb, rl, c0, arith::ConstantIndexOp::create(rb, rl, box.tileN), c1,
            rowIt, [&](OpBuilder &kb, Location kl, Value j, ValueRange it) {
              Value n = arith::AddIOp::create(kb, kl, box.nLo, j);
              Value gn = arith::MinSIOp::create(kb, kl, n, lastKey);
              Value keep = inlineModifier(kb, maskMod,
                                          {box.b, h, gm, gn});
              Value valid = arith::CmpIOp::create(
                  kb, kl, arith::CmpIPredicate::slt, n, box.kvLen);
              Value invalid = arith::XOrIOp::create(kb, kl, valid, t);
              Value any = arith::OrIOp::create(
                  kb, kl, it[0], arith::AndIOp::create(kb, kl, keep, valid));
              Value all = arith::AndIOp::create(
                  kb, kl, it[1], arith::OrIOp::create(kb, kl, keep, invalid));
              scf::YieldOp::create(kb, kl, ValueRange{any, all});
            });
        scf::YieldOp::create(rb, rl, keyLoop.getResults());
      });
  return {rowLoop.getResult(0), rowLoop.getResult(1)};
}

BlockClass mlir::flex::classifyBlock(OpBuilder &b, Location loc,
                                     AttentionOp op, StringRef kind,
                                     const BlockBox &box) {
  return classifyBlock(b, loc, op.getMaskMod(), kind, box);
}

BlockClass mlir::flex::classifyBlock(OpBuilder &b, Location loc,
                                     Region &maskMod, StringRef kind,
                                     const BlockBox &box) {
  if (kind == "interval") {
    auto [allTrue, allFalse] =
        emitMaskBounds(b, loc, maskMod,
                       {{box.b, box.b}, {box.hLo, box.hHi}, {box.mLo, box.mHi},
                        {box.nLo, box.nHi}});
    Value t = arith::ConstantIntOp::create(b, loc, 1, 1);
    return {arith::XOrIOp::create(b, loc, allFalse, t), allTrue};
  }
  if (kind == "dense")
    return denseClassification(b, loc, maskMod, box);
  return {};
}

BlockClass mlir::flex::withBlockStatus(OpBuilder &b, Location loc,
                                       BlockTensorOperands op, bool hasMaskMod,
                                       Value batch, Value head, Value m0,
                                       Value n0, BlockClass mask) {
  ArrayRef<int64_t> bs = *op.getBlockSizes();
  Value qBlock = arith::DivUIOp::create(
      b, loc, m0, arith::ConstantIndexOp::create(b, loc, bs[0]));
  Value kvBlock = arith::DivUIOp::create(
      b, loc, n0, arith::ConstantIndexOp::create(b, loc, bs[1]));
  BlockStatus st = emitBlockStatus(b, loc, op, batch, head, qBlock, kvBlock);
  Value t1 = arith::ConstantIntOp::create(b, loc, 1, 1);
  Value f1 = arith::ConstantIntOp::create(b, loc, 0, 1);
  Value maskLive = mask.live ? mask.live : t1;
  Value maskFull = mask.full ? mask.full : (hasMaskMod ? f1 : t1);
  auto either = [&](Value partialAnd) {
    return arith::OrIOp::create(
        b, loc, st.full, arith::AndIOp::create(b, loc, st.partial, partialAnd));
  };
  return {either(maskLive), either(maskFull)};
}
