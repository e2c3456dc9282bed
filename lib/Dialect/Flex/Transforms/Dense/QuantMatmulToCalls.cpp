//===- QuantMatmulToCalls.cpp - bufferized quant matmuls -> runtime calls -===//
//
// flex-quant-matmul-to-calls (Dense/Passes.td): flex.quant_matmul on
// memrefs -> func.call @flex_quant_matmul_i8 / @flex_quant_matmul_i4 of
// lib/Runtime/Quant/ (the ABI of docs and Passes.td: index arguments,
// aligned pointers, offsets and row strides in elements, flags bits 1 / 2 /
// 4 for bf16 x / y / scales). Operands the kernels cannot read in place
// (rows with a non-unit stride; int8 scales, int4 bytes or scale_and_zero
// not contiguous) go through a contiguous copy, freed after the call.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "RuntimeFunctions.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXQUANTMATMULTOCALLS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// Bits of the calls' last argument (lib/Runtime/Quant/).
enum QuantFlags : int64_t { kXBf16 = 1, kYBf16 = 2, kScalesBf16 = 4 };
constexpr unsigned kNumI8Args = 15, kNumI4Args = 16;

/// Whether the innermost stride of `t` is statically 1.
bool unitInnerStride(MemRefType t) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(t.getStridesAndOffset(strides, offset)))
    return false;
  return strides.empty() || strides.back() == 1;
}

/// Whether `t` is statically row-major contiguous (identity layout, or
/// static strides equal to the suffix products of the sizes).
bool contiguous(MemRefType t) {
  if (t.getLayout().isIdentity())
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(t.getStridesAndOffset(strides, offset)))
    return false;
  int64_t expected = 1;
  for (int64_t d = t.getRank() - 1; d >= 0; --d) {
    if (t.getDimSize(d) == 1)
      continue; // any stride of a size-1 dim is never used
    if (ShapedType::isDynamic(strides[d]) || strides[d] != expected)
      return false;
    if (ShapedType::isDynamic(t.getDimSize(d)))
      return d == 0; // only the outermost size may be unknown
    expected *= t.getDimSize(d);
  }
  return true;
}

/// A contiguous buffer of `v`'s shape and element type (freed by the
/// caller).
Value allocLike(OpBuilder &b, Location loc, Value v) {
  auto t = cast<MemRefType>(v.getType());
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.isDynamicDim(d))
      dyn.push_back(memref::DimOp::create(b, loc, v, d));
  auto type = MemRefType::get(t.getShape(), t.getElementType());
  return memref::AllocOp::create(b, loc, type, dyn);
}

/// Replaces `op` by the runtime call.
void rewriteToCall(flex::QuantMatmulOp op, ModuleOp module,
                   RewriterBase &rewriter) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  bool int4 = op.isInt4();
  SmallVector<Value> temps;
  // An input the kernel cannot read in place, copied into a new buffer.
  auto readable = [&](Value v, bool needContiguous) -> Value {
    auto t = cast<MemRefType>(v.getType());
    if (needContiguous ? contiguous(t) : unitInnerStride(t))
      return v;
    Value buf = allocLike(rewriter, loc, v);
    memref::CopyOp::create(rewriter, loc, v, buf);
    temps.push_back(buf);
    return buf;
  };
  Value x = readable(op.getX(), false);
  Value w = readable(op.getW(), int4);
  Value scales = readable(op.getScales(), true);
  Value y = op.getInit();
  Value yOut = y;
  if (!unitInnerStride(cast<MemRefType>(y.getType()))) {
    yOut = allocLike(rewriter, loc, y);
    temps.push_back(yOut);
  }

  auto cst = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };
  SmallVector<Value> args = {memref::DimOp::create(rewriter, loc, x, 0),
                             memref::DimOp::create(rewriter, loc, yOut, 1),
                             memref::DimOp::create(rewriter, loc, x, 1)};
  // (pointer, offset[, row stride]) of each operand.
  auto pass = [&](Value v, bool rowStride) {
    auto meta = flex::appendPointerAndOffset(rewriter, loc, v, args);
    if (rowStride)
      args.push_back(meta.getStrides()[0]);
  };
  pass(x, true);
  pass(w, !int4);
  pass(scales, false);
  pass(yOut, true);
  if (int4) {
    args.push_back(cst(op.getGroupSize()));
    args.push_back(cst(op.getLayout()));
  }
  int64_t flags = 0;
  if (op.getXType().getElementType().isBF16())
    flags |= kXBf16;
  if (op.getInitType().getElementType().isBF16())
    flags |= kYBf16;
  if (op.getScalesType().getElementType().isBF16())
    flags |= kScalesBf16;
  args.push_back(cst(flags));

  func::FuncOp callee = flex::declareRuntimeFunction(
      module, int4 ? "flex_quant_matmul_i4" : "flex_quant_matmul_i8",
      int4 ? kNumI4Args : kNumI8Args);
  func::CallOp::create(rewriter, loc, callee, args);
  if (yOut != y)
    memref::CopyOp::create(rewriter, loc, yOut, y);
  for (Value t : temps)
    memref::DeallocOp::create(rewriter, loc, t);
  rewriter.eraseOp(op);
}

struct FlexQuantMatmulToCallsPass
    : public flex::impl::FlexQuantMatmulToCallsBase<
          FlexQuantMatmulToCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<flex::QuantMatmulOp> ops;
    module.walk([&](flex::QuantMatmulOp op) {
      if (isa<MemRefType>(op.getInit().getType()))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (flex::QuantMatmulOp op : ops)
      rewriteToCall(op, module, rewriter);
  }
};
} // namespace
