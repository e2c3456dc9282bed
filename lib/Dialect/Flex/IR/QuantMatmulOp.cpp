//===- QuantMatmulOp.cpp - flex.quant_matmul verifier and effects ---------===//
//
// The rules of flex.quant_matmul (FlexQuantOps.td): ranks, the agreement of
// M, N and K between the operands (checked where both sizes are static),
// element types, and the int4 packing parameters (group size, layout, N a
// multiple of 16).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

#include "AttentionCommon.h"

using namespace mlir;
using namespace mlir::flex;

/// torch's int4 CPU packing refuses N not a multiple of this; where the
/// layout's block does not divide N the last N mod BN columns are a short
/// block (FlexQuantOps.td).
static constexpr int64_t kInt4NMultiple = 16;

/// Two sizes that disagree while both are static.
static bool mismatch(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

static std::string shapeStr(ShapedType t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(
      t.getShape(), os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      },
      ", ");
  os << "]";
  return s;
}

void QuantMatmulOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  attn::getShapedOperandEffects(*this, effects);
}

LogicalResult QuantMatmulOp::verify() {
  ShapedType x = getXType(), w = getWType(), s = getScalesType(),
             init = getInitType();
  bool tensors = isa<RankedTensorType>(x);
  for (ShapedType t : {x, w, s, init}) {
    if (!t.hasRank())
      return emitOpError() << "operands must be ranked";
    if (isa<RankedTensorType>(t) != tensors)
      return emitOpError()
             << "operands must be all tensors or all memrefs";
  }
  if (failed(attn::verifyDpsResults(*this, tensors)))
    return failure();

  StringRef format = getFormat();
  if (format != "int8" && format != "int4_cpu")
    return emitOpError() << "format must be \"int8\" or \"int4_cpu\", got \""
                         << format << "\"";

  // x [M, K] and init [M, N], f32 or bf16.
  Type elt = x.getElementType();
  if (x.getRank() != 2)
    return emitOpError() << "x must be rank 2 [M, K], got rank "
                         << x.getRank();
  if (!elt.isF32() && !elt.isBF16())
    return emitOpError() << "x must have element type f32 or bf16, got "
                         << elt;
  if (init.getRank() != 2)
    return emitOpError() << "init must be rank 2 [M, N], got rank "
                         << init.getRank();
  if (init.getElementType() != elt)
    return emitOpError() << "init element type " << init.getElementType()
                         << " must be x's (" << elt << ")";
  if (mismatch(init.getDimSize(0), x.getDimSize(0)))
    return emitOpError() << "init " << shapeStr(init) << " and x "
                         << shapeStr(x) << " disagree on M";
  int64_t k = x.getDimSize(1), n = init.getDimSize(1);

  if (!w.getElementType().isInteger(8))
    return emitOpError() << "w must have element type i8, got "
                         << w.getElementType();
  Type se = s.getElementType();
  if (!se.isF32() && se != elt)
    return emitOpError() << "scales must have element type f32 or x's ("
                         << elt << "), got " << se;
  if (w.getRank() != 2)
    return emitOpError() << "w must be rank 2, got rank " << w.getRank();
  int64_t groupSize = getGroupSize(), layout = getLayout();

  if (format == "int8") {
    if (groupSize != 0 || layout != 0)
      return emitOpError() << "int8 takes group_size = 0 and layout = 0, "
                              "got group_size = "
                           << groupSize << ", layout = " << layout;
    if (mismatch(w.getDimSize(0), n) || mismatch(w.getDimSize(1), k))
      return emitOpError() << "int8 w " << shapeStr(w) << " must be [N, K] = ["
                           << n << ", " << k << "] (from init and x)";
    if (s.getRank() != 1 || mismatch(s.getDimSize(0), n))
      return emitOpError() << "int8 scales " << shapeStr(s)
                           << " must be [N] (N = " << n << ")";
    return success();
  }

  // int4_cpu: w [N, K/2] packed bytes, scales [K/g, N, 2].
  if (groupSize <= 0)
    return emitOpError() << "int4_cpu group_size must be positive, got "
                         << groupSize;
  if (layout < 0 || layout > 2)
    return emitOpError() << "int4_cpu layout must be 0, 1 or 2, got "
                         << layout;
  if (!ShapedType::isDynamic(k)) {
    if (k % 2 != 0)
      return emitOpError() << "int4_cpu K (" << k << ") must be even";
    if (k % groupSize != 0)
      return emitOpError() << "int4_cpu group_size " << groupSize
                           << " must divide K (" << k << ")";
  }
  if (!ShapedType::isDynamic(n) && n % kInt4NMultiple != 0)
    return emitOpError() << "int4_cpu N (" << n << ") must be a multiple of "
                         << kInt4NMultiple
                         << " (torch's int4 CPU packing needs one)";
  if (mismatch(w.getDimSize(0), n) ||
      (!ShapedType::isDynamic(k) && mismatch(w.getDimSize(1), k / 2)))
    return emitOpError() << "int4_cpu w " << shapeStr(w)
                         << " must be [N, K/2] (N = " << n << ", K = " << k
                         << ")";
  if (s.getRank() != 3 || mismatch(s.getDimSize(1), n) ||
      mismatch(s.getDimSize(2), 2) ||
      (!ShapedType::isDynamic(k) && mismatch(s.getDimSize(0), k / groupSize)))
    return emitOpError() << "int4_cpu scales " << shapeStr(s)
                         << " must be [K/group_size, N, 2] (K = " << k
                         << ", N = " << n << ", group_size = " << groupSize
                         << ")";
  return success();
}
