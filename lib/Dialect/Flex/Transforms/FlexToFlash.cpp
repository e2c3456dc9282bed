//===- FlexToFlash.cpp - flex.attention to a flash-style tiled loop nest --===//
//
// Lowers flex.attention on tensors (before bufferization) to
//
//   scf.forall (b, h, mt) in (B, Hq, Mp / Mt) shared_outs(out, lse, max) {
//     Q tile [Mt, E]; state mx [Mt] = -inf, l [Mt] = 0, acc [Mt, Ev] = 0
//     scf.for nt in [0, Np / Nt) iter_args(mx, l, acc, scratch...) {
//       (block classification: skip all-false blocks, no mask on all-true)
//       S  = Q . K^T tile                  linalg.generic (m, e, n)
//       S  = mask(score_mod(S * scale))   linalg.generic, global indices
//       bm = rowmax(S); mn = max(mx, bm); c = exp(mx - mn); l *= c
//       P  = exp(S - mn); l += rowsum(P); acc = acc * c + P . V
//     }
//     out = mx == -inf ? 0 : acc / l; lse, max in log2 units
//   }
//
// All tiles have static shapes: when M (N) is not a multiple of the tile,
// Q (K, V) are padded with zeros; padded key columns are masked to -inf and
// padded query rows are computed and dropped. The indices given to the
// regions are clamped to the valid range so captured tensors are never
// read out of bounds. K is transposed once ([.., E, Np]) so that the inner
// loop of the Q.K^T contraction runs over contiguous key positions.
//
// Nothing of size B*H*M*N is allocated.
//
// With `vectorize` (default) and rows of S that fit in registers
// (Nt <= 128), Q.K^T, the softmax update and P.V are vector-dialect
// micro-kernels on the tensors instead of linalg.generic: R rows of S (or
// acc) are 1-D vector<Nt (Ev) x f32> values carried in registers over the
// E (Nt) reduction loop, one broadcast-FMA per row and step (vector.fma
// with a row of K^T / V loaded once for the R rows; one builder for both,
// FlashMicroKernel.cpp, which splits Ev > 128 into column chunks of 64 so
// that head dims up to 256 stay vectorized); the softmax works row by row
// with halving (tree) reductions for max and sum, the vector polynomial
// exp, and acc * corr folded into the P.V accumulator's initial value.
// The scale / score_mod / mask_mod tile op stays a linalg.generic (any
// region), which LLVM vectorizes; math.tanh in it becomes a polynomial.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <limits>
#include <optional>

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXTOFLASH
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

namespace {

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;

//===----------------------------------------------------------------------===//
// Mask classification by interval arithmetic
//===----------------------------------------------------------------------===//

/// Is `region` (a mask_mod) made only of ops whose value range over a box
/// of indices we can bound? (integer arithmetic, cmpi, i1 logic).
static bool isAnalyzableMask(Region &region) {
  Block &block = region.front();
  for (Operation &op : block.without_terminator()) {
    for (Value operand : op.getOperands()) {
      // Values from above must be integers (treated as exact points).
      if (!operand.getType().isIntOrIndex())
        return false;
    }
    for (Value res : op.getResults())
      if (!res.getType().isIntOrIndex())
        return false;
    if (isa<arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
            arith::MinSIOp, arith::MaxSIOp, arith::AndIOp, arith::OrIOp,
            arith::XOrIOp>(op))
      continue;
    if (auto cast = dyn_cast<arith::IndexCastOp>(op))
      continue;
    if (isa<arith::ExtSIOp>(op))
      continue;
    if (isa<arith::FloorDivSIOp, arith::DivSIOp>(op)) {
      APInt c;
      if (!matchPattern(op.getOperand(1), m_ConstantInt(&c)) ||
          !c.isStrictlyPositive())
        return false;
      continue;
    }
    if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      switch (cmp.getPredicate()) {
      case arith::CmpIPredicate::eq:
      case arith::CmpIPredicate::ne:
      case arith::CmpIPredicate::slt:
      case arith::CmpIPredicate::sle:
      case arith::CmpIPredicate::sgt:
      case arith::CmpIPredicate::sge:
        continue;
      default:
        return false;
      }
    }
    return false;
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  return yield && yield.getValues().size() == 1 &&
         yield.getValues()[0].getType().isInteger(1);
}

/// Emits IR computing, for the box `args[i] in [lo[i], hi[i]]`, two i1
/// values (mustTrue, mustFalse) for the mask's result. The region must
/// satisfy isAnalyzableMask.
static std::pair<Value, Value>
emitMaskBounds(OpBuilder &b, Location loc, Region &region,
               ArrayRef<std::pair<Value, Value>> argRanges) {
  // Integer values map to an interval [lo, hi]; i1 values to (t, f) where
  // t: true on the whole box, f: false on the whole box.
  DenseMap<Value, std::pair<Value, Value>> range;
  Block &block = region.front();
  for (auto [arg, r] : llvm::zip_equal(block.getArguments(), argRanges))
    range[arg] = r;
  Value trueV = arith::ConstantIntOp::create(b, loc, 1, 1);
  auto notV = [&](Value x) {
    return arith::XOrIOp::create(b, loc, x, trueV).getResult();
  };
  auto andV = [&](Value x, Value y) {
    return arith::AndIOp::create(b, loc, x, y).getResult();
  };
  auto orV = [&](Value x, Value y) {
    return arith::OrIOp::create(b, loc, x, y).getResult();
  };
  auto get = [&](Value v) -> std::pair<Value, Value> {
    auto it = range.find(v);
    if (it != range.end())
      return it->second;
    // Defined above the region: an exact value.
    if (v.getType().isInteger(1))
      return {v, notV(v)};
    return {v, v};
  };
  auto minV = [&](Value x, Value y) {
    return arith::MinSIOp::create(b, loc, x, y).getResult();
  };
  auto maxV = [&](Value x, Value y) {
    return arith::MaxSIOp::create(b, loc, x, y).getResult();
  };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y).getResult();
  };
  using P = arith::CmpIPredicate;

  for (Operation &op : block.without_terminator()) {
    Value res = op.getResult(0);
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      Value v = b.clone(op)->getResult(0);
      range[res] = res.getType().isInteger(1) ? std::pair{v, notV(v)}
                                              : std::pair{v, v};
      continue;
    }
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op) &&
        res.getType().isInteger(1)) {
      auto [at, af] = get(op.getOperand(0));
      auto [bt, bf] = get(op.getOperand(1));
      if (isa<arith::AndIOp>(op))
        range[res] = {andV(at, bt), orV(af, bf)};
      else if (isa<arith::OrIOp>(op))
        range[res] = {orV(at, bt), andV(af, bf)};
      else
        range[res] = {orV(andV(at, bf), andV(af, bt)),
                      orV(andV(at, bt), andV(af, bf))};
      continue;
    }
    if (auto c = dyn_cast<arith::CmpIOp>(op)) {
      auto [alo, ahi] = get(c.getLhs());
      auto [blo, bhi] = get(c.getRhs());
      Value t, f;
      switch (c.getPredicate()) {
      case P::slt: // a < b everywhere iff ahi < blo
        t = cmp(P::slt, ahi, blo);
        f = cmp(P::sge, alo, bhi);
        break;
      case P::sle:
        t = cmp(P::sle, ahi, blo);
        f = cmp(P::sgt, alo, bhi);
        break;
      case P::sgt:
        t = cmp(P::sgt, alo, bhi);
        f = cmp(P::sle, ahi, blo);
        break;
      case P::sge:
        t = cmp(P::sge, alo, bhi);
        f = cmp(P::slt, ahi, blo);
        break;
      case P::eq:
      case P::ne: {
        Value allEq = andV(andV(cmp(P::eq, alo, ahi), cmp(P::eq, blo, bhi)),
                           cmp(P::eq, alo, blo));
        Value disjoint = orV(cmp(P::slt, ahi, blo), cmp(P::slt, bhi, alo));
        t = c.getPredicate() == P::eq ? allEq : disjoint;
        f = c.getPredicate() == P::eq ? disjoint : allEq;
        break;
      }
      default:
        llvm_unreachable("filtered by isAnalyzableMask");
      }
      range[res] = {t, f};
      continue;
    }
    // Integer arithmetic on intervals.
    auto [alo, ahi] = get(op.getOperand(0));
    if (isa<arith::IndexCastOp, arith::ExtSIOp>(op)) {
      Type ty = res.getType();
      IRMapping m1, m2;
      m1.map(op.getOperand(0), alo);
      m2.map(op.getOperand(0), ahi);
      range[res] = {b.clone(op, m1)->getResult(0),
                    b.clone(op, m2)->getResult(0)};
      (void)ty;
      continue;
    }
    auto [blo, bhi] = get(op.getOperand(1));
    if (isa<arith::AddIOp>(op)) {
      range[res] = {arith::AddIOp::create(b, loc, alo, blo),
                    arith::AddIOp::create(b, loc, ahi, bhi)};
    } else if (isa<arith::SubIOp>(op)) {
      range[res] = {arith::SubIOp::create(b, loc, alo, bhi),
                    arith::SubIOp::create(b, loc, ahi, blo)};
    } else if (isa<arith::MulIOp>(op)) {
      Value p1 = arith::MulIOp::create(b, loc, alo, blo);
      Value p2 = arith::MulIOp::create(b, loc, alo, bhi);
      Value p3 = arith::MulIOp::create(b, loc, ahi, blo);
      Value p4 = arith::MulIOp::create(b, loc, ahi, bhi);
      range[res] = {minV(minV(p1, p2), minV(p3, p4)),
                    maxV(maxV(p1, p2), maxV(p3, p4))};
    } else if (isa<arith::MinSIOp>(op)) {
      range[res] = {minV(alo, blo), minV(ahi, bhi)};
    } else if (isa<arith::MaxSIOp>(op)) {
      range[res] = {maxV(alo, blo), maxV(ahi, bhi)};
    } else if (isa<arith::FloorDivSIOp, arith::DivSIOp>(op)) {
      // Monotone non-decreasing for a positive constant divisor.
      IRMapping m1, m2;
      m1.map(op.getOperand(0), alo);
      m2.map(op.getOperand(0), ahi);
      range[res] = {b.clone(op, m1)->getResult(0),
                    b.clone(op, m2)->getResult(0)};
    } else {
      // Integer (non-i1) and/or/xor: not monotone; filtered out earlier
      // only for i1, so be conservative: unknown over the full range is
      // not representable -> treat as exact only when the box is a point.
      llvm_unreachable("filtered by isAnalyzableMask");
    }
  }
  Value yielded = cast<YieldOp>(block.getTerminator()).getValues()[0];
  return get(yielded);
}

/// isAnalyzableMask also accepts and/or/xor on wider integers; reject those.
static bool isAnalyzableMaskStrict(Region &region) {
  if (!isAnalyzableMask(region))
    return false;
  for (Operation &op : region.front().without_terminator())
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op) &&
        !op.getResult(0).getType().isInteger(1))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// exp for x <= 0 in plain arithmetic (vectorizable by LLVM, unlike the expf
// libcall): Cody-Waite range reduction x = k ln2 + r, |r| <= ln2 / 2, a
// degree-6 polynomial for e^r (Cephes expf coefficients, ~1 ulp), 2^k from
// the exponent bits. x < -87.33 (including -inf) gives 0 (the true value is
// below FLT_MIN); NaN propagates. Only used for x = s - max <= 0.
//===----------------------------------------------------------------------===//
static Value emitExpNonPositive(OpBuilder &b, Location loc, Value x) {
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
  Value lo = c(-87.33654);
  Value under = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, lo);
  // Clamp to [lo, 0] with compare+select (llvm.maximum/minimum may become
  // libcalls the JIT cannot resolve); a NaN x stays NaN.
  Value xc = arith::SelectOp::create(b, loc, under, lo, x);
  Value pos = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, xc,
                                    c(0.0));
  xc = arith::SelectOp::create(b, loc, pos, c(0.0), xc);
  Value kf = math::FloorOp::create(
      b, loc,
      arith::AddFOp::create(
          b, loc, arith::MulFOp::create(b, loc, xc, c(1.44269504088896341)),
          c(0.5)));
  Value r = arith::SubFOp::create(
      b, loc, xc, arith::MulFOp::create(b, loc, kf, c(0.693359375)));
  r = arith::SubFOp::create(b, loc, r,
                            arith::MulFOp::create(b, loc, kf, c(-2.12194440e-4)));
  double coeffs[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                     4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  Value p = c(coeffs[0]);
  for (int i = 1; i < 6; ++i)
    p = math::FmaOp::create(b, loc, p, r, c(coeffs[i]));
  Value r2 = arith::MulFOp::create(b, loc, r, r);
  p = math::FmaOp::create(b, loc, p, r2, r);
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
static Value treeReduce(OpBuilder &b, Location loc, Value v,
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

//===----------------------------------------------------------------------===//
// The lowering
//===----------------------------------------------------------------------===//

struct FlashOptions {
  int64_t tileM = 0, tileN = 0;
  bool blockSparsity = true, denseClassify = true, fastExp = true,
       vectorize = true;
};

class FlashLowering {
public:
  FlashLowering(AttentionOp op, const FlashOptions &opts)
      : op(op), opts(opts), b(op), loc(op.getLoc()) {}

  /// Returns failure() with a diagnostic on malformed input, success() and
  /// `lowered = false` when the op is left for flex-to-loops.
  LogicalResult run(bool &lowered);
  /// The loop nest built by run() (when lowered).
  scf::ForallOp forallOp;

private:
  AttentionOp op;
  const FlashOptions &opts;
  IRRewriter b;
  Location loc;

  // Shapes.
  int64_t E = 0, Ev = 0, Mt = 0, Nt = 0;
  bool padM = false, padN = false;
  Type elt, f32;
  Value M, N, Mp, Np, Bq, Hq, BkvDim;
  Value Mm1, Nm1; // M - 1, N - 1 (for clamping region indices)
  Value qP, kT, vP;
  int64_t G = 1;

  Value cIdx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value cF(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value dim(Value v, int64_t d) {
    return tensor::DimOp::create(b, loc, v, d);
  }
  Value pad(Value src, int64_t d, Value padded, Type padTy);
  Value inlineRegion(OpBuilder &nb, Region &region, ValueRange args);
  Value emptyF32(ArrayRef<int64_t> shape) {
    return tensor::EmptyOp::create(b, loc, shape, f32);
  }
  Value fill(Value init, double v) {
    return linalg::FillOp::create(b, loc, ValueRange{cF(v)}, ValueRange{init})
        .getResult(0);
  }
  Value emitScores(Value s, Value m0, Value n0, Value gB, Value gH,
                   bool withMask);
};

Value FlashLowering::pad(Value src, int64_t d, Value padded, Type padTy) {
  auto srcTy = cast<RankedTensorType>(src.getType());
  SmallVector<OpFoldResult> low(srcTy.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> high(srcTy.getRank(), b.getIndexAttr(0));
  Value cur = srcTy.isDynamicDim(d) ? dim(src, d) : cIdx(srcTy.getDimSize(d));
  high[d] = getAsOpFoldResult(
      b.createOrFold<arith::SubIOp>(loc, padded, cur));
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
  return tensor::PadOp::create(b, loc, padTy, src, low, high, zero);
}

Value FlashLowering::inlineRegion(OpBuilder &nb, Region &region,
                                  ValueRange args) {
  return inlineModifier(nb, region, args);
}

/// s: tensor<Mt x Nt x f32> holding q.k; returns the scaled, modified,
/// masked scores (in place).
Value FlashLowering::emitScores(Value s, Value m0, Value n0, Value gB,
                                Value gH, bool withMask) {
  MLIRContext *ctx = b.getContext();
  AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
  Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  Value negInf = cF(-std::numeric_limits<float>::infinity());
  bool hasScore = op.hasScoreMod();
  bool hasMask = withMask && op.hasMaskMod();
  Value mOff = op.getOffsets().empty() ? Value() : op.getOffsets()[2];
  auto gen = linalg::GenericOp::create(
      b, loc, TypeRange{s.getType()}, ValueRange{}, ValueRange{s},
      ArrayRef<AffineMap>{id2}, ArrayRef<IteratorType>{kPar, kPar},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = arith::MulFOp::create(nb, l, args[0], scale);
        if (hasScore || hasMask || padN) {
          Value im = linalg::IndexOp::create(nb, l, 0);
          Value in = linalg::IndexOp::create(nb, l, 1);
          Value mLoc = arith::AddIOp::create(nb, l, m0, im);
          if (padM)
            mLoc = arith::MinSIOp::create(nb, l, mLoc, Mm1);
          Value gm = mOff ? arith::AddIOp::create(nb, l, mLoc, mOff).getResult()
                          : mLoc;
          Value nLoc = arith::AddIOp::create(nb, l, n0, in);
          Value gn = padN ? arith::MinSIOp::create(nb, l, nLoc, Nm1).getResult()
                          : nLoc;
          if (hasScore)
            x = inlineRegion(nb, op.getScoreMod(), {x, gB, gH, gm, gn});
          if (hasMask) {
            Value keep = inlineRegion(nb, op.getMaskMod(), {gB, gH, gm, gn});
            x = arith::SelectOp::create(nb, l, keep, x, negInf);
          }
          if (padN) {
            Value valid = arith::CmpIOp::create(
                nb, l, arith::CmpIPredicate::slt, nLoc, N);
            x = arith::SelectOp::create(nb, l, valid, x, negInf);
          }
        }
        linalg::YieldOp::create(nb, l, x);
      });
  return gen.getResult(0);
}

LogicalResult FlashLowering::run(bool &lowered) {
  lowered = false;
  if (!op.hasTensorSemantics())
    return success(); // flex-to-loops handles memrefs.
  if (op.hasBlockTensors()) {
    op.emitRemark("flex-to-flash: block tensors (kv_blocks) are not tiled "
                  "yet; left for flex-to-loops");
    return success();
  }
  auto qTy = cast<RankedTensorType>(op.getQuery().getType());
  auto kTy = cast<RankedTensorType>(op.getKey().getType());
  auto vTy = cast<RankedTensorType>(op.getValue().getType());
  auto oTy = cast<RankedTensorType>(op.getOutput().getType());
  if (qTy.getRank() != 4 || kTy.getRank() != 4 || vTy.getRank() != 4 ||
      oTy.getRank() != 4)
    return op.emitOpError("flex-to-flash expects rank-4 query/key/value/"
                          "output");
  if (qTy.isDynamicDim(3) || vTy.isDynamicDim(3)) {
    op.emitRemark("flex-to-flash: dynamic head dimension E/Ev; left for "
                  "flex-to-loops");
    return success();
  }
  E = qTy.getDimSize(3);
  Ev = vTy.getDimSize(3);
  elt = qTy.getElementType();
  f32 = b.getF32Type();
  // Without kv_group_size, dynamic head counts leave G = Hq / Hkv unknown
  // here (getGroupSize() would say 1 and read past the kv heads); the
  // scalar reference computes it at run time.
  if (!op.getKvGroupSize() && (qTy.isDynamicDim(1) || kTy.isDynamicDim(1))) {
    op.emitRemark("flex-to-flash: dynamic head counts without kv_group_size; "
                  "left for flex-to-loops");
    return success();
  }
  G = op.getGroupSize();
  if (G <= 0)
    return op.emitOpError("flex-to-flash: invalid kv group size ") << G;

  b.setInsertionPoint(op);
  MLIRContext *ctx = b.getContext();
  int64_t mStatic = qTy.getDimSize(2), nStatic = kTy.getDimSize(2);

  // Tile sizes (static): 64x64 by default; a dimension smaller than the
  // tile shrinks it (decode: M = 1 gives Mt = 1, and then a longer N-tile).
  Mt = opts.tileM > 0 ? opts.tileM : 64;
  if (!ShapedType::isDynamic(mStatic) && mStatic > 0 && mStatic < Mt)
    Mt = mStatic;
  Nt = opts.tileN > 0 ? opts.tileN : (Mt <= 16 ? 128 : 64);
  if (!ShapedType::isDynamic(nStatic) && nStatic > 0 && nStatic < Nt)
    Nt = nStatic;
  padM = ShapedType::isDynamic(mStatic) || mStatic % Mt != 0;
  padN = ShapedType::isDynamic(nStatic) || nStatic % Nt != 0;

  M = qTy.isDynamicDim(2) ? dim(op.getQuery(), 2) : cIdx(mStatic);
  N = kTy.isDynamicDim(2) ? dim(op.getKey(), 2) : cIdx(nStatic);
  Bq = qTy.isDynamicDim(0) ? dim(op.getQuery(), 0) : cIdx(qTy.getDimSize(0));
  Hq = qTy.isDynamicDim(1) ? dim(op.getQuery(), 1) : cIdx(qTy.getDimSize(1));
  Value one = cIdx(1), zeroI = cIdx(0);
  auto roundUp = [&](Value x, int64_t t) {
    Value tv = cIdx(t);
    Value q = b.createOrFold<arith::CeilDivUIOp>(loc, x, tv);
    return b.createOrFold<arith::MulIOp>(loc, q, tv);
  };
  Mp = padM ? roundUp(M, Mt) : M;
  Np = padN ? roundUp(N, Nt) : N;
  Mm1 = b.createOrFold<arith::SubIOp>(loc, M, one);
  Nm1 = b.createOrFold<arith::SubIOp>(loc, N, one);
  auto paddedShape = [&](RankedTensorType t, int64_t d, bool isPadded,
                         int64_t staticSize, int64_t tile) {
    SmallVector<int64_t> shape(t.getShape());
    if (isPadded)
      shape[d] = ShapedType::isDynamic(staticSize)
                     ? ShapedType::kDynamic
                     : llvm::divideCeil(staticSize, tile) * tile;
    return shape;
  };

  // Padded operands.
  qP = op.getQuery();
  auto qPShape = paddedShape(qTy, 2, padM, mStatic, Mt);
  if (padM)
    qP = pad(qP, 2, Mp, RankedTensorType::get(qPShape, elt));
  Value kP = op.getKey();
  vP = op.getValue();
  auto kPShape = paddedShape(kTy, 2, padN, nStatic, Nt);
  auto vPShape = paddedShape(vTy, 2, padN, nStatic, Nt);
  if (padN) {
    kP = pad(kP, 2, Np, RankedTensorType::get(kPShape, elt));
    vP = pad(vP, 2, Np, RankedTensorType::get(vPShape, elt));
  }
  // K^T: [Bkv, Hkv, E, Np], except for the vector kernel of few query rows
  // (decode), which takes dot products with rows of K as they are (the
  // transpose would cost as much as the attention).
  // (The P.V kernel splits rows of V into column chunks, so any Ev stays
  // vectorized; rows of S are one vector in the softmax, hence Nt <= 128.)
  bool vec = opts.vectorize && Nt <= kMaxFmaChunk;
  bool kRows = vec && Mt <= 2 && E <= 128;
  if (kRows) {
    kT = kP;
  } else {
    SmallVector<int64_t> ktShape = {kPShape[0], kPShape[1], E, kPShape[2]};
    SmallVector<Value> dyn;
    if (ShapedType::isDynamic(ktShape[0]))
      dyn.push_back(dim(kP, 0));
    if (ShapedType::isDynamic(ktShape[1]))
      dyn.push_back(dim(kP, 1));
    if (ShapedType::isDynamic(ktShape[3]))
      dyn.push_back(Np);
    Value init = tensor::EmptyOp::create(b, loc, ktShape, elt, dyn);
    // One transpose per (batch, kv head) in an scf.forall, so that it runs
    // in parallel with the attention loop nest when that is parallel.
    auto ofr = [&](int64_t d) -> OpFoldResult {
      if (d == 2)
        return getAsOpFoldResult(Np);
      if (ShapedType::isDynamic(kPShape[d]))
        return OpFoldResult(dim(kP, d));
      return b.getIndexAttr(kPShape[d]);
    };
    OpFoldResult one1 = b.getIndexAttr(1), zero1 = b.getIndexAttr(0);
    OpFoldResult eA = b.getIndexAttr(E), npA = ofr(2);
    auto tf = scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{ofr(0), ofr(1)},
                                    ValueRange{init}, std::nullopt);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(tf.getTerminator());
      Value tb = tf.getInductionVars()[0], th = tf.getInductionVars()[1];
      int64_t npS = kPShape[2];
      SmallVector<OpFoldResult> unit(4, one1);
      Value src = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({npS, E}, elt), kP,
          {tb, th, zero1, zero1}, {one1, one1, npA, eA}, unit);
      Value dst = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({E, npS}, elt),
          tf.getRegionIterArgs()[0], {tb, th, zero1, zero1},
          {one1, one1, eA, npA}, unit);
      Value t = linalg::TransposeOp::create(b, loc, src, dst,
                                            ArrayRef<int64_t>{1, 0})
                    .getResult()[0];
      b.setInsertionPointToEnd(tf.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(
          b, loc, t, tf.getRegionIterArgs()[0],
          ArrayRef<OpFoldResult>{tb, th, zero1, zero1},
          ArrayRef<OpFoldResult>{one1, one1, eA, npA}, unit);
    }
    kT = tf.getResult(0);
  }
  BkvDim = kTy.isDynamicDim(0) ? dim(op.getKey(), 0) : Value();

  // Destinations (padded when M is).
  auto makeDest = [&](Value init) -> Value {
    if (!init)
      return Value();
    if (!padM)
      return init;
    auto t = cast<RankedTensorType>(init.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[2] = qPShape[2];
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (ShapedType::isDynamic(shape[d]))
        dyn.push_back(d == 2 ? Mp : dim(init, d));
    return tensor::EmptyOp::create(b, loc, shape, t.getElementType(), dyn);
  };
  Value outD = makeDest(op.getOutput());
  Value lseD = makeDest(op.getLogsumexp());
  Value maxD = makeDest(op.getMaxScores());
  SmallVector<Value> dests = {outD};
  if (lseD)
    dests.push_back(lseD);
  if (maxD)
    dests.push_back(maxD);

  Value nMTiles = b.createOrFold<arith::DivUIOp>(loc, Mp, cIdx(Mt));
  Value nNTiles = b.createOrFold<arith::DivUIOp>(loc, Np, cIdx(Nt));
  SmallVector<OpFoldResult> ubs = {Bq, Hq, nMTiles};
  auto forall = scf::ForallOp::create(b, loc, ubs, dests, std::nullopt);
  Block *body = forall.getBody();
  ValueRange ivs = forall.getInductionVars();
  ValueRange sharedOuts = forall.getRegionIterArgs();
  b.setInsertionPoint(forall.getTerminator());

  Value bi = ivs[0], hi = ivs[1], mt = ivs[2];
  Value m0 = arith::MulIOp::create(b, loc, mt, cIdx(Mt));
  Value gB = bi, gH = hi;
  if (!op.getOffsets().empty()) {
    gB = arith::AddIOp::create(b, loc, bi, op.getOffsets()[0]);
    gH = arith::AddIOp::create(b, loc, hi, op.getOffsets()[1]);
  }
  Value kb = bi;
  if (!kTy.isDynamicDim(0) && kTy.getDimSize(0) == 1) {
    kb = zeroI;
  } else if (BkvDim) {
    Value isOne =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, BkvDim, one);
    kb = arith::SelectOp::create(b, loc, isOne, zeroI, bi);
  }
  Value kh = arith::DivUIOp::create(b, loc, gH, cIdx(G));

  auto o = [&](Value v) -> OpFoldResult { return v; };
  auto a = [&](int64_t v) -> OpFoldResult { return b.getIndexAttr(v); };
  SmallVector<OpFoldResult> unit4(4, a(1));
  Value qTile = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({Mt, E}, elt), qP,
      {o(bi), o(hi), o(m0), a(0)}, {a(1), a(1), a(Mt), a(E)}, unit4);

  float negInfF = -std::numeric_limits<float>::infinity();
  Value mxInit = fill(emptyF32({Mt}), negInfF);
  Value lInit = fill(emptyF32({Mt}), 0.0);
  Value accInit = fill(emptyF32({Mt, Ev}), 0.0);
  Value sScr = emptyF32({Mt, Nt});
  Value bmScr = emptyF32({Mt});
  Value corrScr = emptyF32({Mt});

  AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, ctx);
  AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
             d2 = getAffineDimExpr(2, ctx);
  AffineMap row2 = AffineMap::get(2, 0, {d0}, ctx); // (m, n) -> (m)
  auto fm = arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::contract);
  auto toF32 = [&](OpBuilder &nb, Location l, Value x) -> Value {
    if (x.getType() == f32)
      return x;
    return arith::ExtFOp::create(nb, l, f32, x);
  };
  auto isNegInf = [&](OpBuilder &nb, Location l, Value x) {
    Value ni = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(negInfF));
    return arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, x, ni)
        .getResult();
  };

  // Vector micro-kernels (vector dialect on tensors, bufferized with the
  // rest): rows of a tile are 1-D vectors of f32, kept in registers over
  // the reduction loop (FlashMicroKernel.cpp). Otherwise the
  // linalg.generic tile ops below.
  auto vecF32 = [&](int64_t n) { return VectorType::get({n}, f32); };
  auto readRow = readF32Row;
  auto writeRow = [&](OpBuilder &nb, Location l, Value v, Value t, Value i,
                      Value j) -> Value {
    return vector::TransferWriteOp::create(nb, l, v, t, ValueRange{i, j},
                                           ArrayRef<bool>{true})
        .getResult();
  };
  auto bcast = [&](OpBuilder &nb, Location l, Value x, int64_t n) -> Value {
    return vector::BroadcastOp::create(nb, l, vecF32(n), x);
  };
  // S[m, :] = sum_e Q[m, e] * KT[e, :].
  auto emitQKVec = [&](Value qT, Value kTl, Value sInit) -> Value {
    return buildBroadcastFmaKernel(b, loc, {qT, kTl, sInit, Value(), Mt, E, Nt});
  };
  // Few query rows: S[m, n] = sum(Q[m, :] * K[n, :]) (tree sum), K as is.
  auto emitQKRows = [&](Value qT, Value kTl, Value sInit) -> Value {
    Value c0 = cIdx(0), c1 = cIdx(1);
    SmallVector<Value> qRows;
    for (int64_t r = 0; r < Mt; ++r)
      qRows.push_back(readRow(b, loc, qT, cIdx(r), c0, E));
    auto nLp = scf::ForOp::create(
        b, loc, c0, cIdx(Nt), c1, ValueRange{sInit},
        [&](OpBuilder &nb, Location l, Value n, ValueRange iter) {
          Value kv = readRow(nb, l, kTl, n, c0, E);
          Value sv = iter[0];
          for (int64_t r = 0; r < Mt; ++r) {
            Value prod = arith::MulFOp::create(nb, l, qRows[r], kv);
            Value d = treeReduce(nb, l, prod, [&](Value x, Value y) -> Value {
              return arith::AddFOp::create(nb, l, x, y);
            });
            sv = tensor::InsertOp::create(
                nb, l, d, sv,
                ValueRange{arith::ConstantIndexOp::create(nb, l, r), n});
          }
          scf::YieldOp::create(nb, l, sv);
        });
    return nLp.getResult(0);
  };
  // Per row: bm = max S; mn = max(mx, bm); corr = exp(mx - mn) (1 while all
  // -inf); P = exp(S - mn) (0 while all -inf); l = l * corr + sum P.
  // Returns {P, mn, l, corr}.
  auto emitSoftmaxVec = [&](Value sT, Value mxT, Value lT,
                            Value corrT) -> SmallVector<Value> {
    Value c0 = cIdx(0), c1 = cIdx(1);
    auto loop = scf::ForOp::create(
        b, loc, c0, cIdx(Mt), c1, ValueRange{sT, mxT, lT, corrT},
        [&](OpBuilder &nb, Location l, Value m, ValueRange it) {
          Value row = readRow(nb, l, it[0], m, c0, Nt);
          auto maxC = [&](Value x, Value y) -> Value {
            Value gt = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::UGT,
                                             x, y);
            return arith::SelectOp::create(nb, l, gt, x, y);
          };
          auto addC = [&](Value x, Value y) -> Value {
            return arith::AddFOp::create(nb, l, x, y);
          };
          Value bmv = treeReduce(nb, l, row, maxC);
          Value mold = tensor::ExtractOp::create(nb, l, it[1], ValueRange{m});
          Value lold = tensor::ExtractOp::create(nb, l, it[2], ValueRange{m});
          Value mn = maxC(bmv, mold);
          Value allMasked = isNegInf(nb, l, mn);
          Value diff = arith::SubFOp::create(nb, l, mold, mn);
          Value corr = opts.fastExp
                           ? emitExpNonPositive(nb, l, diff)
                           : math::ExpOp::create(nb, l, diff).getResult();
          Value oneF = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(1));
          corr = arith::SelectOp::create(nb, l, allMasked, oneF, corr);
          Value d = arith::SubFOp::create(nb, l, row, bcast(nb, l, mn, Nt));
          Value pv = opts.fastExp ? emitExpNonPositive(nb, l, d)
                                  : math::ExpOp::create(nb, l, d).getResult();
          Value zeroV = arith::ConstantOp::create(
              nb, l,
              DenseElementsAttr::get(vecF32(Nt), nb.getF32FloatAttr(0.0)));
          pv = arith::SelectOp::create(nb, l, allMasked, zeroV, pv);
          Value lnew = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, lold, corr),
              treeReduce(nb, l, pv, addC));
          Value pT = writeRow(nb, l, pv, it[0], m, c0);
          Value mxN = tensor::InsertOp::create(nb, l, mn, it[1], ValueRange{m});
          Value lN = tensor::InsertOp::create(nb, l, lnew, it[2], ValueRange{m});
          Value cN = tensor::InsertOp::create(nb, l, corr, it[3], ValueRange{m});
          scf::YieldOp::create(nb, l, ValueRange{pT, mxN, lN, cN});
        });
    return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
            loop.getResult(3)};
  };
  // acc[m, :] = acc[m, :] * corr[m] + sum_n P[m, n] * V[n, :].
  auto emitPVVec = [&](Value pT, Value vTl, Value accT, Value corrT) -> Value {
    return buildBroadcastFmaKernel(b, loc, {pT, vTl, accT, corrT, Mt, Nt, Ev});
  };

  // Block classification region args: (b, h, q_idx, kv_idx) ranges.
  bool classify = opts.blockSparsity && op.hasMaskMod();
  bool analytic = classify && isAnalyzableMaskStrict(op.getMaskMod());
  bool dense = classify && !analytic && opts.denseClassify;
  Value mOff = op.getOffsets().empty() ? Value() : op.getOffsets()[2];
  // Row range of this M-tile, clamped to valid rows, global.
  Value mLo = m0, mHi;
  if (classify) {
    mHi = arith::AddIOp::create(b, loc, m0, cIdx(Mt - 1));
    if (padM)
      mHi = arith::MinSIOp::create(b, loc, mHi, Mm1);
    if (mOff) {
      mLo = arith::AddIOp::create(b, loc, m0, mOff);
      mHi = arith::AddIOp::create(b, loc, mHi, mOff);
    }
  }

  auto nLoop = scf::ForOp::create(
      b, loc, zeroI, nNTiles, one,
      ValueRange{mxInit, lInit, accInit, sScr, bmScr, corrScr});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(nLoop.getBody());
    Value j = nLoop.getInductionVar();
    ValueRange st = nLoop.getRegionIterArgs();
    Value n0 = arith::MulIOp::create(b, loc, j, cIdx(Nt));

    Value live, full;
    if (analytic || dense) {
      Value nHi = arith::AddIOp::create(b, loc, n0, cIdx(Nt - 1));
      if (padN)
        nHi = arith::MinSIOp::create(b, loc, nHi, Nm1);
      if (analytic) {
        auto [t, f] = emitMaskBounds(
            b, loc, op.getMaskMod(),
            {{gB, gB}, {gH, gH}, {mLo, mHi}, {n0, nHi}});
        Value trueV = arith::ConstantIntOp::create(b, loc, 1, 1);
        live = arith::XOrIOp::create(b, loc, f, trueV);
        full = t;
      } else {
        // Dense pre-pass: any / all kept over the block's valid entries.
        // (i8 accumulators: i1 memrefs do not lower to LLVM reliably.)
        auto i8 = b.getI8Type();
        auto flag = [&](int64_t v) {
          Value init = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, i8);
          return linalg::FillOp::create(
                     b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, v, 8)},
                     ValueRange{init})
              .getResult(0);
        };
        Value anyInit = flag(0), allInit = flag(1);
        AffineMap scalar = AffineMap::get(2, 0, {}, ctx);
        auto pre = linalg::GenericOp::create(
            b, loc, TypeRange{anyInit.getType(), allInit.getType()},
            // The (unread) score scratch gives the loop bounds [Mt, Nt].
            ValueRange{st[3]}, ValueRange{anyInit, allInit},
            ArrayRef<AffineMap>{id2, scalar, scalar},
            ArrayRef<IteratorType>{kRed, kRed},
            [&](OpBuilder &nb, Location l, ValueRange bargs) {
              ValueRange args = bargs.drop_front();
              Value im = linalg::IndexOp::create(nb, l, 0);
              Value in = linalg::IndexOp::create(nb, l, 1);
              Value mLoc = arith::AddIOp::create(nb, l, m0, im);
              if (padM)
                mLoc = arith::MinSIOp::create(nb, l, mLoc, Mm1);
              Value gm = mOff ? arith::AddIOp::create(nb, l, mLoc, mOff)
                                    .getResult()
                              : mLoc;
              Value nLoc = arith::AddIOp::create(nb, l, n0, in);
              Value gn = padN ? arith::MinSIOp::create(nb, l, nLoc, Nm1)
                                    .getResult()
                              : nLoc;
              Value keep =
                  inlineRegion(nb, op.getMaskMod(), {gB, gH, gm, gn});
              Value keepAny = keep, keepAll = keep;
              if (padN) {
                // Padded columns: neither kept nor a reason for "not all".
                Value valid = arith::CmpIOp::create(
                    nb, l, arith::CmpIPredicate::slt, nLoc, N);
                Value t = arith::ConstantIntOp::create(nb, l, 1, 1);
                Value invalid = arith::XOrIOp::create(nb, l, valid, t);
                keepAny = arith::AndIOp::create(nb, l, keep, valid);
                keepAll = arith::OrIOp::create(nb, l, keep, invalid);
              }
              Value anyV = arith::OrIOp::create(
                  nb, l, args[0], arith::ExtUIOp::create(nb, l, i8, keepAny));
              Value allV = arith::AndIOp::create(
                  nb, l, args[1], arith::ExtUIOp::create(nb, l, i8, keepAll));
              linalg::YieldOp::create(nb, l, ValueRange{anyV, allV});
            });
        Value zero8 = arith::ConstantIntOp::create(b, loc, 0, 8);
        live = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ne,
            tensor::ExtractOp::create(b, loc, pre.getResult(0), ValueRange{}),
            zero8);
        full = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ne,
            tensor::ExtractOp::create(b, loc, pre.getResult(1), ValueRange{}),
            zero8);
      }
    }

    // The block's computation, at the current insertion point.
    auto computeBlock = [&]() -> SmallVector<Value> {
      Value kTile =
          kRows ? tensor::ExtractSliceOp::create(
                      b, loc, RankedTensorType::get({Nt, E}, elt), kT,
                      {o(kb), o(kh), o(n0), a(0)}, {a(1), a(1), a(Nt), a(E)},
                      unit4)
                : tensor::ExtractSliceOp::create(
                      b, loc, RankedTensorType::get({E, Nt}, elt), kT,
                      {o(kb), o(kh), a(0), o(n0)}, {a(1), a(1), a(E), a(Nt)},
                      unit4);
      Value vTile = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({Nt, Ev}, elt), vP,
          {o(kb), o(kh), o(n0), a(0)}, {a(1), a(1), a(Nt), a(Ev)}, unit4);
      // S[m, n] = sum_e Q[m, e] * KT[e, n]; loops (m, e, n).
      Value s;
      if (kRows) {
        s = emitQKRows(qTile, kTile, st[3]);
      } else if (vec) {
        s = emitQKVec(qTile, kTile, st[3]);
      } else {
        Value s0 = fill(st[3], 0.0);
        s = linalg::GenericOp::create(
                      b, loc, TypeRange{s0.getType()}, ValueRange{qTile, kTile},
                      ValueRange{s0},
                      ArrayRef<AffineMap>{AffineMap::get(3, 0, {d0, d1}, ctx),
                                          AffineMap::get(3, 0, {d1, d2}, ctx),
                                          AffineMap::get(3, 0, {d0, d2}, ctx)},
                      ArrayRef<IteratorType>{kPar, kRed, kPar},
                      [&](OpBuilder &nb, Location l, ValueRange args) {
                        Value p = arith::MulFOp::create(
                            nb, l, toF32(nb, l, args[0]), toF32(nb, l, args[1]),
                            fm);
                        Value r = arith::AddFOp::create(nb, l, args[2], p, fm);
                        linalg::YieldOp::create(nb, l, r);
                      })
                      .getResult(0);
      }
      // Scale, score_mod, mask.
      if (!op.hasMaskMod() || !(analytic || dense)) {
        s = emitScores(s, m0, n0, gB, gH, /*withMask=*/true);
      } else {
        auto ifFull = scf::IfOp::create(b, loc, TypeRange{s.getType()}, full,
                                        /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(ifFull.thenBlock());
          Value r = emitScores(s, m0, n0, gB, gH, /*withMask=*/false);
          scf::YieldOp::create(b, loc, r);
          b.setInsertionPointToStart(ifFull.elseBlock());
          r = emitScores(s, m0, n0, gB, gH, /*withMask=*/true);
          scf::YieldOp::create(b, loc, r);
        }
        s = ifFull.getResult(0);
      }
      if (vec) {
        SmallVector<Value> sm = emitSoftmaxVec(s, st[0], st[1], st[5]);
        Value accV = emitPVVec(sm[0], vTile, st[2], sm[3]);
        return {sm[1], sm[2], accV, sm[0], st[4], sm[3]};
      }
      // bm[m] = max_n S[m, n]  (compare+select; `ugt` keeps NaN).
      Value bm0 = fill(st[4], negInfF);
      Value bm = linalg::GenericOp::create(
                     b, loc, TypeRange{bm0.getType()}, ValueRange{s},
                     ValueRange{bm0}, ArrayRef<AffineMap>{id2, row2},
                     ArrayRef<IteratorType>{kPar, kRed},
                     [&](OpBuilder &nb, Location l, ValueRange args) {
                       Value gt = arith::CmpFOp::create(
                           nb, l, arith::CmpFPredicate::UGT, args[0], args[1]);
                       linalg::YieldOp::create(
                           nb, l,
                           ValueRange{arith::SelectOp::create(
                               nb, l, gt, args[0], args[1])});
                     })
                     .getResult(0);
      // mn = max(mx, bm); corr = exp(mx - mn) (1 while all -inf); l *= corr.
      auto stats = linalg::GenericOp::create(
          b, loc, TypeRange{st[0].getType(), st[1].getType(), st[5].getType()},
          ValueRange{bm}, ValueRange{st[0], st[1], st[5]},
          ArrayRef<AffineMap>{id1, id1, id1, id1}, ArrayRef<IteratorType>{kPar},
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value bmv = args[0], mold = args[1], lold = args[2];
            Value gt = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::UGT,
                                             bmv, mold);
            Value mn = arith::SelectOp::create(nb, l, gt, bmv, mold);
            Value allMasked = isNegInf(nb, l, mn);
            Value diff = arith::SubFOp::create(nb, l, mold, mn);
            Value corr = opts.fastExp ? emitExpNonPositive(nb, l, diff)
                                      : math::ExpOp::create(nb, l, diff).getResult();
            Value oneF = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(1));
            corr = arith::SelectOp::create(nb, l, allMasked, oneF, corr);
            Value lnew = arith::MulFOp::create(nb, l, lold, corr);
            linalg::YieldOp::create(nb, l, ValueRange{mn, lnew, corr});
          });
      Value mn = stats.getResult(0), lScaled = stats.getResult(1),
            corr = stats.getResult(2);
      // P = exp(S - mn) (0 while the row is all -inf), in place.
      Value p = linalg::GenericOp::create(
                    b, loc, TypeRange{s.getType()}, ValueRange{mn},
                    ValueRange{s}, ArrayRef<AffineMap>{row2, id2},
                    ArrayRef<IteratorType>{kPar, kPar},
                    [&](OpBuilder &nb, Location l, ValueRange args) {
                      Value mnv = args[0], sv = args[1];
                      Value diff = arith::SubFOp::create(nb, l, sv, mnv);
                      Value e = opts.fastExp
                                    ? emitExpNonPositive(nb, l, diff)
                                    : math::ExpOp::create(nb, l, diff).getResult();
                      Value zf =
                          arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0));
                      Value r = arith::SelectOp::create(
                          nb, l, isNegInf(nb, l, mnv), zf, e);
                      linalg::YieldOp::create(nb, l, r);
                    })
                    .getResult(0);
      // l += sum_n P.
      Value lNew = linalg::GenericOp::create(
                       b, loc, TypeRange{lScaled.getType()}, ValueRange{p},
                       ValueRange{lScaled}, ArrayRef<AffineMap>{id2, row2},
                       ArrayRef<IteratorType>{kPar, kRed},
                       [&](OpBuilder &nb, Location l, ValueRange args) {
                         linalg::YieldOp::create(
                             nb, l,
                             ValueRange{arith::AddFOp::create(nb, l, args[1],
                                                              args[0])});
                       })
                       .getResult(0);
      // acc = acc * corr.
      Value acc1 = linalg::GenericOp::create(
                       b, loc, TypeRange{st[2].getType()}, ValueRange{corr},
                       ValueRange{st[2]}, ArrayRef<AffineMap>{row2, id2},
                       ArrayRef<IteratorType>{kPar, kPar},
                       [&](OpBuilder &nb, Location l, ValueRange args) {
                         linalg::YieldOp::create(
                             nb, l,
                             ValueRange{arith::MulFOp::create(nb, l, args[1],
                                                              args[0])});
                       })
                       .getResult(0);
      // acc[m, ev] += sum_n P[m, n] * V[n, ev]; loops (m, n, ev).
      Value acc2 =
          linalg::GenericOp::create(
              b, loc, TypeRange{acc1.getType()}, ValueRange{p, vTile},
              ValueRange{acc1},
              ArrayRef<AffineMap>{AffineMap::get(3, 0, {d0, d1}, ctx),
                                  AffineMap::get(3, 0, {d1, d2}, ctx),
                                  AffineMap::get(3, 0, {d0, d2}, ctx)},
              ArrayRef<IteratorType>{kPar, kRed, kPar},
              [&](OpBuilder &nb, Location l, ValueRange args) {
                Value pv = arith::MulFOp::create(nb, l, args[0],
                                                 toF32(nb, l, args[1]), fm);
                linalg::YieldOp::create(
                    nb, l,
                    ValueRange{arith::AddFOp::create(nb, l, args[2], pv, fm)});
              })
              .getResult(0);
      return {mn, lNew, acc2, p, bm, corr};
    };

    SmallVector<Value> next;
    if (live) {
      auto ifLive = scf::IfOp::create(b, loc, TypeRange(st), live,
                                      /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(ifLive.thenBlock());
        SmallVector<Value> r = computeBlock();
        scf::YieldOp::create(b, loc, r);
        b.setInsertionPointToStart(ifLive.elseBlock());
        scf::YieldOp::create(b, loc, st);
      }
      next.assign(ifLive.getResults().begin(), ifLive.getResults().end());
    } else {
      next = computeBlock();
    }
    scf::YieldOp::create(b, loc, next);
  }
  Value mx = nLoop.getResult(0), lsum = nLoop.getResult(1),
        acc = nLoop.getResult(2);

  // Normalization and the results of this tile.
  Value invLn2 = cF(1.0 / std::log(2.0));
  Value negInf = cF(negInfF);
  auto insertRows = [&](Value tile, Value dest, bool withEv) {
    SmallVector<OpFoldResult> offs = {o(bi), o(hi), o(m0)};
    SmallVector<OpFoldResult> sizes = {a(1), a(1), a(Mt)};
    if (withEv) {
      offs.push_back(a(0));
      sizes.push_back(a(Ev));
    }
    SmallVector<OpFoldResult> strides(offs.size(), a(1));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, loc, tile, dest, offs, sizes,
                                          strides);
  };
  auto sliceRows = [&](Value dest, Type eltTy, bool withEv) {
    SmallVector<OpFoldResult> offs = {o(bi), o(hi), o(m0)};
    SmallVector<OpFoldResult> sizes = {a(1), a(1), a(Mt)};
    SmallVector<int64_t> shape = {Mt};
    if (withEv) {
      offs.push_back(a(0));
      sizes.push_back(a(Ev));
      shape.push_back(Ev);
    }
    SmallVector<OpFoldResult> strides(offs.size(), a(1));
    return tensor::ExtractSliceOp::create(
               b, loc, RankedTensorType::get(shape, eltTy), dest, offs, sizes,
               strides)
        .getResult();
  };
  Type outElt = oTy.getElementType();
  Value outSlice = sliceRows(sharedOuts[0], outElt, true);
  Value outTile =
      linalg::GenericOp::create(
          b, loc, TypeRange{outSlice.getType()}, ValueRange{acc, lsum, mx},
          ValueRange{outSlice}, ArrayRef<AffineMap>{id2, row2, row2, id2},
          ArrayRef<IteratorType>{kPar, kPar},
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value v = arith::DivFOp::create(nb, l, args[0], args[1]);
            Value zf = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0));
            v = arith::SelectOp::create(nb, l, isNegInf(nb, l, args[2]), zf, v);
            if (outElt != f32)
              v = arith::TruncFOp::create(nb, l, outElt, v);
            linalg::YieldOp::create(nb, l, v);
          })
          .getResult(0);
  insertRows(outTile, sharedOuts[0], true);
  unsigned nextOut = 1;
  if (lseD) {
    Value sl = sliceRows(sharedOuts[nextOut], f32, false);
    Value t = linalg::GenericOp::create(
                  b, loc, TypeRange{sl.getType()}, ValueRange{mx, lsum},
                  ValueRange{sl}, ArrayRef<AffineMap>{id1, id1, id1},
                  ArrayRef<IteratorType>{kPar},
                  [&](OpBuilder &nb, Location l, ValueRange args) {
                    Value v = arith::AddFOp::create(
                        nb, l, args[0], math::LogOp::create(nb, l, args[1]));
                    v = arith::MulFOp::create(nb, l, v, invLn2);
                    v = arith::SelectOp::create(nb, l, isNegInf(nb, l, args[0]),
                                                negInf, v);
                    linalg::YieldOp::create(nb, l, v);
                  })
                  .getResult(0);
    insertRows(t, sharedOuts[nextOut], false);
    ++nextOut;
  }
  if (maxD) {
    Value sl = sliceRows(sharedOuts[nextOut], f32, false);
    Value t = linalg::GenericOp::create(
                  b, loc, TypeRange{sl.getType()}, ValueRange{mx},
                  ValueRange{sl}, ArrayRef<AffineMap>{id1, id1},
                  ArrayRef<IteratorType>{kPar},
                  [&](OpBuilder &nb, Location l, ValueRange args) {
                    linalg::YieldOp::create(
                        nb, l,
                        ValueRange{arith::MulFOp::create(nb, l, args[0],
                                                         invLn2)});
                  })
                  .getResult(0);
    insertRows(t, sharedOuts[nextOut], false);
  }
  (void)body;

  // Results (un-padded).
  b.setInsertionPointAfter(forall);
  SmallVector<Value> results;
  unsigned idx = 0;
  for (Value init : {op.getOutput(), op.getLogsumexp(), op.getMaxScores()}) {
    if (!init)
      continue;
    Value r = forall.getResult(idx++);
    if (padM) {
      auto t = cast<RankedTensorType>(init.getType());
      SmallVector<OpFoldResult> offs(t.getRank(), a(0)), sizes, strides(
                                                                t.getRank(),
                                                                a(1));
      for (int64_t d = 0; d < t.getRank(); ++d)
        sizes.push_back(d == 2 ? getAsOpFoldResult(M)
                        : t.isDynamicDim(d) ? o(dim(r, d))
                                            : a(t.getDimSize(d)));
      r = tensor::ExtractSliceOp::create(b, loc, t, r, offs, sizes, strides);
    }
    results.push_back(r);
  }
  if (results.size() != op->getNumResults())
    return op.emitOpError("flex-to-flash: unexpected number of results");
  b.replaceOp(op, results);
  // What was chosen, for torch_mlir_flex's logging (discardable, dropped by
  // the forall's own lowering).
  forall->setAttr("flex.tiles", b.getDenseI64ArrayAttr({Mt, Nt}));
  forall->setAttr("flex.block_classification",
                  b.getStringAttr(analytic ? "interval"
                                  : dense  ? "dense"
                                           : "none"));
  forallOp = forall;
  lowered = true;
  return success();
}

struct FlexToFlashPass : public flex::impl::FlexToFlashBase<FlexToFlashPass> {
  using FlexToFlashBase::FlexToFlashBase;
  void runOnOperation() override {
    if (tileM < 0 || tileN < 0) {
      getOperation().emitError("flex-to-flash: tile sizes must be >= 0");
      return signalPassFailure();
    }
    FlashOptions opts{tileM, tileN, blockSparsity, denseClassify, fastExp,
                      vectorize};
    SmallVector<AttentionOp> ops;
    SmallVector<Operation *> tanhOps;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops) {
      bool lowered = false;
      FlashLowering lowering(op, opts);
      if (failed(lowering.run(lowered)))
        return signalPassFailure();
      if (lowered && fastExp)
        lowering.forallOp.walk([&](math::TanhOp t) { tanhOps.push_back(t); });
    }
    // tanh (e.g. soft-capping score_mods) as a rational approximation in
    // plain arithmetic, which LLVM vectorizes (tanhf is a scalar libcall).
    if (!tanhOps.empty()) {
      RewritePatternSet patterns(&getContext());
      populatePolynomialApproximateTanhPattern(patterns);
      if (failed(applyOpPatternsGreedily(tanhOps, std::move(patterns))))
        return signalPassFailure();
    }
  }
};

} // namespace
