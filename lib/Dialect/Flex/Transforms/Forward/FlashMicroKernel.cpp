//===- FlashMicroKernel.cpp - broadcast-FMA tile contraction -------------===//
//
// One builder for both contractions of the tiled flash lowering (Q.K^T
// with rows of K^T, P.V with rows of V): register-blocked broadcast-FMA
// loops on tensors, split into column chunks that fit in registers so
// that head dims up to 256 (and non-powers of two) stay vectorized. The
// blocking follows the registers of the target (VectorIsa: 32 zmm of 16
// lanes, or 16 ymm of 8 lanes for AVX2 hosts).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace mlir::flex {

VectorIsa vectorIsa(int64_t vectorBits) {
  if (vectorBits == 256)
    return {256, 8, 12};
  return {512, kPieceLanes, 16};
}

bool isSupportedVectorBits(int64_t vectorBits) {
  return vectorBits == 256 || vectorBits == 512;
}

int64_t qkChunkFor(int64_t vectorBits) {
  return vectorBits == 256 ? kQKChunk256 : kQKChunk;
}

Value readF32Row(OpBuilder &b, Location loc, Value t, Value i, Value j,
                 int64_t n) {
  Type et = cast<RankedTensorType>(t.getType()).getElementType();
  Type f32 = b.getF32Type();
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(et));
  Value v = vector::TransferReadOp::create(b, loc, VectorType::get({n}, et),
                                           t, ValueRange{i, j}, pad,
                                           ArrayRef<bool>{true});
  if (et != f32)
    v = arith::ExtFOp::create(b, loc, VectorType::get({n}, f32), v);
  return v;
}

namespace {

/// Rows of dest carried at once: as many of 8, 4, 2 as divide `rows`
/// while their accumulators take at most `isa.accRegs` registers.
int64_t rowsPerStep(int64_t rows, int64_t width, const VectorIsa &isa) {
  int64_t regs = llvm::divideCeil(width, isa.lanes);
  for (int64_t r : {8, 4, 2})
    if (rows % r == 0 && r * regs <= isa.accRegs)
      return r;
  return 1;
}

/// Column chunks [offset, size) covering `width` with 512-bit registers:
/// near-equal chunks of at most `chunk` when it is set; else one up to
/// kMaxFmaChunk (up to kSingleRowFmaChunk for a single row of whole
/// pieces), else chunks of at most kSplitFmaChunk (80 -> 80; 192 -> 3 x 64;
/// 256 -> 4 x 64).
SmallVector<std::pair<int64_t, int64_t>>
columnChunks512(int64_t width, int64_t chunk, int64_t rows) {
  int64_t widest = rows == 1 && width % kPieceLanes == 0 ? kSingleRowFmaChunk
                                                          : kMaxFmaChunk;
  int64_t n = chunk > 0       ? llvm::divideCeil(width, chunk)
              : width <= widest ? 1
                                : llvm::divideCeil(width, kSplitFmaChunk);
  SmallVector<std::pair<int64_t, int64_t>> chunks;
  int64_t off = 0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t size = (width - off) / (n - c);
    chunks.push_back({off, size});
    off += size;
  }
  return chunks;
}

/// Column chunks with 256-bit registers, in whole registers: a single row
/// of whole registers in chunks of up to `accRegs` registers (96 lanes);
/// other dests in chunks of up to kQKChunk256 (or `chunk`) columns, the
/// registers spread near-equally, larger chunks first (64 -> 24, 24, 16;
/// 80 -> 24, 24, 16, 16), so that 4 rows x 3 registers fill the 12
/// accumulators.
SmallVector<std::pair<int64_t, int64_t>>
columnChunks256(int64_t width, int64_t chunk, int64_t rows,
                const VectorIsa &isa) {
  int64_t widest = rows == 1 && width % isa.lanes == 0
                       ? isa.accRegs * isa.lanes
                       : (chunk > 0 ? chunk : kQKChunk256);
  int64_t maxRegs = std::max<int64_t>(1, widest / isa.lanes);
  int64_t regs = llvm::divideCeil(width, isa.lanes);
  int64_t n = llvm::divideCeil(regs, maxRegs);
  SmallVector<std::pair<int64_t, int64_t>> chunks;
  int64_t off = 0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t r = llvm::divideCeil(regs, n - c);
    int64_t size = std::min(r * isa.lanes, width - off);
    chunks.push_back({off, size});
    off += size;
    regs -= r;
  }
  return chunks;
}

SmallVector<std::pair<int64_t, int64_t>>
columnChunks(int64_t width, int64_t chunk, int64_t rows, const VectorIsa &isa) {
  if (isa.bits == 512)
    return columnChunks512(width, chunk, rows);
  return columnChunks256(width, chunk, rows, isa);
}

/// `base + r` (a row or a column index), folded when base is a constant.
Value plusIndex(OpBuilder &b, Location loc, Value base, int64_t r) {
  if (r == 0)
    return base;
  if (std::optional<int64_t> c = getConstantIntValue(base))
    return arith::ConstantIndexOp::create(b, loc, *c + r);
  return arith::AddIOp::create(b, loc, base,
                               arith::ConstantIndexOp::create(b, loc, r));
}

Value toF32(OpBuilder &b, Location loc, Value x) {
  if (x.getType().isF32())
    return x;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), x);
}

/// Lanes of one piece of a chunk: a row carried alone in its step
/// (R == 1: a single-row dest, or an odd row count) is carried as pieces
/// of one register, so that each rhs row is read in ascending order (a
/// wide vector is split by the code generator in any order, and rows read
/// back to front stop the hardware prefetchers); else the chunk is one
/// vector with 512-bit registers. With 256-bit registers every row of
/// whole registers is carried as one-register pieces: a chunk of 3
/// registers as one vector<24xf32> is widened by LLVM to a power of two
/// and its loads scalarized (measured 6x slower than 8-lane pieces).
int64_t pieceLanes(int64_t R, int64_t n, const VectorIsa &isa) {
  if (n % isa.lanes != 0)
    return n;
  return R == 1 || isa.bits == 256 ? isa.lanes : n;
}

/// Initial accumulators of rows mb .. mb + R - 1, columns [col, col + n),
/// row-major in pieces of `pw` lanes: `zero` without a row scale.
SmallVector<Value> initialRows(OpBuilder &b, Location loc,
                               const BroadcastFmaTiles &t, Value dest,
                               Value mb, Value col, int64_t R, int64_t n,
                               int64_t pw, Value zero) {
  auto vt = VectorType::get({pw}, b.getF32Type());
  if (!t.rowScale && !t.accumulate)
    return SmallVector<Value>(R * (n / pw), zero);
  SmallVector<Value> init;
  for (int64_t r = 0; r < R; ++r) {
    Value row = plusIndex(b, loc, mb, r);
    Value bs;
    if (t.rowScale) {
      Value s = tensor::ExtractOp::create(b, loc, t.rowScale, ValueRange{row});
      bs = vector::BroadcastOp::create(b, loc, vt, s);
    }
    for (int64_t c = 0; c < n; c += pw) {
      Value a = readF32Row(b, loc, dest, row, plusIndex(b, loc, col, c), pw);
      init.push_back(bs ? arith::MulFOp::create(b, loc, a, bs).getResult()
                        : a);
    }
  }
  return init;
}

/// The kernel for columns [colOff, colOff + n) of dest.
Value buildChunk(OpBuilder &b, Location loc, const BroadcastFmaTiles &t,
                 Value dest, Value colOff, int64_t n) {
  VectorIsa isa = vectorIsa(t.vectorBits);
  int64_t R = rowsPerStep(t.rows, n, isa);
  int64_t pw = pieceLanes(R, n, isa), pieces = n / pw;
  auto vt = VectorType::get({pw}, b.getF32Type());
  auto cI = [&](OpBuilder &ob, int64_t v) {
    return arith::ConstantIndexOp::create(ob, loc, v);
  };
  Value c0 = cI(b, 0), c1 = cI(b, 1);
  Value zero;
  if (!t.rowScale && !t.accumulate)
    zero = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vt, b.getF32FloatAttr(0.0)));
  auto mLoop = scf::ForOp::create(
      b, loc, c0, cI(b, t.rows), cI(b, R), ValueRange{dest},
      [&](OpBuilder &nb, Location l, Value mb, ValueRange iter) {
        SmallVector<Value> init =
            initialRows(nb, l, t, iter[0], mb, colOff, R, n, pw, zero);
        auto kLoop = scf::ForOp::create(
            nb, l, c0, cI(nb, t.reduction), c1, init,
            [&](OpBuilder &kb, Location l2, Value k, ValueRange accs) {
              SmallVector<Value> rv;
              for (int64_t i = 0; i < pieces; ++i)
                rv.push_back(readF32Row(kb, l2, t.rhs, k,
                                        plusIndex(kb, l2, colOff, i * pw), pw));
              SmallVector<Value> outs;
              for (int64_t r = 0; r < R; ++r) {
                Value row = plusIndex(kb, l2, mb, r);
                SmallVector<Value, 2> at = {row, k};
                if (t.lhsTransposed)
                  std::swap(at[0], at[1]);
                Value x = tensor::ExtractOp::create(kb, l2, t.lhs, at);
                Value bx = vector::BroadcastOp::create(kb, l2, vt,
                                                       toF32(kb, l2, x));
                for (int64_t i = 0; i < pieces; ++i)
                  outs.push_back(vector::FMAOp::create(
                      kb, l2, bx, rv[i], accs[r * pieces + i]));
              }
              scf::YieldOp::create(kb, l2, outs);
            });
        Value d = iter[0];
        Value outScale;
        if (t.outScale)
          outScale = vector::BroadcastOp::create(nb, l, vt, t.outScale);
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t i = 0; i < pieces; ++i) {
            Value sum = kLoop.getResult(r * pieces + i);
            if (outScale)
              sum = arith::MulFOp::create(nb, l, sum, outScale);
            d = vector::TransferWriteOp::create(
                    nb, l, sum, d,
                    ValueRange{plusIndex(nb, l, mb, r),
                               plusIndex(nb, l, colOff, i * pw)},
                    ArrayRef<bool>{true})
                    .getResult();
          }
        }
        scf::YieldOp::create(nb, l, d);
      });
  return mLoop.getResult(0);
}

} // namespace

Value buildBroadcastFmaKernel(OpBuilder &b, Location loc,
                              const BroadcastFmaTiles &t) {
  // Runs of equal chunks share one kernel in a loop over the chunk offset
  // (code size: a 256-wide P.V is one kernel, not four copies).
  SmallVector<std::pair<int64_t, int64_t>> chunks =
      columnChunks(t.width, t.chunk, t.rows, vectorIsa(t.vectorBits));
  auto cI = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value dest = t.dest;
  for (size_t i = 0; i < chunks.size();) {
    auto [off, size] = chunks[i];
    size_t j = i + 1;
    while (j < chunks.size() && chunks[j].second == size)
      ++j;
    if (j - i == 1) {
      dest = buildChunk(b, loc, t, dest, cI(off), size);
    } else {
      int64_t end = off + static_cast<int64_t>(j - i) * size;
      dest = scf::ForOp::create(
                 b, loc, cI(off), cI(end), cI(size), ValueRange{dest},
                 [&](OpBuilder &nb, Location l, Value col, ValueRange it) {
                   scf::YieldOp::create(
                       nb, l, buildChunk(nb, l, t, it[0], col, size));
                 })
                 .getResult(0);
    }
    i = j;
  }
  return dest;
}

} // namespace mlir::flex
