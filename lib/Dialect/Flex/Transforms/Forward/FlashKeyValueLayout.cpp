//===- FlashKeyValueLayout.cpp - K/V padded to key blocks, K transposed ---===//
//
// Built once per flex.attention, ahead of its row tiles: K transposed per
// key block to [Bkv, Hkv, Np / Nt, E, Nt] so that the Q.K^T micro-kernel
// reads contiguous keys from a contiguous block,
// padded with zeros along N to a multiple of the key block Nt (the padded
// keys are masked by flex.online_attention's `kv_len`). V, and K rows for
// decode, are read in place: only their last, partial block is copied
// (padded), as a padded copy of all of K and V per call cost decode 28x
// (N = 4000 against 4096).
// The transpose runs per (batch, kv head) in an scf.forall, in parallel
// like the attention loop nest. For the bf16 dot kernels K^T and V are
// packed in pairs instead (FlashBf16Kernel.cpp).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBf16Kernel.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::flex;

static OpFoldResult extent(OpBuilder &b, Location loc, Value v, int64_t d) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.isDynamicDim(d))
    return tensor::DimOp::create(b, loc, v, d).getResult();
  return b.getIndexAttr(t.getDimSize(d));
}

/// `src` padded with zeros along dim 2 to `padded` (static `paddedStatic`).
static Value padKeys(OpBuilder &b, Location loc, Value src, Value n,
                     Value padded, int64_t paddedStatic) {
  auto t = cast<RankedTensorType>(src.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape[2] = paddedStatic;
  SmallVector<OpFoldResult> low(4, b.getIndexAttr(0)), high = low;
  high[2] = getAsOpFoldResult(b.createOrFold<arith::SubIOp>(loc, padded, n));
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(t.getElementType()));
  return tensor::PadOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()),
                               src, low, high, zero);
}

/// dst[NB, E, Nt] = src[Np, E] blocked and transposed (dst[j, e, c] =
/// src[j * Nt + c, e]) for f32 with E and Nt multiples of kB (16, or 8 with
/// 256-bit registers): per kB x kB block, kB vector row reads, a vector.transpose (canonicalized into
/// element moves between the row vectors, which LLVM turns into shuffles)
/// and kB vector row writes, instead of an element-by-element copy of
/// strided scalars (measured 20-30% of a 16-row query over 4096 keys).
static Value transposeBlocks(OpBuilder &b, Location loc, Value src,
                             Value dst, int64_t e, int64_t nt, int64_t kB) {
  auto rowTy = VectorType::get({kB}, b.getF32Type());
  auto blockTy = VectorType::get({kB, kB}, b.getF32Type());
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value step = arith::ConstantIndexOp::create(b, loc, kB);
  Value np = tensor::DimOp::create(b, loc, src, 0);
  Value pad = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value ntV = arith::ConstantIndexOp::create(b, loc, nt);
  auto idx = [&](OpBuilder &nb, Location l, Value base, int64_t i) -> Value {
    return arith::AddIOp::create(nb, l, base,
                                 arith::ConstantIndexOp::create(nb, l, i));
  };
  auto nLoop = scf::ForOp::create(
      b, loc, c0, np, step, ValueRange{dst},
      [&](OpBuilder &nb, Location l, Value n0, ValueRange nIt) {
        Value blk = arith::DivUIOp::create(nb, l, n0, ntV);
        Value col = arith::RemUIOp::create(nb, l, n0, ntV);
        auto eLoop = scf::ForOp::create(
            nb, l, c0, arith::ConstantIndexOp::create(nb, l, e), step, nIt,
            [&](OpBuilder &eb, Location el, Value e0, ValueRange it) {
              Value block = arith::ConstantOp::create(
                  eb, el, DenseElementsAttr::get(blockTy, eb.getF32FloatAttr(0)));
              for (int64_t i = 0; i < kB; ++i) {
                Value row = vector::TransferReadOp::create(
                    eb, el, rowTy, src, ValueRange{idx(eb, el, n0, i), e0}, pad,
                    ArrayRef<bool>{true});
                block = vector::InsertOp::create(eb, el, row, block, i);
              }
              Value tr = vector::TransposeOp::create(eb, el, block,
                                                     ArrayRef<int64_t>{1, 0});
              Value out = it[0];
              for (int64_t j = 0; j < kB; ++j) {
                Value row = vector::ExtractOp::create(eb, el, tr, j);
                out = vector::TransferWriteOp::create(
                          eb, el, row, out,
                          ValueRange{blk, idx(eb, el, e0, j), col},
                          ArrayRef<bool>{true})
                          .getResult();
              }
              scf::YieldOp::create(eb, el, out);
            });
        scf::YieldOp::create(nb, l, eLoop.getResults());
      });
  return nLoop.getResult(0);
}

/// [Bkv, Hkv, Np, E] -> [Bkv, Hkv, Np / Nt, E, Nt]: K transposed per key
/// block, so that one block of K^T is contiguous (E rows of Nt keys). A
/// transpose of all of [Np, E] put the E rows of a block Np floats apart:
/// at Np = 4096 (16 KiB) those rows fell into 8 sets of the L2 cache and
/// evicted each other (f32 Q.K^T at head dim 256 ran 17% slower per flop
/// than at Np = 1024). One transpose per (batch, head) in an scf.forall;
/// `vectorBlock` (16 or 8) when f32 with E and Nt multiples of it (vector
/// blocks of that size), else 0.
static Value transposeKeys(OpBuilder &b, Location loc, Value k, int64_t nt,
                           Value numBlocks, int64_t vectorBlock) {
  auto t = cast<RankedTensorType>(k.getType());
  Type elt = t.getElementType();
  int64_t np = t.getDimSize(2), e = t.getDimSize(3);
  int64_t nb = ShapedType::isDynamic(np) ? ShapedType::kDynamic : np / nt;
  SmallVector<int64_t> shape = {t.getDimSize(0), t.getDimSize(1), nb, e, nt};
  SmallVector<Value> dyn;
  for (int64_t d : {0, 1})
    if (t.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(b, loc, k, d));
  if (ShapedType::isDynamic(nb))
    dyn.push_back(numBlocks);
  Value init = tensor::EmptyOp::create(b, loc, shape, elt, dyn);
  OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  OpFoldResult eA = b.getIndexAttr(e), ntA = b.getIndexAttr(nt);
  OpFoldResult npA = extent(b, loc, k, 2), nbA = extent(b, loc, init, 2);
  auto forall = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{extent(b, loc, k, 0), extent(b, loc, k, 1)},
      ValueRange{init}, std::nullopt);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(forall.getTerminator());
  Value bi = forall.getInductionVars()[0], hi = forall.getInductionVars()[1];
  Value dest = forall.getRegionIterArgs()[0];
  SmallVector<OpFoldResult> offsets = {bi, hi, zero, zero, zero};
  SmallVector<OpFoldResult> sizes = {one, one, nbA, eA, ntA};
  SmallVector<OpFoldResult> unit(5, one);
  Value src = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({np, e}, elt), k, {bi, hi, zero, zero},
      {one, one, npA, eA}, SmallVector<OpFoldResult>(4, one));
  auto blockTy = RankedTensorType::get({nb, e, nt}, elt);
  Value dst = tensor::ExtractSliceOp::create(b, loc, blockTy, dest, offsets,
                                             sizes, unit);
  Value tr;
  if (vectorBlock > 0) {
    tr = transposeBlocks(b, loc, src, dst, e, nt, vectorBlock);
  } else {
    Value rows = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({nb, nt, e}, elt), src,
        SmallVector<ReassociationIndices>{{0, 1}, {2}},
        SmallVector<OpFoldResult>{nbA, ntA, eA});
    tr = linalg::TransposeOp::create(b, loc, rows, dst,
                                     ArrayRef<int64_t>{0, 2, 1})
             .getResult()[0];
  }
  b.setInsertionPointToEnd(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, tr, dest, offsets, sizes,
                                        unit);
  return forall.getResult(0);
}

/// Rows [start, n) of `src` [B, H, N, D] padded with zeros to [B, H, Nt, D].
static Value tailBlock(OpBuilder &b, Location loc, Value src, Value start,
                       Value n, int64_t nt) {
  auto t = cast<RankedTensorType>(src.getType());
  OpFoldResult z = b.getIndexAttr(0), one = b.getIndexAttr(1);
  Value rows = b.createOrFold<arith::SubIOp>(loc, n, start);
  SmallVector<OpFoldResult> sizes = {extent(b, loc, src, 0),
                                     extent(b, loc, src, 1),
                                     getAsOpFoldResult(rows),
                                     b.getIndexAttr(t.getDimSize(3))};
  Value rest = tensor::ExtractSliceOp::create(
      b, loc, src, ArrayRef<OpFoldResult>{z, z, getAsOpFoldResult(start), z},
      sizes, SmallVector<OpFoldResult>(4, one));
  return padKeys(b, loc, rest, rows, arith::ConstantIndexOp::create(b, loc, nt),
                 nt);
}

KeyValueLayout mlir::flex::buildKeyValueLayout(OpBuilder &b, Location loc,
                                               Value key, Value value,
                                               const FlashConfig &cfg,
                                               bool peelTail) {
  auto kTy = cast<RankedTensorType>(key.getType());
  int64_t nStatic = kTy.getDimSize(2), nt = cfg.tileN;
  KeyValueLayout layout;
  layout.sourceKey = key;
  layout.transposedKey = !cfg.keyRows;
  Value n = getValueOrCreateConstantIndexOp(b, loc, extent(b, loc, key, 2));
  layout.kvLen = n;
  Value ntV = arith::ConstantIndexOp::create(b, loc, nt);
  layout.numBlocks = b.createOrFold<arith::CeilDivUIOp>(loc, n, ntV);
  layout.fullBlocks = layout.numBlocks;
  bool pad = ShapedType::isDynamic(nStatic) || nStatic % nt != 0;
  layout.keys = key;
  layout.values = value;
  layout.pairedKey = cfg.pairedKey;
  layout.pairedValue = cfg.pairedValue;
  // Read in place with a padded last block: V (unless packed in pairs) and
  // K rows (decode); a transposed or packed K is a copy anyway.
  bool peelKey = peelTail && cfg.keyRows && !cfg.pairedKey;
  bool peelValue = peelTail && !cfg.pairedValue;
  if (pad && (peelKey || peelValue)) {
    layout.fullBlocks = b.createOrFold<arith::DivUIOp>(loc, n, ntV);
    Value start = b.createOrFold<arith::MulIOp>(loc, layout.fullBlocks, ntV);
    if (peelKey)
      layout.tailKeys = tailBlock(b, loc, key, start, n, nt);
    if (peelValue)
      layout.tailValues = tailBlock(b, loc, value, start, n, nt);
  }
  if (pad && !(peelKey && peelValue)) {
    Value np = b.createOrFold<arith::MulIOp>(loc, layout.numBlocks, ntV);
    int64_t npStatic = ShapedType::isDynamic(nStatic)
                           ? ShapedType::kDynamic
                           : llvm::divideCeil(nStatic, nt) * nt;
    if (!peelKey)
      layout.keys = padKeys(b, loc, key, n, np, npStatic);
    if (!peelValue)
      layout.values = padKeys(b, loc, value, n, np, npStatic);
  }
  if (layout.pairedValue)
    layout.values = packValuePairs(b, loc, layout.values);
  if (layout.pairedKey) {
    layout.transposedKey = false;
    layout.keys = packKeyPairs(b, loc, layout.keys, nt);
  } else if (layout.transposedKey) {
    // Np is a multiple of Nt.
    int64_t e = kTy.getDimSize(3);
    int64_t kB = vectorIsa(cfg.vectorBits).lanes; // 16, or 8 for 256 bits
    bool blocks = cfg.vectorize && kTy.getElementType().isF32() &&
                  e % kB == 0 && nt % kB == 0;
    layout.keys = transposeKeys(b, loc, layout.keys, nt, layout.numBlocks,
                                blocks ? kB : 0);
  }
  return layout;
}
