//===- ExpandMath.cpp - lower math ops LLVM IR cannot take ----------------===//
//
// flex-expand-math: MLIR 22.1.8's convert-math-to-llvm has no lowering for
// math.erf, math.erfc, math.cbrt, math.asinh, math.acosh and math.atanh;
// left in the module they make the JIT's LLVM IR translation fail. This
// pass rewrites them (scalars and vectors):
//   f32 erf/erfc/cbrt     -> MLIR's polynomial approximations
//   f16/bf16 (all six)    -> computed in f32, truncated back
//   asinh/acosh/atanh     -> log1p/log/sqrt expansions (below)
//   f64 erf/erfc/cbrt     -> calls to the C library, resolved by the JIT
//   exp (approximate-exp) -> as erf: f32 polynomial, f16/bf16 via f32
// and reports any of them that is left.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXEXPANDMATH
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// The ops this pass removes.
bool isTargetOp(Operation *op) {
  return isa<math::ErfOp, math::ErfcOp, math::CbrtOp, math::AsinhOp,
             math::AcoshOp, math::AtanhOp>(op);
}

bool isPolynomialTarget(StringRef name, bool withExp) {
  name.consume_front("math.");
  return name == "erf" || name == "erfc" || name == "cbrt" ||
         (withExp && name == "exp");
}

/// A float constant of `type` (scalar or vector of floats).
Value floatConst(OpBuilder &b, Location loc, Type type, double v) {
  Type elt = getElementTypeOrSelf(type);
  TypedAttr attr = b.getFloatAttr(elt, v);
  if (auto vt = dyn_cast<VectorType>(type))
    attr = DenseElementsAttr::get(vt, attr);
  return arith::ConstantOp::create(b, loc, type, attr);
}

/// Expression builder for one rewrite: float ops on `type`.
struct Fb {
  PatternRewriter &b;
  Location loc;
  Type type;

  Value c(double v) { return floatConst(b, loc, type, v); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value abs(Value x) { return math::AbsFOp::create(b, loc, x); }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  Value log(Value x) { return math::LogOp::create(b, loc, x); }
  Value copysign(Value x, Value s) {
    return math::CopySignOp::create(b, loc, x, s);
  }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  /// log(1 + x) without the cancellation of forming 1 + x for small x:
  /// log(u) * x / (u - 1) with u = 1 + x (exact when u - 1 == 0: x).
  Value log1p(Value x) {
    Value u = add(c(1.0), x);
    Value d = sub(u, c(1.0));
    Value r = mul(log(u), div(x, d));
    r = select(cmp(arith::CmpFPredicate::OEQ, d, c(0.0)), x, r);
    // u = +inf: log(u) (the ratio would be inf/inf).
    return select(cmp(arith::CmpFPredicate::OEQ, u, c(INFINITY)), u, r);
  }
  /// Beyond this magnitude asinh(x) and acosh(x) are log(2|x|) to within
  /// the precision of f64, and x*x may overflow.
  Value large() { return c(268435456.0); } // 2^28
  Value logTwice(Value a) { return add(log(a), c(M_LN2)); }
};

/// asinh(x) = sign(x) * log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|.
Value expandAsinh(Fb &f, Value x) {
  Value a = f.abs(x);
  Value a2 = f.mul(a, a);
  Value small =
      f.log1p(f.add(a, f.div(a2, f.add(f.c(1.0), f.sqrt(f.add(f.c(1.0), a2))))));
  Value big = f.cmp(arith::CmpFPredicate::OGT, a, f.large());
  return f.copysign(f.select(big, f.logTwice(a), small), x);
}

/// acosh(x) = log1p(t + sqrt(2t + t^2)), t = x - 1 (NaN for x < 1).
Value expandAcosh(Fb &f, Value x) {
  Value t = f.sub(x, f.c(1.0));
  Value small =
      f.log1p(f.add(t, f.sqrt(f.add(f.mul(f.c(2.0), t), f.mul(t, t)))));
  Value big = f.cmp(arith::CmpFPredicate::OGT, x, f.large());
  return f.select(big, f.logTwice(x), small);
}

/// atanh(x) = sign(x) * 0.5 * log1p(2a / (1 - a)), a = |x|.
Value expandAtanh(Fb &f, Value x) {
  Value a = f.abs(x);
  Value r = f.log1p(f.div(f.mul(f.c(2.0), a), f.sub(f.c(1.0), a)));
  return f.copysign(f.mul(f.c(0.5), r), x);
}

/// Rewrites a unary math op with one of the expansions above.
template <typename OpT, Value (*Expand)(Fb &, Value)>
struct ExpandUnary : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpT op, PatternRewriter &b) const override {
    Type type = op.getType();
    if (!isa<FloatType>(getElementTypeOrSelf(type)))
      return failure();
    Fb f{b, op.getLoc(), type};
    b.replaceOp(op, Expand(f, op.getOperand()));
    return success();
  }
};

/// f16/bf16 (scalar or vector): extend to f32, apply the op, truncate. The
/// rewrites above and upstream's approximations are then done in f32.
template <typename OpT>
struct ComputeInF32 : OpRewritePattern<OpT> {
  ComputeInF32(MLIRContext *ctx) : OpRewritePattern<OpT>(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(OpT op, PatternRewriter &b) const override {
    Type type = op.getType();
    auto elt = dyn_cast<FloatType>(getElementTypeOrSelf(type));
    if (!elt || elt.getWidth() >= 32)
      return failure();
    Type f32 = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(type))
      f32 = vt.clone(f32);
    Location loc = op.getLoc();
    Value x = arith::ExtFOp::create(b, loc, f32, op.getOperand());
    Value r = OpT::create(b, loc, x);
    b.replaceOpWithNewOp<arith::TruncFOp>(op, type, r);
    return success();
  }
};

/// Upstream's cbrt approximation gives NaN for +-inf: every cbrt gets
/// cbrt(+-inf) = +-inf selected around it before it is rewritten.
void guardCbrtInfinities(ModuleOp module) {
  module.walk([](math::CbrtOp op) {
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Location loc = op.getLoc();
    Value x = op.getOperand();
    Value inf = floatConst(b, loc, op.getType(), INFINITY);
    Value mag = math::AbsFOp::create(b, loc, x);
    Value isInf =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mag, inf);
    Value sel = arith::SelectOp::create(b, loc, isInf, x, op.getResult());
    op.getResult().replaceAllUsesExcept(sel, sel.getDefiningOp());
  });
}

/// Upstream's exp approximation clamps its argument to about [-87.8, 88.7]:
/// exp(+inf) or exp(100) would be 3.4e38 instead of +inf, and exp(-100) the
/// smallest normal float instead of a denormal near 0. Every f32/f16/bf16
/// exp gets +inf above ln(FLT_MAX) and 0 below ln(smallest denormal)
/// selected around it (compared in f32) before it is rewritten.
void guardExpRange(ModuleOp module) {
  module.walk([](math::ExpOp op) {
    Type type = op.getType();
    auto elt = dyn_cast<FloatType>(getElementTypeOrSelf(type));
    if (!elt || elt.getWidth() > 32)
      return;
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Location loc = op.getLoc();
    Value x = op.getOperand();
    Type f32 = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(type))
      f32 = vt.clone(f32);
    Value xf = elt.getWidth() == 32 ? x : arith::ExtFOp::create(b, loc, f32, x);
    Value big = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, xf,
                                      floatConst(b, loc, f32, 88.72283935546875));
    Value tiny = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, xf,
                                       floatConst(b, loc, f32, -103.972084045410));
    auto zeroed = arith::SelectOp::create(
        b, loc, tiny, floatConst(b, loc, type, 0.0), op.getResult());
    Value r = arith::SelectOp::create(b, loc, big,
                                      floatConst(b, loc, type, INFINITY), zeroed);
    op.getResult().replaceAllUsesExcept(r, zeroed);
  });
}

struct FlexExpandMathPass
    : public flex::impl::FlexExpandMathBase<FlexExpandMathPass> {
  using FlexExpandMathBase::FlexExpandMathBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    guardCbrtInfinities(module);
    if (approximateExp)
      guardExpRange(module);

    // 1. Polynomial approximations (f32; f16/bf16 via f32) and expansions.
    RewritePatternSet patterns(ctx);
    populateMathPolynomialApproximationPatterns(
        patterns,
        [&](StringRef name) { return isPolynomialTarget(name, approximateExp); });
    if (approximateExp)
      patterns.add<ComputeInF32<math::ExpOp>>(ctx);
    patterns.add<ComputeInF32<math::ErfOp>, ComputeInF32<math::ErfcOp>,
                 ComputeInF32<math::CbrtOp>, ComputeInF32<math::AsinhOp>,
                 ComputeInF32<math::AcoshOp>, ComputeInF32<math::AtanhOp>,
                 ExpandUnary<math::AsinhOp, expandAsinh>,
                 ExpandUnary<math::AcoshOp, expandAcosh>,
                 ExpandUnary<math::AtanhOp, expandAtanh>>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();

    // 2. What is left of erf/erfc/cbrt (f64): C library calls. Only these
    //    ops on f64 are illegal, so no other math op becomes a call.
    ConversionTarget target(*ctx);
    target.markUnknownOpDynamicallyLegal([](Operation *op) {
      return !isa<math::ErfOp, math::ErfcOp, math::CbrtOp>(op) ||
             !getElementTypeOrSelf(op->getResult(0).getType()).isF64();
    });
    RewritePatternSet libm(ctx);
    populateMathToLibmConversionPatterns(libm);
    (void)applyPartialConversion(module, target, std::move(libm));

    // 3. Anything still here cannot be translated to LLVM IR.
    module.walk([&](Operation *op) {
      if (isTargetOp(op)) {
        op->emitOpError() << "on " << op->getResult(0).getType()
                          << " has no lowering to LLVM in flex-expand-math";
        signalPassFailure();
      }
    });
  }
};

} // namespace
