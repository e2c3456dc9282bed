//===- FlashBf16Kernel.cpp - vdpbf16ps tile contraction ------------------===//
//
// flex-to-flash's bf16 path (`bf16-dot`): the pair-packing pre-passes for
// K^T and V, and the register-blocked contraction on x86vector.avx512.dot.
// A step of the reduction loop takes a pair (k, k+1): each row of dest
// broadcasts its lhs pair (two bf16 as one i32) over the lanes and issues
// one vdpbf16ps per 16-lane piece of the row with the packed rhs pairs
// (rhs[k, n], rhs[k+1, n]) of that piece; products and sums are f32.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;

namespace mlir::flex {

namespace {

/// f32 lanes of the widest vdpbf16ps (512 bits).
constexpr int64_t kDotLanes = 16;
/// Widest column chunk of dest kept in registers (8 zmm per row).
constexpr int64_t kMaxDotChunk = 128;

/// Pieces (offset, lanes) of a row of `n` f32: 16-lane pieces, then one of
/// 8 and one of 4 for the rest (n % 4 == 0).
SmallVector<std::pair<int64_t, int64_t>> lanePieces(int64_t n) {
  SmallVector<std::pair<int64_t, int64_t>> pieces;
  int64_t off = 0;
  for (int64_t lanes : {kDotLanes, int64_t(8), int64_t(4)})
    for (; n - off >= lanes; off += lanes)
      pieces.push_back({off, lanes});
  return pieces;
}

/// Rows of dest carried at once: 4 or 2 when they divide `rows` and their
/// accumulators (`regs` pieces per row) take at most 16 registers.
int64_t dotRowsPerStep(int64_t rows, int64_t regs) {
  for (int64_t r : {4, 2})
    if (rows % r == 0 && r * regs <= 16)
      return r;
  return 1;
}

Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value plus(OpBuilder &b, Location loc, Value base, int64_t r) {
  return r == 0 ? base : arith::AddIOp::create(b, loc, base, cIndex(b, loc, r));
}

OpFoldResult dimOf(OpBuilder &b, Location loc, Value t, int64_t d) {
  auto ty = cast<RankedTensorType>(t.getType());
  if (ty.isDynamicDim(d))
    return tensor::DimOp::create(b, loc, t, d).getResult();
  return b.getIndexAttr(ty.getDimSize(d));
}

Value readVec(OpBuilder &b, Location loc, Value t, ValueRange idx,
              VectorType vt) {
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(vt.getElementType()));
  return vector::TransferReadOp::create(b, loc, vt, t, idx, pad,
                                        ArrayRef<bool>{true});
}

/// `t` with the 1-D vector `v` written at `idx` (in bounds).
Value writeVec(OpBuilder &b, Location loc, Value v, Value t, ValueRange idx) {
  return vector::TransferWriteOp::create(b, loc, v, t, idx,
                                         ArrayRef<bool>{true})
      .getResult();
}

using HeadBody = function_ref<Value(OpBuilder &, Location, Value, Value)>;

/// A fresh [B, H, P, Q] tensor (`shape`, `sizes`) of bf16 filled per
/// (b, h) of `src` [B, H, X, Y] by `body(src[b, h], out[b, h])`, which
/// returns the filled 2-D slice: in an scf.forall, or without `parallel`
/// in nested scf.for loops.
Value perHead(OpBuilder &b, Location loc, Value src, ArrayRef<int64_t> shape,
              ArrayRef<OpFoldResult> sizes, bool parallel, HeadBody body) {
  auto ty = cast<RankedTensorType>(src.getType());
  Type et = b.getBF16Type();
  SmallVector<Value> dyn;
  for (auto [s, ofr] : llvm::zip_equal(shape, sizes))
    if (ShapedType::isDynamic(s))
      dyn.push_back(cast<Value>(ofr));
  Value init = tensor::EmptyOp::create(b, loc, shape, et, dyn);
  OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  SmallVector<OpFoldResult> units(4, one);
  SmallVector<OpFoldResult> outSizes = {one, one, sizes[2], sizes[3]};
  // The filled slice of (bi, hi) and its offsets in the result.
  auto fill = [&](OpBuilder &nb, Location l, Value bi, Value hi, Value out) {
    Value src2 = tensor::ExtractSliceOp::create(
        nb, l,
        RankedTensorType::get(ty.getShape().drop_front(2), ty.getElementType()),
        src, {bi, hi, zero, zero},
        {one, one, dimOf(nb, l, src, 2), dimOf(nb, l, src, 3)}, units);
    SmallVector<OpFoldResult> offs = {bi, hi, zero, zero};
    Value dst2 = tensor::ExtractSliceOp::create(
        nb, l, RankedTensorType::get(shape.drop_front(2), et), out, offs,
        outSizes, units);
    return std::make_pair(body(nb, l, src2, dst2), offs);
  };
  if (!parallel) {
    Value c0 = cIndex(b, loc, 0), c1 = cIndex(b, loc, 1);
    auto bound = [&](int64_t d) {
      return getValueOrCreateConstantIndexOp(b, loc, sizes[d]);
    };
    Value hN = bound(1);
    auto bLoop = scf::ForOp::create(
        b, loc, c0, bound(0), c1, ValueRange{init},
        [&](OpBuilder &bb, Location l, Value bi, ValueRange bIt) {
          auto hLoop = scf::ForOp::create(
              bb, l, c0, hN, c1, bIt,
              [&](OpBuilder &hb, Location l2, Value hi, ValueRange hIt) {
                auto [filled, offs] = fill(hb, l2, bi, hi, hIt[0]);
                scf::YieldOp::create(
                    hb, l2,
                    tensor::InsertSliceOp::create(hb, l2, filled, hIt[0], offs,
                                                  outSizes, units)
                        .getResult());
              });
          scf::YieldOp::create(bb, l, hLoop.getResults());
        });
    return bLoop.getResult(0);
  }
  auto forall = scf::ForallOp::create(b, loc, sizes.take_front(2),
                                      ValueRange{init}, std::nullopt);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(forall.getTerminator());
  Value out = forall.getRegionIterArgs()[0];
  auto [filled, offs] = fill(b, loc, forall.getInductionVars()[0],
                             forall.getInductionVars()[1], out);
  b.setInsertionPointToEnd(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, filled, out, offs, outSizes,
                                        units);
  return forall.getResult(0);
}

/// Shape and sizes [B, H, rows, cols] of a packed tensor for `src`
/// [B, H, X, Y], static where known.
std::pair<SmallVector<int64_t>, SmallVector<OpFoldResult>>
packedShape(OpBuilder &b, Location loc, Value src, OpFoldResult rows,
            OpFoldResult cols) {
  SmallVector<OpFoldResult> sizes = {dimOf(b, loc, src, 0),
                                     dimOf(b, loc, src, 1), rows, cols};
  SmallVector<int64_t> shape;
  for (OpFoldResult s : sizes) {
    std::optional<int64_t> c = getConstantIntValue(s);
    shape.push_back(c ? *c : ShapedType::kDynamic);
  }
  return {shape, sizes};
}

/// `x` (an index) * num / den, folded when constant.
OpFoldResult scaled(OpBuilder &b, Location loc, OpFoldResult x, int64_t num,
                    int64_t den) {
  if (std::optional<int64_t> c = getConstantIntValue(x))
    return b.getIndexAttr(*c * num / den);
  Value v = cast<Value>(x);
  if (num != 1)
    v = arith::MulIOp::create(b, loc, v, cIndex(b, loc, num));
  if (den != 1)
    v = arith::DivUIOp::create(b, loc, v, cIndex(b, loc, den));
  return v;
}

/// The pair (src[n, 2 e2], src[n, 2 e2 + 1]) as one i32.
Value pairWord(OpBuilder &b, Location loc, Value src, Value n, Value e) {
  Value pair = readVec(b, loc, src, ValueRange{n, e},
                       VectorType::get({2}, b.getBF16Type()));
  Value w = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, w, 0);
}

Value slicePairs(OpBuilder &b, Location loc, Value packed, Value bi, Value hi,
                 OpFoldResult row, OpFoldResult col, int64_t rows,
                 int64_t cols) {
  auto ty = cast<RankedTensorType>(packed.getType());
  OpFoldResult one = b.getIndexAttr(1);
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({rows, cols}, ty.getElementType()), packed,
      {bi, hi, row, col},
      {one, one, b.getIndexAttr(rows), b.getIndexAttr(cols)},
      SmallVector<OpFoldResult>(4, one));
}

/// Row `i` of the 2-D `t` (`n` elements) as bf16: read as is, or read as
/// f32 and rounded to nearest even (vector truncf).
Value readBf16Row(OpBuilder &b, Location loc, Value t, Value i, int64_t n) {
  Type bf16 = b.getBF16Type();
  Value c0 = cIndex(b, loc, 0);
  auto vt = VectorType::get({n}, bf16);
  if (cast<RankedTensorType>(t.getType()).getElementType() == bf16)
    return readVec(b, loc, t, ValueRange{i, c0}, vt);
  return arith::TruncFOp::create(b, loc, vt, readF32Row(b, loc, t, i, c0, n));
}

} // namespace

Value packRowPairs(OpBuilder &b, Location loc, Value src, Value dest) {
  int64_t w = cast<RankedTensorType>(src.getType()).getDimSize(1);
  Value c0 = cIndex(b, loc, 0);
  Value half = tensor::DimOp::create(b, loc, dest, 0);
  auto rows = scf::ForOp::create(
      b, loc, c0, half, cIndex(b, loc, 1), ValueRange{dest},
      [&](OpBuilder &rb, Location l, Value k2, ValueRange it) {
        Value k = arith::MulIOp::create(rb, l, k2, cIndex(rb, l, 2));
        Value r0 = readBf16Row(rb, l, src, k, w);
        Value r1 = readBf16Row(rb, l, src, plus(rb, l, k, 1), w);
        Value pair = vector::InterleaveOp::create(rb, l, r0, r1);
        scf::YieldOp::create(rb, l, writeVec(rb, l, pair, it[0], {k2, c0}));
      });
  return rows.getResult(0);
}

Value roundRowsToBf16(OpBuilder &b, Location loc, Value src, Value dest) {
  auto ty = cast<RankedTensorType>(src.getType());
  int64_t rows = ty.getDimSize(0), cols = ty.getDimSize(1);
  Value c0 = cIndex(b, loc, 0);
  auto loop = scf::ForOp::create(
      b, loc, c0, cIndex(b, loc, rows), cIndex(b, loc, 1), ValueRange{dest},
      [&](OpBuilder &nb, Location l, Value m, ValueRange it) {
        Value h = readBf16Row(nb, l, src, m, cols);
        scf::YieldOp::create(nb, l, writeVec(nb, l, h, it[0], {m, c0}));
      });
  return loop.getResult(0);
}

namespace {

/// lhs as the kernel reads it, bf16: [rows, reduction] (an f32 tile
/// rounded row by row), or with `lhsTransposed` [reduction / 2, 2 rows]
/// (packRowPairs); into t.lhsScratch when it is set.
Value lhsAsBf16(OpBuilder &b, Location loc, const BroadcastFmaTiles &t) {
  Type bf16 = b.getBF16Type();
  bool isBf16 =
      cast<RankedTensorType>(t.lhs.getType()).getElementType() == bf16;
  if (isBf16 && !t.lhsTransposed)
    return t.lhs;
  SmallVector<int64_t> shape = {t.rows, t.reduction};
  if (t.lhsTransposed)
    shape = {t.reduction / 2, 2 * t.rows};
  Value init = t.lhsScratch
                   ? t.lhsScratch
                   : tensor::EmptyOp::create(b, loc, shape, bf16).getResult();
  if (t.lhsTransposed)
    return packRowPairs(b, loc, t.lhs, init);
  return roundRowsToBf16(b, loc, t.lhs, init);
}

/// The lhs pair (lhs[row, 2 k2], lhs[row, 2 k2 + 1]) (bf16; at [k2, 2 row]
/// of a transposed lhs's pairs) as vector<2 lanes x bf16> holding the pair
/// in every lane pair.
Value broadcastPair(OpBuilder &b, Location loc, const BroadcastFmaTiles &t,
                    Value lhs, Value row, Value k2, int64_t lanes) {
  Type i32 = b.getI32Type();
  Value two = cIndex(b, loc, 2);
  SmallVector<Value, 2> at = {row, arith::MulIOp::create(b, loc, k2, two)};
  if (t.lhsTransposed)
    at = {k2, arith::MulIOp::create(b, loc, row, two)};
  Value pair = readVec(b, loc, lhs, at, VectorType::get({2}, b.getBF16Type()));
  Value word = vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), pair);
  Value splat =
      vector::BroadcastOp::create(b, loc, VectorType::get({lanes}, i32), word);
  return vector::BitCastOp::create(
      b, loc, VectorType::get({2 * lanes}, b.getBF16Type()), splat);
}

/// Accumulators of rows mb .. mb + R - 1, pieces of columns from `col`:
/// dest * rowScale, dest (`accumulate`), or zero.
SmallVector<Value> initialAccs(OpBuilder &b, Location loc,
                               const BroadcastFmaTiles &t, Value dest, Value mb,
                               int64_t col, int64_t R,
                               ArrayRef<std::pair<int64_t, int64_t>> pieces) {
  SmallVector<Value> accs;
  for (int64_t r = 0; r < R; ++r) {
    Value row = plus(b, loc, mb, r);
    Value s = t.rowScale ? tensor::ExtractOp::create(b, loc, t.rowScale,
                                                     ValueRange{row})
                               .getResult()
                         : Value();
    for (auto [off, lanes] : pieces) {
      auto vt = VectorType::get({lanes}, b.getF32Type());
      if (!s && !t.accumulate) {
        accs.push_back(arith::ConstantOp::create(
            b, loc, DenseElementsAttr::get(vt, b.getF32FloatAttr(0.0))));
        continue;
      }
      Value a = readF32Row(b, loc, dest, row, cIndex(b, loc, col + off), lanes);
      accs.push_back(s ? arith::MulFOp::create(
                             b, loc, a,
                             vector::BroadcastOp::create(b, loc, vt, s))
                             .getResult()
                       : a);
    }
  }
  return accs;
}

/// The kernel for columns [col, col + n) of dest.
Value buildDotChunk(OpBuilder &b, Location loc, const BroadcastFmaTiles &t,
                    Value lhs, Value dest, int64_t col, int64_t n) {
  auto pieces = lanePieces(n);
  int64_t P = pieces.size();
  int64_t R = dotRowsPerStep(t.rows, P);
  Type bf16 = b.getBF16Type();
  Value c0 = cIndex(b, loc, 0), c1 = cIndex(b, loc, 1);
  auto mLoop = scf::ForOp::create(
      b, loc, c0, cIndex(b, loc, t.rows), cIndex(b, loc, R), ValueRange{dest},
      [&](OpBuilder &nb, Location l, Value mb, ValueRange iter) {
        SmallVector<Value> init =
            initialAccs(nb, l, t, iter[0], mb, col, R, pieces);
        auto kLoop = scf::ForOp::create(
            nb, l, c0, cIndex(nb, l, t.reduction / 2), c1, init,
            [&](OpBuilder &kb, Location l2, Value k2, ValueRange accs) {
              SmallVector<Value> rhs;
              for (auto [off, lanes] : pieces)
                rhs.push_back(readVec(
                    kb, l2, t.rhs,
                    ValueRange{k2, cIndex(kb, l2, 2 * (col + off))},
                    VectorType::get({2 * lanes}, bf16)));
              SmallVector<Value> outs;
              for (int64_t r = 0; r < R; ++r) {
                Value row = plus(kb, l2, mb, r);
                for (int64_t p = 0; p < P; ++p) {
                  Value a = broadcastPair(kb, l2, t, lhs, row, k2,
                                          pieces[p].second);
                  outs.push_back(x86vector::DotBF16Op::create(
                      kb, l2, accs[r * P + p], a, rhs[p]));
                }
              }
              scf::YieldOp::create(kb, l2, outs);
            });
        Value d = iter[0];
        for (int64_t r = 0; r < R; ++r)
          for (int64_t p = 0; p < P; ++p) {
            Value sum = kLoop.getResult(r * P + p);
            if (t.outScale)
              sum = arith::MulFOp::create(
                  nb, l, sum,
                  vector::BroadcastOp::create(nb, l, sum.getType(),
                                              t.outScale));
            d = writeVec(nb, l, sum, d,
                         {plus(nb, l, mb, r),
                          cIndex(nb, l, col + pieces[p].first)});
          }
        scf::YieldOp::create(nb, l, d);
      });
  return mLoop.getResult(0);
}

} // namespace

bool canUseBf16Dot(int64_t reduction, int64_t width) {
  return reduction > 0 && reduction % 2 == 0 && width > 0 && width % 4 == 0;
}

Value packKeyPairs(OpBuilder &b, Location loc, Value k, int64_t Nt) {
  // Blocks of L key rows (L | Nt, so L | Np): per pair column, the L pairs
  // gathered as words into one vector store of 2L bf16, at row
  // (n / Nt) * E/2 + e2 and column 2 (n mod Nt) (one key block contiguous).
  int64_t L = 1;
  while (L < kDotLanes && Nt % (2 * L) == 0)
    L *= 2;
  int64_t E = cast<RankedTensorType>(k.getType()).getDimSize(3);
  auto [shape, sizes] =
      packedShape(b, loc, k, scaled(b, loc, dimOf(b, loc, k, 2), E / 2, Nt),
                  b.getIndexAttr(2 * Nt));
  Type bf16 = b.getBF16Type();
  return perHead(
      b, loc, k, shape, sizes, /*parallel=*/true,
      [&](OpBuilder &nb, Location l, Value src, Value dst) -> Value {
        Value c0 = cIndex(nb, l, 0), c1 = cIndex(nb, l, 1);
        Value np = tensor::DimOp::create(nb, l, src, 0);
        auto rows = scf::ForOp::create(
            nb, l, c0, np, cIndex(nb, l, L), ValueRange{dst},
            [&](OpBuilder &rb, Location l2, Value n, ValueRange it) {
              Value ntV = cIndex(rb, l2, Nt);
              Value row0 = arith::MulIOp::create(
                  rb, l2, arith::DivUIOp::create(rb, l2, n, ntV),
                  cIndex(rb, l2, E / 2));
              Value col = arith::MulIOp::create(
                  rb, l2, arith::RemUIOp::create(rb, l2, n, ntV),
                  cIndex(rb, l2, 2));
              auto cols = scf::ForOp::create(
                  rb, l2, c0, cIndex(rb, l2, E / 2), c1, it,
                  [&](OpBuilder &cb, Location l3, Value e2, ValueRange it2) {
                    Value e = arith::MulIOp::create(cb, l3, e2, cIndex(cb, l3, 2));
                    SmallVector<Value> words;
                    for (int64_t i = 0; i < L; ++i)
                      words.push_back(pairWord(cb, l3, src, plus(cb, l3, n, i), e));
                    Value v = vector::FromElementsOp::create(
                        cb, l3, VectorType::get({L}, cb.getI32Type()), words);
                    v = vector::BitCastOp::create(
                        cb, l3, VectorType::get({2 * L}, bf16), v);
                    Value row = arith::AddIOp::create(cb, l3, row0, e2);
                    scf::YieldOp::create(cb, l3,
                                         writeVec(cb, l3, v, it2[0], {row, col}));
                  });
              scf::YieldOp::create(rb, l2, cols.getResult(0));
            });
        return rows.getResult(0);
      });
}

Value packValuePairs(OpBuilder &b, Location loc, Value v, bool parallel) {
  // Row pair (2 n2, 2 n2 + 1) interleaved into one packed row.
  int64_t Ev = cast<RankedTensorType>(v.getType()).getDimSize(3);
  auto [shape, sizes] =
      packedShape(b, loc, v, scaled(b, loc, dimOf(b, loc, v, 2), 1, 2),
                  b.getIndexAttr(2 * Ev));
  return perHead(b, loc, v, shape, sizes, parallel, packRowPairs);
}

Value sliceKeyPairs(OpBuilder &b, Location loc, Value packed, Value bi,
                    Value hi, Value n0, int64_t E, int64_t Nt) {
  Value row = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, n0, cIndex(b, loc, Nt)),
      cIndex(b, loc, E / 2));
  return slicePairs(b, loc, packed, bi, hi, row, b.getIndexAttr(0), E / 2,
                    2 * Nt);
}

Value sliceValuePairs(OpBuilder &b, Location loc, Value packed, Value bi,
                      Value hi, Value n0, int64_t Nt, int64_t Ev) {
  Value row = arith::DivUIOp::create(b, loc, n0, cIndex(b, loc, 2));
  return slicePairs(b, loc, packed, bi, hi, row, b.getIndexAttr(0), Nt / 2,
                    2 * Ev);
}

bool canUseAmx(int64_t m, int64_t k, int64_t n) {
  return m > 0 && k > 0 && n > 0 && m % 16 == 0 && n % 16 == 0 && k % 32 == 0;
}

Value buildAmxProduct(OpBuilder &b, Location loc, Value lhs, Value rhs,
                      Value acc) {
  MLIRContext *ctx = b.getContext();
  AffineExpr d1 = getAffineDimExpr(1, ctx), d2 = getAffineDimExpr(2, ctx);
  AffineMap pairs =
      AffineMap::get(3, 0, {d1.floorDiv(2), d2 * 2 + d1 % 2}, ctx);
  Value r = buildGenericContraction(b, loc, lhs, rhs, pairs, acc);
  r.getDefiningOp()->setAttr("flex.amx", b.getUnitAttr());
  return r;
}

Value buildBf16DotKernel(OpBuilder &b, Location loc,
                         const BroadcastFmaTiles &t) {
  Value lhs = lhsAsBf16(b, loc, t);
  Value dest = t.dest;
  int64_t chunks = llvm::divideCeil(t.width, kMaxDotChunk);
  // Near-equal chunks, each a multiple of 4 lanes.
  int64_t off = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t size = ((t.width - off) / 4 / (chunks - c)) * 4;
    dest = buildDotChunk(b, loc, t, lhs, dest, off, size);
    off += size;
  }
  return dest;
}

} // namespace mlir::flex
