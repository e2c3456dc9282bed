//===- FlashKeyRowDots.cpp - Q.K^T with K as rows, 16 keys at a time ------===//
//
// Decode-sized row tiles read K as it is ([Nt, E] rows) instead of a
// transposed copy. Each score S[m, n] is then a dot product of two rows.
// Summing every product vector down to one scalar costs four shuffle+add
// levels per key; here the keys go sixteen at a time:
//
//   part[j] = sum over 16-lane chunks c of Q[m, c] * K[n0 + j, c]  (FMA)
//   S[m, n0 : n0 + 16] = fold(part[0..15])
//
// fold halves sixteen 16-lane vectors to one in four levels: each level
// pairs the vectors, and one shuffle takes the lower half of every lane
// group of both, another the upper half, and an add sums them. The result
// lane j holds key j's sum, so it is written to S as one vector.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::flex;

/// Lanes of one vector, and keys per fold.
static constexpr int64_t kLanes = 16;

bool mlir::flex::canUseKeyRowDots(int64_t e, int64_t nt) {
  return e > 0 && e % kLanes == 0 && nt > 0 && nt % kLanes == 0;
}

/// One fold level: x holds lane groups of `width` lanes for the keys of
/// its groups, as does y; the result holds groups of width / 2, first
/// x's keys, then y's.
static Value foldPair(OpBuilder &b, Location loc, Value x, Value y,
                      int64_t width) {
  int64_t groups = kLanes / width, half = width / 2;
  SmallVector<int64_t> lo, hi;
  for (int64_t g = 0; g < 2 * groups; ++g) {
    // Lane indices into the concatenation x ++ y.
    int64_t base = g < groups ? g * width : kLanes + (g - groups) * width;
    for (int64_t i = 0; i < half; ++i) {
      lo.push_back(base + i);
      hi.push_back(base + half + i);
    }
  }
  Value l = vector::ShuffleOp::create(b, loc, x, y, lo);
  Value h = vector::ShuffleOp::create(b, loc, x, y, hi);
  return arith::AddFOp::create(b, loc, l, h);
}

/// Lane j of the result = the sum of the lanes of parts[j].
static Value foldSums(OpBuilder &b, Location loc, SmallVector<Value> parts) {
  for (int64_t width = kLanes; parts.size() > 1; width /= 2) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2)
      next.push_back(foldPair(b, loc, parts[i], parts[i + 1], width));
    parts = std::move(next);
  }
  return parts.front();
}

Value mlir::flex::buildKeyRowDots(OpBuilder &b, Location loc, Value q, Value k,
                                  Value s, Value scale) {
  auto qt = cast<RankedTensorType>(q.getType());
  int64_t mt = qt.getDimSize(0), e = qt.getDimSize(1);
  int64_t nt = cast<RankedTensorType>(k.getType()).getDimSize(0);
  auto cI = [&](OpBuilder &ob, int64_t v) {
    return arith::ConstantIndexOp::create(ob, loc, v);
  };
  auto vt = VectorType::get({kLanes}, b.getF32Type());
  Value scaleVec = vector::BroadcastOp::create(b, loc, vt, scale);
  auto keyLoop = scf::ForOp::create(
      b, loc, cI(b, 0), cI(b, nt), cI(b, kLanes), ValueRange{s},
      [&](OpBuilder &kb, Location, Value n0, ValueRange kIt) {
        auto rowLoop = scf::ForOp::create(
            kb, loc, cI(kb, 0), cI(kb, mt), cI(kb, 1), kIt,
            [&](OpBuilder &rb, Location, Value m, ValueRange rIt) {
              SmallVector<Value> parts(kLanes);
              for (int64_t c = 0; c < e; c += kLanes) {
                Value col = cI(rb, c);
                Value qc = readF32Row(rb, loc, q, m, col, kLanes);
                for (int64_t j = 0; j < kLanes; ++j) {
                  Value n = arith::AddIOp::create(rb, loc, n0, cI(rb, j));
                  Value kc = readF32Row(rb, loc, k, n, col, kLanes);
                  parts[j] =
                      c == 0 ? arith::MulFOp::create(rb, loc, qc, kc).getResult()
                             : vector::FMAOp::create(rb, loc, qc, kc, parts[j])
                                   .getResult();
                }
              }
              Value sums = arith::MulFOp::create(
                  rb, loc, foldSums(rb, loc, parts), scaleVec);
              Value out = vector::TransferWriteOp::create(
                              rb, loc, sums, rIt[0], ValueRange{m, n0},
                              ArrayRef<bool>{true})
                              .getResult();
              scf::YieldOp::create(rb, loc, out);
            });
        scf::YieldOp::create(kb, loc, rowLoop.getResults());
      });
  return keyLoop.getResult(0);
}
