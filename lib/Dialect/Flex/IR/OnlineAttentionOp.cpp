//===- OnlineAttentionOp.cpp - flex.online_attention verifier -------------===//
//
// The tile-level online-softmax step of the tiled lowering: static shapes,
// tensors only, state in f32. See FlexOps.td for the semantics.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

using namespace mlir;
using namespace mlir::flex;

/// The key's shape for its layout: [Nt, E], [E, Nt] (transposed_key) or
/// [E/2, 2 Nt] (paired_key).
static LogicalResult verifyKeyShape(OnlineAttentionOp op, int64_t e,
                                    int64_t nt, int64_t ev) {
  auto k = cast<RankedTensorType>(op.getKey().getType());
  SmallVector<int64_t> expected = {nt, e};
  StringRef form = "[Nt, E]";
  if (op.getTransposedKey()) {
    expected = {e, nt};
    form = "[E, Nt]";
  } else if (op.getPairedKey()) {
    expected = {e / 2, 2 * nt};
    form = "[E/2, 2 Nt]";
  }
  if ((op.getPairedKey() && e % 2) || k.getShape() != ArrayRef(expected))
    return op.emitOpError()
           << "expected key of shape " << form << " = [" << expected[0]
           << ", " << expected[1] << "] for query [" << op.getTileRows()
           << ", " << e << "] and value [" << nt << ", " << ev << "]";
  return success();
}

LogicalResult OnlineAttentionOp::verify() {
  auto ty = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  for (auto [v, name, rank] :
       {std::tuple<Value, StringRef, int64_t>{getQuery(), "query", 2},
        {getKey(), "key", 2},
        {getValue(), "value", 2},
        {getMax(), "max", 1},
        {getSum(), "sum", 1},
        {getAcc(), "acc", 2}}) {
    RankedTensorType t = ty(v);
    if (t.getRank() != rank || !t.hasStaticShape())
      return emitOpError() << "expected " << name << " to have a static shape "
                           << "of rank " << rank << ", got " << t;
  }
  Type elt = ty(getQuery()).getElementType();
  if (!elt.isF32() && !elt.isF16() && !elt.isBF16())
    return emitOpError() << "unsupported element type " << elt
                         << "; expected f32, f16 or bf16";
  if (ty(getKey()).getElementType() != elt ||
      ty(getValue()).getElementType() != elt)
    return emitOpError("expected query, key and value of one element type");
  for (Value s : {getMax(), getSum(), getAcc()})
    if (!ty(s).getElementType().isF32())
      return emitOpError("expected the softmax state (max, sum, acc) in f32");

  if ((getPairedKey() || getPairedValue()) && !elt.isBF16())
    return emitOpError("pair-packed key/value layouts need bf16 operands");
  if (getPairedKey() && getTransposedKey())
    return emitOpError("expected at most one of transposed_key and "
                       "paired_key");
  int64_t mt = getTileRows(), e = ty(getQuery()).getDimSize(1);
  int64_t nt = getTileKeys(), ev = ty(getValue()).getDimSize(1);
  if (getPairedValue())
    ev /= 2;
  if (failed(verifyKeyShape(*this, e, nt, ev)))
    return failure();
  if (getPairedValue() && ty(getValue()).getDimSize(1) % 2)
    return emitOpError("expected a paired value of shape [Nt/2, 2 Ev]");
  if (ty(getMax()).getDimSize(0) != mt || ty(getSum()).getDimSize(0) != mt ||
      ty(getAcc()).getDimSize(0) != mt || ty(getAcc()).getDimSize(1) != ev)
    return emitOpError() << "expected max and sum [" << mt << "] and acc ["
                         << mt << ", " << ev << "]";
  if (IntegerAttr r = getRowsPerHeadAttr())
    if (r.getInt() <= 0 || mt % r.getInt())
      return emitOpError() << "expected rows_per_head > 0 dividing the "
                           << mt << " rows of the tile, got " << r.getInt();
  if (getMaskWhen() && !hasMaskMod())
    return emitOpError("mask_when without a mask_mod region");
  for (auto [res, init] : llvm::zip_equal(
           getResults(), ValueRange{getMax(), getSum(), getAcc()}))
    if (res.getType() != init.getType())
      return emitOpError() << "result type " << res.getType()
                           << " differs from its state operand type "
                           << init.getType();
  return success();
}

LogicalResult OnlineAttentionOp::verifyRegions() {
  return verifyModifierRegions(*this, getScoreMod(), getMaskMod(),
                               getCaptures(), /*checkCaptures=*/true);
}
