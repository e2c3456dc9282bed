//===- FlashBackwardOperands.h - operand tiles of a backward tile -*- C++
//-*-===//
//
// Builders of FlashBackwardOperands.cpp, used by FlashBackwardTile.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_LIB_TRANSFORMS_BACKWARD_FLASHBACKWARDOPERANDS_H
#define TORCH_MLIR_FLEX_LIB_TRANSFORMS_BACKWARD_FLASHBACKWARDOPERANDS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include <optional>

namespace mlir::flex::backward_tile {

inline Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// The offsets of `v` in `source` when `v` is `source` (zeros) or a
/// tensor.extract_slice of it.
std::optional<SmallVector<OpFoldResult>> offsetsIn(OpBuilder &b, Value v,
                                                   Value source);

/// `src` padded with zeros along dim 2 from `m` rows to `mp`.
Value padRows(OpBuilder &b, Location loc, Value src, Value m, Value mp,
              int64_t mpStatic);

/// Elementwise `f(x)` of `src` into a new tensor of element type `to`.
Value convert(OpBuilder &b, Location loc, Value src, Value dest);

/// Scratch tensors created once per tile: at the start of the enclosing
/// scf.forall iteration (private to it), else before `anchor`. All are
/// slices of one tensor.empty at distinct offsets: separate tensor.empty
/// ops of one shape would be merged by CSE into one value, and two live
/// tiles (S and dP, dK_j and dV_j) would then share a buffer.
SmallVector<Value> scratches(OpBuilder &b, Location loc, Operation *anchor,
                             ArrayRef<std::pair<int64_t, int64_t>> shapes,
                             Type elt = {});

/// [Mt(, W)] tile at (bl, g, m0) of a [Bt, G, Mp(, W)] tensor.
Value rowTile(OpBuilder &b, Location loc, Value src, Value bl, Value g,
              Value m0, int64_t mt);

/// [rows, Mt] tile at (bl, g, 0, m0) of a [Bt, G, rows, Mp] tensor.
Value columnTile(OpBuilder &b, Location loc, Value src, Value bl, Value g,
                 Value m0, int64_t rows, int64_t mt);

/// [B, G, M, W] -> a fresh [B, G, W, M] (M, W multiples of 16; into an
/// alloc_tensor: separate tensor.empty ops of one shape would be merged by
/// CSE, and Q^T and dO^T then share a buffer). Per 16 x 16 block: 16 row
/// reads, a vector.transpose and 16 row writes (a linalg.transpose became
/// element moves: 13% of an S=1024 D=128 backward).
Value transposeRows(OpBuilder &b, Location loc, Value src);

/// [rows, cols] block at (kb, kh, x, 0, 0) of a 5-d layout, or (kb, kh, x, 0)
/// of a 4-d one.
Value layoutTile(OpBuilder &b, Location loc, Value src, Value kb, Value kh,
                 Value x, int64_t rows, int64_t cols);

/// dst[kb, 0, n0 : n0 + valid, :] = init[...] + acc[0 : valid, :] (sum in
/// f32, rounded once to dst's element type); `transposed`: acc is [W, Nt]
/// and its columns are added.
Value addKeyRows(OpBuilder &b, Location loc, Value init, Value dst, Value acc,
                 Value kb, Value n0, OpFoldResult valid,
                 bool transposed = false);

using BodyFn =
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange)>;
/// scf.for from `lb` to `ub` (step 1) carrying `init`; its results.
SmallVector<Value> forLoop(OpBuilder &b, Location loc, Value lb, Value ub,
                           ValueRange init, BodyFn body);

} // namespace mlir::flex::backward_tile

#endif
