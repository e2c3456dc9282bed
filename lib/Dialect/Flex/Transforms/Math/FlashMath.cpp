//===- FlashMath.cpp - vectorizable exp and tree reductions ---------------===//
//
// exp for x <= 0 in plain arithmetic (vectorizable by LLVM, unlike the expf
// libcall): Cody-Waite range reduction x = k ln2 + r, |r| <= ln2 / 2, a
// degree-6 polynomial for e^r (Cephes expf coefficients, ~1 ulp), 2^k from
// the exponent bits, FMAs where they fuse. x < -87.33 (including -inf)
// gives 0 (the true value is below FLT_MIN); NaN propagates. Only used for
// x = s - max <= 0.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::flex;

Value mlir::flex::emitExpNonPositive(OpBuilder &b, Location loc, Value x) {
  // x: f32 or vector<..xf32>; constants are splat to its shape.
  Type f32 = x.getType(), i32 = b.getI32Type();
  auto vt = dyn_cast<VectorType>(f32);
  if (vt)
    i32 = VectorType::get(vt.getShape(), i32);
  auto splat = [&](Value s, Type ty) -> Value {
    if (!isa<VectorType>(ty))
      return s;
    return vector::BroadcastOp::create(b, loc, ty, s).getResult();
  };
  auto c = [&](double v) {
    return splat(
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v)).getResult(),
        f32);
  };
  auto ci = [&](int64_t v) {
    return splat(arith::ConstantIntOp::create(b, loc, v, 32).getResult(), i32);
  };
  auto fma = [&](Value a, Value x2, Value acc) -> Value {
    return math::FmaOp::create(b, loc, a, x2, acc);
  };
  // Below lo the result is 0: chosen by the final select, so x itself is
  // not clamped (k and the exponent bits of such lanes are never used; NaN
  // is not below lo and propagates). x <= 0 keeps k <= 0, so 2^k needs no
  // upper clamp either.
  Value under =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, c(-87.33654));
  Value kf = math::FloorOp::create(b, loc, fma(x, c(1.44269504088896341), c(0.5)));
  // r = x - k ln2 in two FMAs (ln2 split Cody-Waite style).
  Value r = fma(kf, c(-0.693359375), x);
  r = fma(kf, c(2.12194440e-4), r);
  double coeffs[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                     4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  Value p = c(coeffs[0]);
  for (int i = 1; i < 6; ++i)
    p = fma(p, r, c(coeffs[i]));
  Value r2 = arith::MulFOp::create(b, loc, r, r);
  p = fma(p, r2, r);
  p = arith::AddFOp::create(b, loc, p, c(1.0));
  Value ki = arith::FPToSIOp::create(b, loc, i32, kf);
  Value bits = arith::ShLIOp::create(
      b, loc, arith::AddIOp::create(b, loc, ki, ci(127)), ci(23));
  Value scale = arith::BitcastOp::create(b, loc, f32, bits);
  Value e = arith::MulFOp::create(b, loc, p, scale);
  return arith::SelectOp::create(b, loc, under, c(0.0), e);
}

/// Reduces a 1-D vector to a scalar with `comb` (applied to vectors and
/// scalars alike) by halving: log2(n) vector steps instead of a serial
/// chain (LLVM keeps strict FP order for a scalar add loop).
Value mlir::flex::treeReduce(OpBuilder &b, Location loc, Value v,
                        function_ref<Value(Value, Value)> comb) {
  int64_t n = cast<VectorType>(v.getType()).getNumElements();
  Value extra;
  while (n > 1) {
    if (n % 2) {
      Value last = vector::ExtractOp::create(b, loc, v, n - 1);
      extra = extra ? comb(extra, last) : last;
      v = vector::ExtractStridedSliceOp::create(b, loc, v, {0}, {n - 1}, {1});
      --n;
    }
    int64_t h = n / 2;
    Value lo = vector::ExtractStridedSliceOp::create(b, loc, v, {0}, {h}, {1});
    Value hi = vector::ExtractStridedSliceOp::create(b, loc, v, {h}, {h}, {1});
    v = comb(lo, hi);
    n = h;
  }
  Value r = vector::ExtractOp::create(b, loc, v, 0);
  return extra ? comb(r, extra) : r;
}

Value mlir::flex::emitIsNegInf(OpBuilder &b, Location loc, Value x) {
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, negInf);
}
