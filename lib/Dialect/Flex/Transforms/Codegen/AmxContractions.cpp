//===- AmxContractions.cpp - marked bf16 tile contractions on AMX ---------===//
//
// flex-amx-contractions: the tile contractions that flex-to-flash and
// flex-backward-to-flash mark `flex.amx` with their `amx` option
// (buildAmxProduct, FlashBf16Kernel.cpp), after bufferization, become AMX
// tile loops. Such an op is a linalg.generic on memrefs over (m, k, n):
//   dest[m, n] += f32(lhs[m, k]) * f32(rhs[k floordiv 2, 2 n + k mod 2])
// with lhs [M, K] bf16 row-major and rhs the pair-packed [K/2, 2 N] bf16
// (AMX's "VNNI" B layout), dest [M, N] f32; M, N multiples of 16, K of 32,
// unit innermost strides. Per 2 x 2 (or fewer) 16 x 16 tiles of dest
// (scf.for over both): amx.tile_load of them (tile_zero when a zero
// linalg.fill of dest right before is folded), K/32 x (tile_load of the lhs
// 16 x 32 and rhs 16 x 32 tiles, tile_mulf per pair), tile_store
// (tdpbf16ps; the reduction is unrolled: AMX tiles cannot be loop-carried
// values). A marked op that does not fit is an error (the marker promises
// the shape).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXAMXCONTRACTIONS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// f32 lanes of a tile row, bf16 pairs per tile row, tile rows.
constexpr int64_t kTileN = 16, kTileK = 32, kTileM = 16;

/// Why `op` (marked) cannot run on AMX, or empty.
std::string unfit(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != 3)
    return "expected a linalg.generic on memrefs with two inputs, one init "
           "and three loops";
  auto lhs = cast<MemRefType>(op.getDpsInputs()[0].getType());
  auto rhs = cast<MemRefType>(op.getDpsInputs()[1].getType());
  auto dst = cast<MemRefType>(op.getDpsInits()[0].getType());
  if (!lhs.getElementType().isBF16() || !rhs.getElementType().isBF16() ||
      !dst.getElementType().isF32())
    return "expected bf16 x bf16 -> f32";
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || dst.getRank() != 2 ||
      !lhs.hasStaticShape() || !rhs.hasStaticShape() || !dst.hasStaticShape())
    return "expected static 2-d operands";
  int64_t m = dst.getDimSize(0), n = dst.getDimSize(1), k = lhs.getDimSize(1);
  if (lhs.getDimSize(0) != m || rhs.getDimSize(0) * 2 != k ||
      rhs.getDimSize(1) != 2 * n)
    return "expected lhs [M, K], rhs [K/2, 2 N], dest [M, N]";
  if (m % kTileM || n % kTileN || k % kTileK)
    return "expected M, N multiples of 16 and K of 32";
  for (MemRefType t : {lhs, rhs, dst}) {
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(t.getStridesAndOffset(strides, offset)) || strides[1] != 1)
      return "expected unit innermost strides";
  }
  MLIRContext *ctx = op.getContext();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
             d2 = getAffineDimExpr(2, ctx);
  SmallVector<AffineMap> want = {
      AffineMap::get(3, 0, {d0, d1}, ctx),
      AffineMap::get(3, 0, {d1.floorDiv(2), d2 * 2 + d1 % 2}, ctx),
      AffineMap::get(3, 0, {d0, d2}, ctx)};
  if (op.getIndexingMapsArray() != ArrayRef<AffineMap>(want))
    return "expected the maps (m, k), (k floordiv 2, 2 n + k mod 2), (m, n)";
  return "";
}

/// True when `op` is a linalg.fill of +0.0 into `dst` (its buffer zeroed
/// right before the product: the accumulators start as tile_zero instead).
bool zeroFillOf(Operation *op, Value dst) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op);
  if (!fill || !fill.hasPureBufferSemantics() ||
      fill.getDpsInits()[0] != dst)
    return false;
  auto cst = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto f = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
  return f && f.getValue().isPosZero();
}

/// Tiles of dest per step along one dimension: 2 when they divide its tile
/// count (2 x 2 accumulators + 2 + 2 operand tiles = the 8 tile
/// registers, so that the tdpbf16ps of four accumulators overlap), else 1.
int64_t tilesPerStep(int64_t tiles) { return tiles % 2 == 0 ? 2 : 1; }

void lowerToAmx(RewriterBase &rw, linalg::GenericOp op) {
  Location loc = op.getLoc();
  Value lhs = op.getDpsInputs()[0], rhs = op.getDpsInputs()[1],
        dst = op.getDpsInits()[0];
  auto dTy = cast<MemRefType>(dst.getType());
  int64_t m = dTy.getDimSize(0), n = dTy.getDimSize(1),
          k = cast<MemRefType>(lhs.getType()).getDimSize(1);
  Operation *prev = op->getPrevNode();
  bool zeroed = zeroFillOf(prev, dst);
  if (zeroed)
    rw.eraseOp(prev);
  int64_t ri = tilesPerStep(m / kTileM), rj = tilesPerStep(n / kTileN);
  auto cI = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto plus = [&](OpBuilder &b, Value x, int64_t v) -> Value {
    return v ? arith::AddIOp::create(b, loc, x, cI(b, v)).getResult() : x;
  };
  rw.setInsertionPoint(op);
  Value c0 = cI(rw, 0);
  auto accTy = amx::TileType::get({kTileM, kTileN}, rw.getF32Type());
  auto inTy = amx::TileType::get({kTileM, kTileK}, rw.getBF16Type());
  scf::ForOp::create(
      rw, loc, c0, cI(rw, m), cI(rw, ri * kTileM), ValueRange{},
      [&](OpBuilder &ib, Location, Value row, ValueRange) {
        scf::ForOp::create(
            ib, loc, c0, cI(ib, n), cI(ib, rj * kTileN), ValueRange{},
            [&](OpBuilder &jb, Location, Value col, ValueRange) {
              // rhs pairs of column col: pair column 2 col.
              Value pairCol = arith::MulIOp::create(jb, loc, col, cI(jb, 2));
              SmallVector<Value> acc;
              for (int64_t a = 0; a < ri; ++a)
                for (int64_t c = 0; c < rj; ++c)
                  acc.push_back(
                      zeroed ? amx::TileZeroOp::create(jb, loc, accTy)
                                   .getResult()
                             : amx::TileLoadOp::create(
                                   jb, loc, accTy, dst,
                                   ValueRange{plus(jb, row, a * kTileM),
                                              plus(jb, col, c * kTileN)})
                                   .getResult());
              for (int64_t s = 0; s < k / kTileK; ++s) {
                SmallVector<Value> as, bs;
                for (int64_t a = 0; a < ri; ++a)
                  as.push_back(amx::TileLoadOp::create(
                      jb, loc, inTy, lhs,
                      ValueRange{plus(jb, row, a * kTileM),
                                 cI(jb, s * kTileK)}));
                for (int64_t c = 0; c < rj; ++c)
                  bs.push_back(amx::TileLoadOp::create(
                      jb, loc, inTy, rhs,
                      ValueRange{cI(jb, s * kTileK / 2),
                                 plus(jb, pairCol, 2 * c * kTileN)}));
                for (int64_t a = 0; a < ri; ++a)
                  for (int64_t c = 0; c < rj; ++c)
                    acc[a * rj + c] = amx::TileMulFOp::create(
                        jb, loc, accTy, as[a], bs[c], acc[a * rj + c]);
              }
              for (int64_t a = 0; a < ri; ++a)
                for (int64_t c = 0; c < rj; ++c)
                  amx::TileStoreOp::create(
                      jb, loc, dst,
                      ValueRange{plus(jb, row, a * kTileM),
                                 plus(jb, col, c * kTileN)},
                      acc[a * rj + c]);
              scf::YieldOp::create(jb, loc);
            });
        scf::YieldOp::create(ib, loc);
      });
  rw.eraseOp(op);
}

struct FlexAmxContractionsPass
    : public flex::impl::FlexAmxContractionsBase<FlexAmxContractionsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op->hasAttr("flex.amx"))
        ops.push_back(op);
    });
    IRRewriter rw(&getContext());
    for (linalg::GenericOp op : ops) {
      std::string why = unfit(op);
      if (!why.empty()) {
        op.emitOpError("marked flex.amx but cannot run on AMX tiles: ") << why;
        return signalPassFailure();
      }
      lowerToAmx(rw, op);
    }
  }
};

} // namespace
