//===- FlashBackwardOperands.cpp - operand tiles of a backward tile -------===//
//
// The tensors a backward tile (FlashBackwardTile.cpp) works on: Q, dO, lse
// and delta padded to whole query blocks and cut into row tiles, their
// transposes for AMX, blocks of the key/value layout, per-tile scratch,
// key-row accumulation into grad_key / grad_value, and element-type
// conversion.
//
//===----------------------------------------------------------------------===//
#include "FlashBackwardOperands.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashBackwardLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::flex;
using utils::IteratorType;

namespace mlir::flex::backward_tile {

/// The offsets of `v` in `source` when `v` is `source` (zeros) or a
/// tensor.extract_slice of it.
std::optional<SmallVector<OpFoldResult>> offsetsIn(OpBuilder &b, Value v,
                                                   Value source) {
  if (!source)
    return std::nullopt;
  auto rank = cast<RankedTensorType>(v.getType()).getRank();
  if (v == source)
    return SmallVector<OpFoldResult>(rank, b.getIndexAttr(0));
  auto slice = v.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice || slice.getSource() != source)
    return std::nullopt;
  return SmallVector<OpFoldResult>(slice.getMixedOffsets());
}

/// `src` padded with zeros along dim 2 from `m` rows to `mp`.
Value padRows(OpBuilder &b, Location loc, Value src, Value m, Value mp,
              int64_t mpStatic) {
  auto t = cast<RankedTensorType>(src.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape[2] = mpStatic;
  SmallVector<OpFoldResult> low(t.getRank(), b.getIndexAttr(0)), high = low;
  high[2] = getAsOpFoldResult(b.createOrFold<arith::SubIOp>(loc, mp, m));
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(t.getElementType()));
  return tensor::PadOp::create(b, loc,
                               RankedTensorType::get(shape, t.getElementType()),
                               src, low, high, zero);
}

/// Elementwise `f(x)` of `src` into a new tensor of element type `to`.
Value convert(OpBuilder &b, Location loc, Value src, Value dest) {
  auto t = cast<RankedTensorType>(src.getType());
  Type to = cast<RankedTensorType>(dest.getType()).getElementType();
  AffineMap id = AffineMap::getMultiDimIdentityMap(t.getRank(), b.getContext());
  SmallVector<IteratorType> par(t.getRank(), IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{dest.getType()}, ValueRange{src},
             ValueRange{dest}, ArrayRef<AffineMap>{id, id}, par,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value x = a[0];
               unsigned from = x.getType().getIntOrFloatBitWidth(),
                        width = to.getIntOrFloatBitWidth();
               if (from < width)
                 x = arith::ExtFOp::create(nb, l, to, x);
               else if (from > width)
                 x = arith::TruncFOp::create(nb, l, to, x);
               linalg::YieldOp::create(nb, l, x);
             })
      .getResult(0);
}

/// Scratch tensors created once per tile: at the start of the enclosing
/// scf.forall iteration (private to it), else before `anchor`. All are
/// slices of one tensor.empty at distinct offsets: separate tensor.empty
/// ops of one shape would be merged by CSE into one value, and two live
/// tiles (S and dP, dK_j and dV_j) would then share a buffer.
SmallVector<Value> scratches(OpBuilder &b, Location loc, Operation *anchor,
                             ArrayRef<std::pair<int64_t, int64_t>> shapes,
                             Type elt) {
  if (!elt)
    elt = b.getF32Type();
  OpBuilder::InsertionGuard g(b);
  if (auto forall = anchor->getParentOfType<scf::ForallOp>())
    b.setInsertionPointToStart(forall.getBody());
  int64_t rows = 0, cols = 0;
  for (auto [r, c] : shapes) {
    rows = std::max(rows, r);
    cols = std::max(cols, c);
  }
  int64_t n = static_cast<int64_t>(shapes.size());
  Value all = tensor::EmptyOp::create(b, loc, {n, rows, cols}, elt);
  OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
  SmallVector<Value> out;
  for (auto [i, shape] : llvm::enumerate(shapes)) {
    auto [r, c] = shape;
    out.push_back(tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({r, c}, elt), all,
        ArrayRef<OpFoldResult>{b.getIndexAttr(i), z, z},
        ArrayRef<OpFoldResult>{one, b.getIndexAttr(r), b.getIndexAttr(c)},
        ArrayRef<OpFoldResult>{one, one, one}));
  }
  return out;
}

/// [Mt(, W)] tile at (bl, g, m0) of a [Bt, G, Mp(, W)] tensor.
Value rowTile(OpBuilder &b, Location loc, Value src, Value bl, Value g,
              Value m0, int64_t mt) {
  auto t = cast<RankedTensorType>(src.getType());
  OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
  SmallVector<OpFoldResult> offs = {bl, g, m0},
                            sizes = {one, one, b.getIndexAttr(mt)};
  SmallVector<int64_t> shape = {mt};
  if (t.getRank() == 4) {
    offs.push_back(z);
    sizes.push_back(b.getIndexAttr(t.getDimSize(3)));
    shape.push_back(t.getDimSize(3));
  }
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(shape, t.getElementType()), src, offs,
      sizes, SmallVector<OpFoldResult>(t.getRank(), one));
}

/// [rows, Mt] tile at (bl, g, 0, m0) of a [Bt, G, rows, Mp] tensor.
Value columnTile(OpBuilder &b, Location loc, Value src, Value bl, Value g,
                 Value m0, int64_t rows, int64_t mt) {
  auto t = cast<RankedTensorType>(src.getType());
  OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({rows, mt}, t.getElementType()), src,
      ArrayRef<OpFoldResult>{bl, g, z, m0},
      ArrayRef<OpFoldResult>{one, one, b.getIndexAttr(rows),
                             b.getIndexAttr(mt)},
      SmallVector<OpFoldResult>(4, one));
}

/// [B, G, M, W] -> a fresh [B, G, W, M] (M, W multiples of 16; into an
/// alloc_tensor: separate tensor.empty ops of one shape would be merged by
/// CSE, and Q^T and dO^T then share a buffer). Per 16 x 16 block: 16 row
/// reads, a vector.transpose and 16 row writes (a linalg.transpose became
/// element moves: 13% of an S=1024 D=128 backward).
Value transposeRows(OpBuilder &b, Location loc, Value src) {
  constexpr int64_t kB = 16;
  auto t = cast<RankedTensorType>(src.getType());
  Type elt = t.getElementType();
  SmallVector<int64_t> shape = {t.getDimSize(0), t.getDimSize(1),
                                t.getDimSize(3), t.getDimSize(2)};
  SmallVector<Value> dyn;
  for (int64_t d : {0, 1, 3, 2})
    if (t.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(b, loc, src, d));
  Value init = bufferization::AllocTensorOp::create(
      b, loc, RankedTensorType::get(shape, elt), dyn);
  auto rowTy = VectorType::get({kB}, elt);
  auto blockTy = VectorType::get({kB, kB}, elt);
  Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1), step = cIdx(b, loc, kB);
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
  auto dim = [&](int64_t d) { return emitDim(b, loc, src, d); };
  Value nb = dim(0), ng = dim(1), nm = dim(2), nw = dim(3);
  auto plus = [&](OpBuilder &nb2, Location l, Value x, int64_t i) -> Value {
    return i ? arith::AddIOp::create(nb2, l, x, cIdx(nb2, l, i)).getResult()
             : x;
  };
  SmallVector<Value> res = forLoop(
      b, loc, c0, nb, init,
      [&](OpBuilder &bb, Location l, Value bi, ValueRange bIt) {
        return forLoop(
            bb, l, c0, ng, bIt,
            [&](OpBuilder &gb, Location l2, Value gi, ValueRange gIt) {
              auto mLoop = scf::ForOp::create(
                  gb, l2, c0, nm, step, gIt,
                  [&](OpBuilder &mb, Location l3, Value m0, ValueRange mIt) {
                    auto wLoop = scf::ForOp::create(
                        mb, l3, c0, nw, step, mIt,
                        [&](OpBuilder &wb, Location l4, Value w0,
                            ValueRange it) {
                          Value block = arith::ConstantOp::create(
                              wb, l4,
                              DenseElementsAttr::get(blockTy,
                                                     wb.getZeroAttr(elt)));
                          for (int64_t i = 0; i < kB; ++i) {
                            Value row = vector::TransferReadOp::create(
                                wb, l4, rowTy, src,
                                ValueRange{bi, gi, plus(wb, l4, m0, i), w0},
                                pad, ArrayRef<bool>{true});
                            block =
                                vector::InsertOp::create(wb, l4, row, block, i);
                          }
                          Value tr = vector::TransposeOp::create(
                              wb, l4, block, ArrayRef<int64_t>{1, 0});
                          Value out = it[0];
                          for (int64_t j = 0; j < kB; ++j) {
                            Value row =
                                vector::ExtractOp::create(wb, l4, tr, j);
                            out =
                                vector::TransferWriteOp::create(
                                    wb, l4, row, out,
                                    ValueRange{bi, gi, plus(wb, l4, w0, j), m0},
                                    ArrayRef<bool>{true})
                                    .getResult();
                          }
                          scf::YieldOp::create(wb, l4, out);
                        });
                    scf::YieldOp::create(mb, l3, wLoop.getResults());
                  });
              return SmallVector<Value>(mLoop.getResults());
            });
      });
  return res[0];
}

/// [rows, cols] block at (kb, kh, x, 0, 0) of a 5-d layout, or (kb, kh, x, 0)
/// of a 4-d one.
Value layoutTile(OpBuilder &b, Location loc, Value src, Value kb, Value kh,
                 Value x, int64_t rows, int64_t cols) {
  auto t = cast<RankedTensorType>(src.getType());
  OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
  SmallVector<OpFoldResult> offs = {kb, kh, x}, sizes = {one, one};
  if (t.getRank() == 5) {
    offs.append({z, z});
    sizes.append({one, b.getIndexAttr(rows), b.getIndexAttr(cols)});
  } else {
    offs.push_back(z);
    sizes.append({b.getIndexAttr(rows), b.getIndexAttr(cols)});
  }
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({rows, cols}, t.getElementType()), src,
      offs, sizes, SmallVector<OpFoldResult>(t.getRank(), one));
}

/// dst[kb, 0, n0 : n0 + valid, :] = init[...] + acc[0 : valid, :] (sum in
/// f32, rounded once to dst's element type); `transposed`: acc is [W, Nt]
/// and its columns are added.
Value addKeyRows(OpBuilder &b, Location loc, Value init, Value dst, Value acc,
                 Value kb, Value n0, OpFoldResult valid, bool transposed) {
  auto dTy = cast<RankedTensorType>(dst.getType());
  int64_t w = dTy.getDimSize(3);
  OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
  std::optional<int64_t> vs = getConstantIntValue(valid);
  int64_t rows = vs ? *vs : ShapedType::kDynamic;
  SmallVector<int64_t> aShape = {rows, w};
  SmallVector<OpFoldResult> aSizes = {valid, b.getIndexAttr(w)};
  if (transposed) {
    std::swap(aShape[0], aShape[1]);
    std::swap(aSizes[0], aSizes[1]);
  }
  Value a = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(aShape, b.getF32Type()), acc,
      ArrayRef<OpFoldResult>{z, z}, aSizes, ArrayRef<OpFoldResult>{one, one});
  SmallVector<OpFoldResult> offs = {kb, z, n0, z},
                            sizes = {one, one, valid, b.getIndexAttr(w)},
                            strides(4, one);
  auto sliceTy = RankedTensorType::get({rows, w}, dTy.getElementType());
  Value d = tensor::ExtractSliceOp::create(b, loc, sliceTy, init, offs, sizes,
                                           strides);
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, b.getContext());
  AffineMap aMap = transposed ? AffineMap::getPermutationMap(
                                    ArrayRef<unsigned>{1, 0}, b.getContext())
                              : id;
  Type elt = dTy.getElementType();
  Value out = tensor::ExtractSliceOp::create(b, loc, sliceTy, dst, offs, sizes,
                                             strides);
  Value sum = linalg::GenericOp::create(
                  b, loc, TypeRange{sliceTy}, ValueRange{a, d}, ValueRange{out},
                  ArrayRef<AffineMap>{aMap, id, id},
                  ArrayRef<IteratorType>{IteratorType::parallel,
                                         IteratorType::parallel},
                  [&](OpBuilder &nb, Location l, ValueRange x) {
                    Value old = x[1];
                    if (!elt.isF32())
                      old = arith::ExtFOp::create(nb, l, nb.getF32Type(), old);
                    Value s = arith::AddFOp::create(nb, l, old, x[0]);
                    if (!elt.isF32())
                      s = arith::TruncFOp::create(nb, l, elt, s);
                    linalg::YieldOp::create(nb, l, s);
                  })
                  .getResult(0);
  return tensor::InsertSliceOp::create(b, loc, sum, dst, offs, sizes, strides);
}

SmallVector<Value> forLoop(OpBuilder &b, Location loc, Value lb, Value ub,
                           ValueRange init, BodyFn body) {
  auto loop = scf::ForOp::create(
      b, loc, lb, ub, cIdx(b, loc, 1), init,
      [&](OpBuilder &nb, Location l, Value iv, ValueRange it) {
        scf::YieldOp::create(nb, l, body(nb, l, iv, it));
      });
  return SmallVector<Value>(loop.getResults());
}

} // namespace mlir::flex::backward_tile
