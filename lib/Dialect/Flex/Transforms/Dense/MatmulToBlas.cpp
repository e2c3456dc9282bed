//===- MatmulToBlas.cpp - bufferized matmuls -> BLAS runtime calls --------===//
//
// flex-matmul-to-blas (Passes.td): linalg.matmul / batch_matmul on memrefs
// -> func.call @flex_gemm_f32 / @flex_gemm_bf16 of lib/Runtime/FlexGemm.c.
// Every operand is passed as (aligned pointer, offset, batch stride, row
// stride, column stride) in the product's own order: A as (b, m, k), B as
// (b, k, n), C as (b, m, n), whatever the memref layout and indexing maps;
// a loop dim an operand does not index has stride 0 (broadcast).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "RuntimeFunctions.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXMATMULTOBLAS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// Bits of the call's last argument (lib/Runtime/FlexGemm.c).
enum GemmFlags : int64_t { kAccumulate = 1, kOutputBf16 = 2 };
/// Arguments of the runtime functions: batch, M, N, K, then 5 per operand,
/// then the flags.
constexpr unsigned kNumGemmArgs = 4 + 3 * 5 + 1;

/// The runtime function for this product's element types, or "" when the
/// runtime has none (left to the loops).
StringRef gemmFunction(linalg::LinalgOp op) {
  Type a = getElementTypeOrSelf(op.getDpsInputs()[0].getType());
  Type b = getElementTypeOrSelf(op.getDpsInputs()[1].getType());
  Type c = getElementTypeOrSelf(op.getDpsInits()[0].getType());
  if (a != b)
    return "";
  if (a.isF32() && c.isF32())
    return "flex_gemm_f32";
  if (a.isBF16() && (c.isF32() || c.isBF16()))
    return "flex_gemm_bf16";
  return "";
}

/// Replaces `op` (loop dims: [b,] m, n, k) by the call; false when an
/// indexing map is not made of plain dims.
bool rewriteToCall(linalg::LinalgOp op, func::FuncOp callee,
                   RewriterBase &rewriter) {
  unsigned nLoops = op.getNumLoops();
  bool batched = nLoops == 4;
  // The product's dims in loop order.
  int64_t bDim = batched ? 0 : -1, mDim = nLoops - 3, nDim = nLoops - 2,
          kDim = nLoops - 1;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (AffineMap m : maps)
    for (AffineExpr e : m.getResults())
      if (!isa<AffineDimExpr>(e))
        return false;

  Value c = op.getDpsInits()[0];
  // A zero fill of C right before the product: C is overwritten instead.
  int64_t flags = flex::foldZeroFill(op, c, rewriter) ? 0 : kAccumulate;

  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);

  // Sizes: from the first operand that indexes each dim.
  SmallVector<Value> operands = {op.getDpsInputs()[0], op.getDpsInputs()[1],
                                 c};
  auto sizeOf = [&](int64_t dim) -> Value {
    if (dim < 0)
      return one;
    Value size = flex::loopDimSize(rewriter, loc, operands, maps, dim);
    return size ? size : one;
  };
  SmallVector<Value> args = {sizeOf(bDim), sizeOf(mDim), sizeOf(nDim),
                             sizeOf(kDim)};

  // Pointer, offset and the strides of the three dims each operand spans.
  int64_t dimsOf[3][3] = {{bDim, mDim, kDim}, {bDim, kDim, nDim},
                          {bDim, mDim, nDim}};
  for (auto [idx, v, m] : llvm::enumerate(operands, maps))
    flex::appendStridedOperand(rewriter, loc, v, m, dimsOf[idx], zero, args);

  if (getElementTypeOrSelf(c.getType()).isBF16())
    flags |= kOutputBf16;
  args.push_back(arith::ConstantIndexOp::create(rewriter, loc, flags));
  func::CallOp::create(rewriter, loc, callee, args);
  rewriter.eraseOp(op);
  return true;
}

struct FlexMatmulToBlasPass
    : public flex::impl::FlexMatmulToBlasBase<FlexMatmulToBlasPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::LinalgOp> ops;
    module.walk([&](Operation *op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) &&
          cast<linalg::LinalgOp>(op).hasPureBufferSemantics())
        ops.push_back(cast<linalg::LinalgOp>(op));
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      StringRef name = gemmFunction(op);
      if (name.empty())
        continue;
      rewriteToCall(
          op, flex::declareRuntimeFunction(module, name, kNumGemmArgs),
          rewriter);
    }
  }
};

} // namespace
