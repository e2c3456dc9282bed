//===- QuantMatmulToLinalg.cpp - flex.quant_matmul -> linalg.generic ------===//
//
// flex-quant-matmul-to-linalg (Reference/Passes.td): the reference lowering
// of flex.quant_matmul on tensors. One linalg.generic over (m, n, k) sums
// f32(x[m, k]) * w'[n, k] into an f32 zero fill, the weight dequantized in
// its body (int8: sitofp; int4: the nibble of the packed byte found by the
// layout's index arithmetic, a short last block's columns in pairs, then
// (q - 8) * scale + zero of its group); an
// elementwise generic then applies the int8 per-channel scale and rounds
// to the result type.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXQUANTMATMULTOLINALG
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// The packed nibble q[n, k] of the int4 weight `w` ([N, K/2] bytes) in
/// `layout`, as an f32 in [0, 15] (FlexQuantOps.td has the layouts). Where
/// the block may not divide N, `tailStart` is the first column of the
/// short last block (N - N mod BN) and `tailWidth` its columns, packed in
/// pairs; both null where BN divides N.
Value int4Nibble(OpBuilder &b, Location loc, Value w, Value n, Value k,
                 Value kSize, int64_t layout, Value tailStart,
                 Value tailWidth) {
  auto cst = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  int64_t bn = flex::QuantMatmulOp::blockColumns(layout), half = bn / 2;
  Value nb = arith::DivUIOp::create(b, loc, n, cst(bn));
  Value col = arith::RemUIOp::create(b, loc, n, cst(bn));
  Value i, high;
  if (layout == 0) { // pairs of neighbouring columns share a byte
    i = arith::DivUIOp::create(b, loc, col, cst(2));
    high = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, loc, col, cst(2)), cst(1));
  } else { // column c and c + BN/2 share a byte
    i = arith::RemUIOp::create(b, loc, col, cst(half));
    high = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, col,
                                 cst(half));
  }
  // Byte nb * K * BN/2 + k * BN/2 + i of the whole weight, as w[row, col].
  Value blockRows = arith::MulIOp::create(b, loc, nb, kSize);
  Value byte;
  if (!tailStart) {
    Value rowInBlocks = arith::AddIOp::create(b, loc, blockRows, k);
    Value rowStart = arith::MulIOp::create(b, loc, rowInBlocks, cst(half));
    byte = arith::AddIOp::create(b, loc, rowStart, i);
  } else {
    // In the short block: byte nb * K * BN/2 + k * width/2 + col / 2, the
    // high nibble for an odd col.
    Value tail = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, n,
                                       tailStart);
    Value pairByte = arith::DivUIOp::create(b, loc, col, cst(2));
    Value odd = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, loc, col, cst(2)), cst(1));
    i = arith::SelectOp::create(b, loc, tail, pairByte, i);
    high = arith::SelectOp::create(b, loc, tail, odd, high);
    Value kBytes = arith::SelectOp::create(
        b, loc, tail, arith::DivUIOp::create(b, loc, tailWidth, cst(2)),
        cst(half));
    Value blockStart = arith::MulIOp::create(b, loc, blockRows, cst(half));
    Value rowStart = arith::AddIOp::create(
        b, loc, blockStart, arith::MulIOp::create(b, loc, k, kBytes));
    byte = arith::AddIOp::create(b, loc, rowStart, i);
  }
  Value rowBytes = arith::DivUIOp::create(b, loc, kSize, cst(2));
  Value row = arith::DivUIOp::create(b, loc, byte, rowBytes);
  Value at = arith::RemUIOp::create(b, loc, byte, rowBytes);
  Value packed = tensor::ExtractOp::create(b, loc, w, ValueRange{row, at});
  Type i32 = b.getI32Type();
  Value word = arith::ExtUIOp::create(b, loc, i32, packed);
  Value shift = arith::SelectOp::create(
      b, loc, high, arith::ConstantIntOp::create(b, loc, i32, 4),
      arith::ConstantIntOp::create(b, loc, i32, 0));
  Value q = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, word, shift),
      arith::ConstantIntOp::create(b, loc, i32, 15));
  return arith::UIToFPOp::create(b, loc, b.getF32Type(), q);
}

void lower(flex::QuantMatmulOp op, RewriterBase &rewriter) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  MLIRContext *ctx = op.getContext();
  Value x = op.getX(), w = op.getW(), scales = op.getScales(),
        init = op.getInit();
  auto resultType = cast<RankedTensorType>(init.getType());
  Type f32 = rewriter.getF32Type();
  bool int4 = op.isInt4();
  int64_t groupSize = op.getGroupSize(), layout = op.getLayout();

  // The f32 accumulator: the op's init when it is f32 and nothing follows.
  bool epilogue = !int4 || !resultType.getElementType().isF32();
  Value accInit = init;
  if (epilogue) {
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < 2; ++d)
      if (resultType.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(rewriter, loc, init, d));
    accInit = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(),
                                      f32, dyn);
  }
  Value zero = arith::ConstantOp::create(rewriter, loc, f32,
                                         rewriter.getF32FloatAttr(0.0f));
  Value acc =
      linalg::FillOp::create(rewriter, loc, zero, accInit).getResult(0);
  Value kSize = tensor::DimOp::create(rewriter, loc, x, 1);
  // int4 with a short last block (BN not dividing N, or N unknown here).
  Value tailStart, tailWidth;
  if (int4) {
    int64_t bn = flex::QuantMatmulOp::blockColumns(layout);
    int64_t nStatic = cast<ShapedType>(w.getType()).getDimSize(0);
    if (ShapedType::isDynamic(nStatic) || nStatic % bn != 0) {
      Value nSize = tensor::DimOp::create(rewriter, loc, w, 0);
      tailWidth = arith::RemUIOp::create(
          rewriter, loc, nSize,
          arith::ConstantIndexOp::create(rewriter, loc, bn));
      tailStart = arith::SubIOp::create(rewriter, loc, nSize, tailWidth);
    }
  }

  AffineExpr m, n, k;
  bindDims(ctx, m, n, k);
  auto map = [&](ArrayRef<AffineExpr> e) {
    return AffineMap::get(3, 0, e, ctx);
  };
  SmallVector<Value> ins = {x};
  SmallVector<AffineMap> maps = {map({m, k})};
  if (!int4) {
    ins.push_back(w);
    maps.push_back(map({n, k}));
  }
  maps.push_back(map({m, n}));
  SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                            utils::IteratorType::parallel,
                                            utils::IteratorType::reduction};
  auto sum = linalg::GenericOp::create(
      rewriter, loc, TypeRange{acc.getType()}, ins, ValueRange{acc}, maps,
      iters, [&](OpBuilder &b, Location l, ValueRange args) {
        Value xv = toF32(b, l, args[0]);
        Value wv;
        if (!int4) {
          wv = arith::SIToFPOp::create(b, l, f32, args[1]);
        } else {
          Value ni = linalg::IndexOp::create(b, l, 1);
          Value ki = linalg::IndexOp::create(b, l, 2);
          Value q = int4Nibble(b, l, w, ni, ki, kSize, layout, tailStart,
                               tailWidth);
          Value g = arith::DivUIOp::create(
              b, l, ki, arith::ConstantIndexOp::create(b, l, groupSize));
          Value c0 = arith::ConstantIndexOp::create(b, l, 0);
          Value c1 = arith::ConstantIndexOp::create(b, l, 1);
          auto read = [&](Value j) {
            return toF32(b, l, tensor::ExtractOp::create(
                                   b, l, scales, ValueRange{g, ni, j}));
          };
          Value scale = read(c0);
          Value zp = read(c1);
          Value centered = arith::SubFOp::create(
              b, l, q,
              arith::ConstantOp::create(b, l, f32, b.getF32FloatAttr(8.0f)));
          wv = arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, centered, scale), zp);
        }
        Value prod = arith::MulFOp::create(b, l, xv, wv);
        linalg::YieldOp::create(
            b, l, ValueRange{arith::AddFOp::create(b, l, args.back(), prod)});
      });
  Value result = sum.getResult(0);

  if (epilogue) {
    AffineExpr i, j;
    bindDims(ctx, i, j);
    SmallVector<Value> eIns = {result};
    SmallVector<AffineMap> eMaps = {AffineMap::get(2, 0, {i, j}, ctx)};
    if (!int4) {
      eIns.push_back(scales);
      eMaps.push_back(AffineMap::get(2, 0, {j}, ctx));
    }
    eMaps.push_back(AffineMap::get(2, 0, {i, j}, ctx));
    Type outType = resultType.getElementType();
    auto ep = linalg::GenericOp::create(
        rewriter, loc, TypeRange{resultType}, eIns, ValueRange{init}, eMaps,
        {utils::IteratorType::parallel, utils::IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value v = args[0];
          if (!int4)
            v = arith::MulFOp::create(b, l, v, toF32(b, l, args[1]));
          if (outType != f32)
            v = arith::TruncFOp::create(b, l, outType, v);
          linalg::YieldOp::create(b, l, ValueRange{v});
        });
    result = ep.getResult(0);
  }
  rewriter.replaceOp(op, result);
}

struct FlexQuantMatmulToLinalgPass
    : public flex::impl::FlexQuantMatmulToLinalgBase<
          FlexQuantMatmulToLinalgPass> {
  void runOnOperation() override {
    SmallVector<flex::QuantMatmulOp> ops;
    getOperation().walk([&](flex::QuantMatmulOp op) {
      if (isa<RankedTensorType>(op.getInit().getType()))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (flex::QuantMatmulOp op : ops)
      lower(op, rewriter);
  }
};
} // namespace
