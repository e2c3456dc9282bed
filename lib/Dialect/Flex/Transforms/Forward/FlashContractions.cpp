//===- FlashContractions.cpp - Q.K^T and P.V of one block -----------------===//
//
// The two contractions of a flex.online_attention block, in f32:
//   S[m, n]    = sum_e Q[m, e] * K[n, e]
//   acc[m, :]  = acc[m, :] * corr[m] + sum_n P[m, n] * V[n, :]
// Vector form: the broadcast-FMA micro-kernel (FlashMicroKernel.cpp) with
// K transposed, or, for few query rows and K as rows, the key-row dot
// kernel (FlashKeyRowDots.cpp; one tree-summed dot product per (row,
// key) where E or Nt is not a multiple of 16); for bf16 with pair-packed
// K^T / V, the AVX512-BF16 dot kernel (FlashBf16Kernel.cpp), or with
// `amx` (cfg.amx, tiles that fit) products marked for AMX tiles
// (buildAmxProduct: S unscaled into the zeroed scratch; acc * corr, then
// += bf16(P) . V). Otherwise linalg.generic contractions.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

static int64_t dimOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

static Value toF32(OpBuilder &b, Location loc, Value x) {
  if (x.getType().isF32())
    return x;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), x);
}

/// dest[m, j] += lhs[m, k] * rhs(k, j) over (m, k, j); `rhsMap` indexes rhs
/// by (d0, d1, d2) = (m, k, j).
Value mlir::flex::buildGenericContraction(OpBuilder &b, Location loc,
                                         Value lhs, Value rhs, AffineMap rhsMap,
                                         Value dest) {
  MLIRContext *ctx = b.getContext();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
             d2 = getAffineDimExpr(2, ctx);
  auto fm = arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::contract);
  return linalg::GenericOp::create(
             b, loc, TypeRange{dest.getType()}, ValueRange{lhs, rhs},
             ValueRange{dest},
             ArrayRef<AffineMap>{AffineMap::get(3, 0, {d0, d1}, ctx), rhsMap,
                                 AffineMap::get(3, 0, {d0, d2}, ctx)},
             ArrayRef<IteratorType>{IteratorType::parallel,
                                    IteratorType::reduction,
                                    IteratorType::parallel},
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value p = arith::MulFOp::create(nb, l, toF32(nb, l, a[0]),
                                               toF32(nb, l, a[1]), fm);
               linalg::YieldOp::create(
                   nb, l, ValueRange{arith::AddFOp::create(nb, l, a[2], p, fm)});
             })
      .getResult(0);
}

/// Few query rows, K as rows: S[m, n] = tree-sum(Q[m, :] * K[n, :]).
static Value buildQKRows(OpBuilder &b, Location loc, Value q, Value k,
                         Value s) {
  int64_t mt = dimOf(q, 0), e = dimOf(q, 1), nt = dimOf(k, 0);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> qRows;
  for (int64_t r = 0; r < mt; ++r)
    qRows.push_back(readF32Row(
        b, loc, q, arith::ConstantIndexOp::create(b, loc, r), c0, e));
  auto loop = scf::ForOp::create(
      b, loc, c0, arith::ConstantIndexOp::create(b, loc, nt), c1,
      ValueRange{s}, [&](OpBuilder &nb, Location l, Value n, ValueRange it) {
        Value kv = readF32Row(nb, l, k, n, c0, e);
        Value sv = it[0];
        for (int64_t r = 0; r < mt; ++r) {
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
  return loop.getResult(0);
}

/// The [Mt, Nt] scores scratch, created once per row tile: at the start of
/// the enclosing scf.forall iteration (private to it), so that the blocks of
/// the key loop reuse one buffer instead of allocating one each (its
/// contents are undefined on entry, so bufferization sees no conflict).
static Value scoreScratch(OpBuilder &b, Location loc, Operation *anchor,
                          int64_t mt, int64_t nt, Type elt = {}) {
  OpBuilder::InsertionGuard g(b);
  if (auto forall = anchor->getParentOfType<scf::ForallOp>())
    b.setInsertionPointToStart(forall.getBody());
  return tensor::EmptyOp::create(b, loc, {mt, nt}, elt ? elt : b.getF32Type());
}

Value mlir::flex::buildQKTile(OpBuilder &b, Location loc, OnlineAttentionOp op,
                              const FlashConfig &cfg) {
  Value q = op.getQuery(), k = op.getKey();
  int64_t mt = op.getTileRows(), nt = op.getTileKeys(), e = dimOf(q, 1);
  bool transposed = op.getTransposedKey();
  Value s = scoreScratch(b, loc, op, mt, nt);
  if (op.getPairedKey()) {
    if (cfg.amx && canUseAmx(mt, e, nt)) {
      Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
      Value s0 = linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{s})
                     .getResult(0);
      return buildAmxProduct(b, loc, q, k, s0);
    }
    return buildBf16DotKernel(b, loc, {q, k, s, Value(), mt, e, nt});
  }
  if (qkTileAppliesScale(op, cfg)) {
    Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
    if (!transposed)
      return buildKeyRowDots(b, loc, q, k, s, scale,
                             vectorIsa(cfg.vectorBits).lanes);
    BroadcastFmaTiles t{q,  k,  s,     Value(),
                        mt, e,  nt, scale, qkChunkFor(cfg.vectorBits)};
    t.vectorBits = cfg.vectorBits;
    return buildBroadcastFmaKernel(b, loc, t);
  }
  if (cfg.vectorize)
    return buildQKRows(b, loc, q, k, s);
  MLIRContext *ctx = b.getContext();
  AffineExpr d1 = getAffineDimExpr(1, ctx), d2 = getAffineDimExpr(2, ctx);
  AffineMap kMap = transposed ? AffineMap::get(3, 0, {d1, d2}, ctx)
                              : AffineMap::get(3, 0, {d2, d1}, ctx);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value s0 = linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{s})
                 .getResult(0);
  return buildGenericContraction(b, loc, q, k, kMap, s0);
}

bool mlir::flex::qkTileAppliesScale(OnlineAttentionOp op,
                                    const FlashConfig &cfg) {
  if (op.getPairedKey() || !cfg.vectorize)
    return false;
  int64_t e = dimOf(op.getQuery(), 1);
  int64_t lanes = vectorIsa(cfg.vectorBits).lanes;
  return op.getTransposedKey() || canUseKeyRowDots(e, op.getTileKeys(), lanes);
}

Value mlir::flex::buildPVTile(OpBuilder &b, Location loc, Value p, Value v,
                              Value acc, Value corr, bool pairedValue,
                              const FlashConfig &cfg) {
  int64_t mt = dimOf(p, 0), nt = dimOf(p, 1), ev = dimOf(acc, 1);
  bool amx = pairedValue && cfg.amx && canUseAmx(mt, nt, ev);
  if (pairedValue && !amx)
    return buildBf16DotKernel(b, loc, {p, v, acc, corr, mt, nt, ev});
  if (cfg.vectorize && !amx) {
    BroadcastFmaTiles t{p, v, acc, corr, mt, nt, ev};
    t.vectorBits = cfg.vectorBits;
    return buildBroadcastFmaKernel(b, loc, t);
  }
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  IteratorType par = IteratorType::parallel;
  Value scaled =
      linalg::GenericOp::create(
          b, loc, TypeRange{acc.getType()}, ValueRange{corr}, ValueRange{acc},
          ArrayRef<AffineMap>{row, id}, ArrayRef<IteratorType>{par, par},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            linalg::YieldOp::create(
                nb, l, ValueRange{arith::MulFOp::create(nb, l, a[1], a[0])});
          })
          .getResult(0);
  if (amx) {
    // P rounded to bf16 (as the dot kernel does) into a per-row-tile
    // scratch, then acc * corr += bf16(P) . V on AMX tiles.
    Operation *anchor = b.getInsertionBlock()->getParentOp();
    Value pb = roundRowsToBf16(
        b, loc, p, scoreScratch(b, loc, anchor, mt, nt, b.getBF16Type()));
    return buildAmxProduct(b, loc, pb, v, scaled);
  }
  AffineExpr d1 = getAffineDimExpr(1, ctx), d2 = getAffineDimExpr(2, ctx);
  return buildGenericContraction(b, loc, p, v, AffineMap::get(3, 0, {d1, d2}, ctx),
                            scaled);
}
