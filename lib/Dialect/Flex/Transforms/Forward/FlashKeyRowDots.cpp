//===- FlashKeyRowDots.cpp - Q.K^T with K as rows, 16 (or 8) keys a step -===//
//
// Decode-sized row tiles read K as it is ([Nt, E] rows) instead of a
// transposed copy. Each score S[m, n] is then a dot product of two rows.
// Summing every product vector down to one scalar costs four shuffle+add
// levels per key; here the keys go sixteen at a time:
//
//   part[j] = sum over 16-lane chunks c of Q[m, c] * K[n0 + j, c]  (FMA)
//   S[m, n0 : n0 + 16] = fold(part[0..15])
//
// The parts are computed one key after another, so that K is read row by
// row, in memory order: the hardware prefetchers follow that stream, while
// sixteen rows read chunk by chunk in step left decode (which streams all
// of K from memory) at about half the bandwidth.
//
// With 256-bit registers (vector-bits=256) the same goes eight keys at a
// time on 8-lane vectors, in three levels.
//
// fold halves sixteen 16-lane vectors to one in four levels: each level
// pairs the vectors, and one shuffle takes the lower half of every lane
// group of both, another the upper half, and an add sums them. The result
// lane j holds key j's sum, so it is written to S as one vector. Pairs are
// folded as soon as both exist, which keeps few partial vectors live.
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

/// Most independent FMA chains of one dot product.
static constexpr int64_t kMaxChains = 4;

bool mlir::flex::canUseKeyRowDots(int64_t e, int64_t nt, int64_t lanes) {
  return e > 0 && e % lanes == 0 && nt > 0 && nt % lanes == 0;
}

/// One fold level: x holds lane groups of `width` lanes for the keys of
/// its groups, as does y; the result holds groups of width / 2, first
/// x's keys, then y's.
static Value foldPair(OpBuilder &b, Location loc, Value x, Value y,
                      int64_t width, int64_t lanes) {
  int64_t groups = lanes / width, half = width / 2;
  SmallVector<int64_t> lo, hi;
  for (int64_t g = 0; g < 2 * groups; ++g) {
    // Lane indices into the concatenation x ++ y.
    int64_t base = g < groups ? g * width : lanes + (g - groups) * width;
    for (int64_t i = 0; i < half; ++i) {
      lo.push_back(base + i);
      hi.push_back(base + half + i);
    }
  }
  Value l = vector::ShuffleOp::create(b, loc, x, y, lo);
  Value h = vector::ShuffleOp::create(b, loc, x, y, hi);
  return arith::AddFOp::create(b, loc, l, h);
}

/// Folds `lanes`-lane vectors pushed one at a time: lane j of the final
/// vector is the sum of the lanes of the j-th vector pushed. Each entry
/// holds lane groups of `width` lanes; two entries of equal width fold
/// into one of half the width (the pairing of a four-level tree).
class LaneSumFold {
public:
  LaneSumFold(OpBuilder &b, Location loc, int64_t lanes)
      : b(b), loc(loc), lanes(lanes) {}

  void push(Value part) {
    stack.push_back({part, lanes});
    while (stack.size() > 1 &&
           stack.back().second == stack[stack.size() - 2].second) {
      auto [y, width] = stack.pop_back_val();
      Value x = stack.pop_back_val().first;
      stack.push_back({foldPair(b, loc, x, y, width, lanes), width / 2});
    }
  }

  /// The sums, once `lanes` vectors were pushed.
  Value result() const {
    assert(stack.size() == 1 && stack.front().second == 1 &&
           "expected `lanes` pushed vectors");
    return stack.front().first;
  }

private:
  OpBuilder &b;
  Location loc;
  int64_t lanes;
  SmallVector<std::pair<Value, int64_t>> stack;
};

/// Lane-wise products of one row of K with the row of Q whose 16-lane
/// chunks are `qc`, summed over the chunks: in a few independent FMA
/// chains (chunk c goes to chain c mod chains), added at the end. Short
/// chains let the core run ahead to the loads of the next rows; one chain
/// per key halved the bandwidth of a decode that streams K from memory.
static Value rowDot(OpBuilder &b, Location loc, ArrayRef<Value> qc,
                    function_ref<Value(int64_t)> keyChunk) {
  int64_t chunks = qc.size();
  int64_t chains =
      std::min<int64_t>(kMaxChains, std::max<int64_t>(1, chunks / 2));
  SmallVector<Value> acc(chains);
  for (int64_t c = 0; c < chunks; ++c) {
    Value kc = keyChunk(c);
    Value &a = acc[c % chains];
    a = a ? vector::FMAOp::create(b, loc, qc[c], kc, a).getResult()
          : arith::MulFOp::create(b, loc, qc[c], kc).getResult();
  }
  for (int64_t width = 1; width < chains; width *= 2)
    for (int64_t i = 0; i + width < chains; i += 2 * width)
      acc[i] = arith::AddFOp::create(b, loc, acc[i], acc[i + width]);
  return acc.front();
}

Value mlir::flex::buildKeyRowDots(OpBuilder &b, Location loc, Value q, Value k,
                                  Value s, Value scale, int64_t lanes) {
  auto qt = cast<RankedTensorType>(q.getType());
  int64_t mt = qt.getDimSize(0), e = qt.getDimSize(1);
  int64_t nt = cast<RankedTensorType>(k.getType()).getDimSize(0);
  auto cI = [&](OpBuilder &ob, int64_t v) {
    return arith::ConstantIndexOp::create(ob, loc, v);
  };
  auto vt = VectorType::get({lanes}, b.getF32Type());
  Value scaleVec = vector::BroadcastOp::create(b, loc, vt, scale);
  auto keyLoop = scf::ForOp::create(
      b, loc, cI(b, 0), cI(b, nt), cI(b, lanes), ValueRange{s},
      [&](OpBuilder &kb, Location, Value n0, ValueRange kIt) {
        auto rowLoop = scf::ForOp::create(
            kb, loc, cI(kb, 0), cI(kb, mt), cI(kb, 1), kIt,
            [&](OpBuilder &rb, Location, Value m, ValueRange rIt) {
              SmallVector<Value> qc;
              for (int64_t c = 0; c < e; c += lanes)
                qc.push_back(readF32Row(rb, loc, q, m, cI(rb, c), lanes));
              LaneSumFold fold(rb, loc, lanes);
              for (int64_t j = 0; j < lanes; ++j) {
                Value n = arith::AddIOp::create(rb, loc, n0, cI(rb, j));
                fold.push(rowDot(rb, loc, qc, [&](int64_t c) {
                  return readF32Row(rb, loc, k, n, cI(rb, c * lanes), lanes);
                }));
              }
              Value sums =
                  arith::MulFOp::create(rb, loc, fold.result(), scaleVec);
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
