//===- OnlineAttentionOp.cpp - flex.online_attention verifier -------------===//
//
// The tile-level online-softmax step of the tiled lowering: static shapes,
// tensors only, state in f32. See FlexOps.td for the semantics.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

using namespace mlir;
using namespace mlir::flex;

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

  int64_t mt = getTileRows(), e = ty(getQuery()).getDimSize(1);
  int64_t nt = getTileKeys(), ev = ty(getValue()).getDimSize(1);
  ArrayRef<int64_t> k = ty(getKey()).getShape();
  int64_t kKeys = getTransposedKey() ? k[1] : k[0];
  int64_t kE = getTransposedKey() ? k[0] : k[1];
  if (kKeys != nt || kE != e)
    return emitOpError() << "expected key of shape "
                         << (getTransposedKey() ? "[E, Nt] = [" : "[Nt, E] = [")
                         << (getTransposedKey() ? e : nt) << ", "
                         << (getTransposedKey() ? nt : e) << "] for query [" << mt
                         << ", " << e << "] and value [" << nt << ", " << ev
                         << "]";
  if (ty(getMax()).getDimSize(0) != mt || ty(getSum()).getDimSize(0) != mt ||
      ty(getAcc()).getDimSize(0) != mt || ty(getAcc()).getDimSize(1) != ev)
    return emitOpError() << "expected max and sum [" << mt << "] and acc ["
                         << mt << ", " << ev << "]";
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
