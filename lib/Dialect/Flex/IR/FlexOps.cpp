//===- FlexOps.cpp - flex.attention verifier and helpers ------------------===//
//
// Verifier and destination-passing method of flex.attention, the per-point
// score computation shared by every lowering, and (from FlexOps.td) the
// methods flex.attention and flex.attention_backward define alike.
//
//===----------------------------------------------------------------------===//
#include "AttentionCommon.h"

#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::attn;

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

MutableOperandRange AttentionOp::getDpsInitsMutable() {
  // output, then the optional logsumexp and max_scores, which are contiguous
  // at the end of the operand list.
  return operandsFrom(getOutputMutable());
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyRank(op, getQuery(), "query", 4)) ||
      failed(verifyRank(op, getKey(), "key", 4)) ||
      failed(verifyRank(op, getValue(), "value", 4)) ||
      failed(verifyRank(op, getOutput(), "output", 4)))
    return failure();
  if (getLogsumexp() && failed(verifyRank(op, getLogsumexp(), "logsumexp", 3)))
    return failure();
  if (getMaxScores() &&
      failed(verifyRank(op, getMaxScores(), "max_scores", 3)))
    return failure();
  bool allTensors = hasTensorSemantics();
  if (failed(verifyShapedKinds(op)) ||
      failed(verifyQueryKeyValue(op, getQuery(), getKey(), getValue())))
    return failure();

  ShapedType q = getQueryType(), k = getKeyType(), v = getValueType(),
             o = getOutputType();
  Type elt = q.getElementType();
  if (o.getElementType() != elt)
    return emitOpError() << "expected output element type "
                         << o.getElementType()
                         << " to match the query element type " << elt;
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  // GQA ratio.
  if (std::optional<int64_t> g = getKvGroupSize()) {
    if (*g <= 0)
      return emitOpError() << "kv_group_size must be positive, got " << *g;
    // Every query head h of this op reads key/value head (H0 + h) / G: the
    // last one must exist (else the lowering reads out of bounds).
    APInt h0(64, 0);
    bool h0Known = getOffsets().empty() ||
                   (getOffsets().size() == 3 &&
                    matchPattern(getOffsets()[1], m_ConstantInt(&h0)));
    if (h0Known && !ShapedType::isDynamic(qs[1]) &&
        !ShapedType::isDynamic(ks[1]) && qs[1] > 0) {
      int64_t lastHead = h0.getSExtValue() + qs[1] - 1;
      if (lastHead < 0 || lastHead / *g >= ks[1])
        return emitOpError()
               << "kv_group_size = " << *g << " maps query head " << lastHead
               << " to key/value head " << lastHead / *g
               << ", but key/value have Hkv = " << ks[1] << " heads";
    }
  } else if (failed(verifyHeadRatio(op, qs[1], ks[1]))) {
    return failure();
  }
  // Output shape [B, Hq, M, Ev].
  SmallVector<int64_t> expected = {qs[0], qs[1], qs[2], vs[3]};
  for (auto [e, a] : llvm::zip_equal(expected, o.getShape()))
    if (!compatible(e, a))
      return emitOpError() << "expected output shape [B, Hq, M, Ev] = "
                           << shapeStr(expected) << ", got "
                           << shapeStr(o.getShape());
  for (auto [aux, name] : {std::pair<Value, StringRef>(getLogsumexp(),
                                                       "logsumexp"),
                           {getMaxScores(), "max_scores"}}) {
    if (!aux)
      continue;
    auto t = cast<ShapedType>(aux.getType());
    if (!t.getElementType().isF32())
      return emitOpError() << "expected " << name
                           << " element type f32, got " << t.getElementType();
    for (auto [e, a] : llvm::zip_equal(ArrayRef<int64_t>(expected).take_front(3),
                                       t.getShape()))
      if (!compatible(e, a))
        return emitOpError()
               << "expected " << name << " shape [B, Hq, M] = "
               << shapeStr(ArrayRef<int64_t>(expected).take_front(3))
               << ", got " << shapeStr(t.getShape());
  }
  // Offsets.
  if (!getOffsets().empty() && getOffsets().size() != 3)
    return emitOpError() << "expected 0 or 3 offsets (b, h, q_idx), got "
                         << getOffsets().size();
  if (failed(verifyBlockTensors(*this)))
    return failure();
  return verifyDpsResults(*this, allTensors);
}

/// Checks that `region` has the block arguments `argTypes` and yields one
/// value of type `yieldType`.
static LogicalResult verifyModifier(Operation *op, Region &region,
                                    StringRef name, TypeRange argTypes,
                                    Type yieldType, StringRef signature) {
  if (region.empty())
    return success();
  Block &block = region.front();
  if (block.getArgumentTypes() != argTypes)
    return op->emitOpError() << name << " region must have arguments "
                            << signature;
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << name << " region must end with flex.yield";
  if (yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != yieldType)
    return op->emitOpError() << name << " region must yield exactly one "
                            << yieldType;
  return success();
}

LogicalResult mlir::flex::verifyModifierRegions(Operation *op,
                                                Region &scoreMod,
                                                Region &maskMod,
                                                ValueRange captureRange,
                                                bool checkCaptures) {
  Builder b(op->getContext());
  Type idx = b.getIndexType();
  if (failed(verifyModifier(op, scoreMod, "score_mod",
                            {b.getF32Type(), idx, idx, idx, idx},
                            b.getF32Type(),
                            "(score: f32, b, h, q_idx, kv_idx: index)")) ||
      failed(verifyModifier(op, maskMod, "mask_mod", {idx, idx, idx, idx},
                            b.getI1Type(), "(b, h, q_idx, kv_idx: index)")))
    return failure();
  // Tensors read inside a region must be declared captures.
  if (!checkCaptures)
    return success();
  return verifyCapturedUses(op, {&scoreMod, &maskMod}, captureRange);
}

LogicalResult mlir::flex::verifyCapturedUses(Operation *op,
                                             ArrayRef<Region *> regions,
                                             ValueRange captureRange) {
  llvm::SmallPtrSet<Value, 4> captures(captureRange.begin(),
                                       captureRange.end());
  for (Region *region : regions) {
    WalkResult r = region->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands()) {
        if (!isa<ShapedType>(operand.getType()))
          continue;
        if (region->isAncestor(operand.getParentRegion()))
          continue;
        if (!captures.contains(operand)) {
          inner->emitOpError()
              << "uses a tensor defined outside its " << op->getName()
              << " that is not listed in `captures`";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return failure();
  }
  return success();
}

LogicalResult AttentionOp::verifyRegions() {
  return verifyModifierRegions(*this, getScoreMod(), getMaskMod(),
                               getCaptures(), hasTensorSemantics());
}

SmallVector<Value> mlir::flex::inlineRegion(OpBuilder &b, Region &region,
                                            ValueRange args) {
  IRMapping map;
  Block &block = region.front();
  map.map(block.getArguments(), args);
  for (Operation &op : block.without_terminator())
    b.clone(op, map);
  SmallVector<Value> results;
  for (Value v : cast<YieldOp>(block.getTerminator()).getValues())
    results.push_back(map.lookupOrDefault(v));
  return results;
}

Value mlir::flex::inlineModifier(OpBuilder &b, Region &region,
                                 ValueRange args) {
  return inlineRegion(b, region, args)[0];
}

Value AttentionOp::emitModifiedScore(OpBuilder &b, Location loc,
                                     Value rawScore, ValueRange localIdx,
                                     Value kvIdx) {
  SmallVector<Value> global(localIdx.begin(), localIdx.end());
  if (!getOffsets().empty())
    for (auto [g, off] : llvm::zip_equal(global, getOffsets()))
      g = arith::AddIOp::create(b, loc, g, off);

  Value score = rawScore;
  if (hasScoreMod())
    score = inlineModifier(b, getScoreMod(),
                           {rawScore, global[0], global[1], global[2], kvIdx});
  if (Value keep = emitKeep(b, loc, *this, getMaskMod(), global, kvIdx)) {
    Value negInf = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
    score = arith::SelectOp::create(b, loc, keep, score, negInf);
  }
  return score;
}

#define GET_OP_CLASSES
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.cpp.inc"
