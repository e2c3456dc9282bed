//===- AttentionBackwardOp.cpp - flex.attention_backward verifier ---------===//
//
// Verifier, region verifier and destination-passing method of
// flex.attention_backward. The operand rules shared with flex.attention
// (query/key/value, block tensors, score_mod/mask_mod) use its helpers; the
// methods both define alike are in FlexOps.td (Flex_AttentionLikeOp).
//
//===----------------------------------------------------------------------===//
#include "AttentionCommon.h"

#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::attn;

MutableOperandRange AttentionBackwardOp::getDpsInitsMutable() {
  // grad_query, grad_key, grad_value and the capture gradients are the last
  // operands.
  return operandsFrom(getGradQueryMutable());
}

/// `v` has element type `elt` and a shape compatible with `shape`.
static LogicalResult verifyLike(Operation *op, Value v, StringRef name,
                                ArrayRef<int64_t> shape, StringRef shapeName,
                                Type elt) {
  auto t = cast<ShapedType>(v.getType());
  if (t.getElementType() != elt)
    return op->emitOpError() << "expected " << name << " element type " << elt
                             << ", got " << t.getElementType();
  for (auto [e, a] : llvm::zip_equal(shape, t.getShape()))
    if (!compatible(e, a))
      return op->emitOpError()
             << "expected " << name << " shape " << shapeName << " = "
             << shapeStr(shape) << ", got " << shapeStr(t.getShape());
  return success();
}

/// capture_grads[j] is shaped like captures[grad_captures[j]], float.
static LogicalResult verifyCaptureGrads(AttentionBackwardOp op) {
  ArrayRef<int64_t> indices = op.getGradCaptureIndices();
  if (indices.size() != op.getCaptureGrads().size())
    return op.emitOpError() << "expected one grad_captures index per capture "
                               "gradient ("
                            << op.getCaptureGrads().size() << "), got "
                            << indices.size();
  int64_t numCaptures = op.getCaptures().size();
  for (auto [j, idx, grad] : llvm::enumerate(indices, op.getCaptureGrads())) {
    if (idx < 0 || idx >= numCaptures)
      return op.emitOpError()
             << "grad_captures[" << j << "] = " << idx
             << " is not the index of a capture (there are " << numCaptures
             << ")";
    auto capTy = dyn_cast<ShapedType>(op.getCaptures()[idx].getType());
    auto gradTy = dyn_cast<ShapedType>(grad.getType());
    if (!capTy || !capTy.hasRank() || !gradTy || !gradTy.hasRank())
      return op.emitOpError() << "capture gradient #" << j
                              << " and its capture must be ranked";
    if (!isa<FloatType>(gradTy.getElementType()))
      return op.emitOpError() << "capture gradient #" << j
                              << " must have a float element type, got "
                              << gradTy.getElementType();
    if (gradTy.getElementType() != capTy.getElementType() ||
        gradTy.getRank() != capTy.getRank() ||
        llvm::any_of(llvm::zip_equal(gradTy.getShape(), capTy.getShape()),
                     [](auto p) {
                       return !compatible(std::get<0>(p), std::get<1>(p));
                     }))
      return op.emitOpError()
             << "capture gradient #" << j << " of type " << grad.getType()
             << " does not match capture #" << idx << " of type "
             << op.getCaptures()[idx].getType();
  }
  return success();
}

LogicalResult AttentionBackwardOp::verify() {
  Operation *op = getOperation();
  for (auto [v, name, rank] :
       {std::tuple<Value, StringRef, int64_t>{getQuery(), "query", 4},
        {getKey(), "key", 4},
        {getValue(), "value", 4},
        {getOut(), "out", 4},
        {getLogsumexp(), "logsumexp", 3},
        {getGradOut(), "grad_out", 4},
        {getGradLogsumexp(), "grad_logsumexp", 3},
        {getGradQuery(), "grad_query", 4},
        {getGradKey(), "grad_key", 4},
        {getGradValue(), "grad_value", 4}})
    if (v && failed(verifyRank(op, v, name, rank)))
      return failure();
  bool allTensors = hasTensorSemantics();
  if (failed(verifyShapedKinds(op)) ||
      failed(verifyQueryKeyValue(op, getQuery(), getKey(), getValue())))
    return failure();

  ShapedType q = getQueryType(), k = getKeyType(), v = getValueType();
  Type elt = q.getElementType(), f32 = Float32Type::get(getContext());
  ArrayRef<int64_t> qs = q.getShape();
  SmallVector<int64_t> outShape = {qs[0], qs[1], qs[2], v.getDimSize(3)};
  SmallVector<int64_t> rowShape = {qs[0], qs[1], qs[2]};
  if (failed(verifyLike(op, getOut(), "out", outShape, "[B, Hq, M, Ev]",
                        elt)) ||
      failed(verifyLike(op, getGradOut(), "grad_out", outShape,
                        "[B, Hq, M, Ev]", elt)) ||
      failed(verifyLike(op, getLogsumexp(), "logsumexp", rowShape,
                        "[B, Hq, M]", f32)) ||
      (getGradLogsumexp() &&
       failed(verifyLike(op, getGradLogsumexp(), "grad_logsumexp", rowShape,
                         "[B, Hq, M]", f32))) ||
      failed(verifyLike(op, getGradQuery(), "grad_query", qs,
                        "[B, Hq, M, E]", elt)) ||
      failed(verifyLike(op, getGradKey(), "grad_key", k.getShape(),
                        "[Bkv, Hkv, N, E]", elt)) ||
      failed(verifyLike(op, getGradValue(), "grad_value", v.getShape(),
                        "[Bkv, Hkv, N, Ev]", elt)))
    return failure();

  // GQA: this op's query heads are exactly the groups of its kv heads
  // (tiling slices both), so G * Hkv = Hq.
  if (std::optional<int64_t> g = getKvGroupSize()) {
    if (*g <= 0)
      return emitOpError() << "kv_group_size must be positive, got " << *g;
    if (!q.isDynamicDim(1) && !k.isDynamicDim(1) &&
        *g * k.getDimSize(1) != q.getDimSize(1))
      return emitOpError() << "kv_group_size = " << *g << " times Hkv = "
                           << k.getDimSize(1) << " must equal Hq = "
                           << q.getDimSize(1);
  } else if (failed(verifyHeadRatio(op, qs[1], k.getDimSize(1)))) {
    return failure();
  }
  if (!getOffsets().empty() && getOffsets().size() != 2)
    return emitOpError() << "expected 0 or 2 offsets (b, h), got "
                         << getOffsets().size();
  if (failed(verifyBlockTensors(*this)) || failed(verifyCaptureGrads(*this)))
    return failure();
  return verifyDpsResults(*this, allTensors);
}

/// The joint region: (score, b, h, q_idx, kv_idx, grad) -> (grad_score,
/// {value, indices...} per capture gradient).
static LogicalResult verifyJoint(AttentionBackwardOp op) {
  Region &joint = op.getJoint();
  if (joint.empty()) {
    if (!op.getCaptureGrads().empty())
      return op.emitOpError("a non-empty joint region is required with "
                            "capture gradients");
    return success();
  }
  Builder b(op.getContext());
  Type f32 = b.getF32Type(), idx = b.getIndexType();
  Block &block = joint.front();
  if (block.getArgumentTypes() != TypeRange{f32, idx, idx, idx, idx, f32})
    return op.emitOpError("joint region must have arguments (score: f32, b, "
                          "h, q_idx, kv_idx: index, grad: f32)");
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op.emitOpError("joint region must end with flex.yield");
  SmallVector<Type> expected = {f32};
  for (Value grad : op.getCaptureGrads()) {
    auto t = cast<ShapedType>(grad.getType());
    expected.push_back(t.getElementType());
    expected.append(t.getRank(), idx);
  }
  if (TypeRange(yield.getValues()) != TypeRange(expected)) {
    auto list = [](TypeRange types) {
      std::string s;
      llvm::raw_string_ostream os(s);
      llvm::interleaveComma(types, os);
      return s;
    };
    return op.emitOpError()
           << "joint region must yield (" << list(expected)
           << ") (the score gradient, then per capture gradient a value and "
              "one index per dimension), got ("
           << list(yield.getValues().getTypes()) << ")";
  }
  return success();
}

LogicalResult AttentionBackwardOp::verifyRegions() {
  if (failed(verifyModifierRegions(*this, getScoreMod(), getMaskMod(),
                                   getCaptures(), hasTensorSemantics())) ||
      failed(verifyJoint(*this)))
    return failure();
  if (!hasTensorSemantics())
    return success();
  return verifyCapturedUses(*this, {&getJoint()}, getCaptures());
}
