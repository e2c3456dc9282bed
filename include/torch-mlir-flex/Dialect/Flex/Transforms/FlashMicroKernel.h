//===- FlashMicroKernel.h - broadcast-FMA tile contraction -----*- C++ -*-===//
//
// The register-blocked vector micro-kernel shared by the Q.K^T and P.V
// contractions of the tiled flash lowering (flex-to-flash).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHMICROKERNEL_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHMICROKERNEL_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::flex {

/// Operands of one tile contraction
///   dest[m, :] = init[m, :] + sum_k lhs[m, k] * rhs[k, :]
/// with init = dest[m, :] * rowScale[m] when `rowScale` is set, else 0;
/// with `outScale` (an f32 scalar) the sums are multiplied by it before
/// they are written (dest = outScale * sum: Q.K^T's softmax scale, in
/// registers instead of another pass over S).
/// Shapes are static: lhs [rows, reduction], rhs [reduction, width],
/// dest [rows, width] (f32), rowScale [rows] (f32). lhs and rhs may have
/// any float element type; products and sums are in f32.
/// `chunk`, when set, is the column chunk width (see kQKChunk).
/// With `accumulate` (no rowScale) init = dest[m, :]: dest += lhs . rhs.
/// With `lhsTransposed` lhs is stored [reduction, rows] and read as its
/// transpose (the backward's P^T.dO and dS^T.Q on the [Mt, Nt] tiles).
/// `lhsScratch` (the bf16 dot kernel only, FlashBf16Kernel.h): the bf16
/// tensor lhs is rounded into, [rows, reduction], or pair-packed into with
/// `lhsTransposed`, [reduction / 2, 2 rows]; null: a fresh tensor.
struct BroadcastFmaTiles {
  Value lhs, rhs, dest, rowScale;
  int64_t rows = 0, reduction = 0, width = 0;
  Value outScale = {};
  int64_t chunk = 0;
  bool accumulate = false, lhsTransposed = false;
  Value lhsScratch = {};
  /// The vector registers the kernel blocks for (VectorIsa).
  int64_t vectorBits = 512;
};

/// The registers the micro-kernels block for, from the passes' option
/// `vector-bits`: 512 (AVX-512: 32 zmm registers of 16 f32 lanes, 16 of
/// them for accumulators, the rest for rhs rows and broadcasts) or 256
/// (AVX2+FMA: 16 ymm registers of 8 f32 lanes, 12 of them for
/// accumulators: a 4 x 3 block leaves 3 for the rhs row and 1 for the
/// broadcast lhs scalar, as the 6 x 2 blocks of AVX2 GEMM kernels do).
struct VectorIsa {
  int64_t bits, lanes, accRegs;
};
VectorIsa vectorIsa(int64_t vectorBits);
/// Whether `vectorBits` is a width the kernels block for (256 or 512).
bool isSupportedVectorBits(int64_t vectorBits);
/// Chunk width of Q.K^T's score columns for `vectorBits`: kQKChunk (8 rows
/// x 2 zmm) for 512, kQKChunk256 (4 rows x 3 ymm) for 256.
int64_t qkChunkFor(int64_t vectorBits);

/// Widest row (f32 elements) kept in registers as one chunk.
constexpr int64_t kMaxFmaChunk = 128;
/// Widest row kept as one chunk when dest has a single row (decode): 16
/// registers of accumulators, so that rhs is read once, row after row,
/// instead of once per column chunk (1.4x faster in a C model of a decode
/// that streams V from memory).
constexpr int64_t kSingleRowFmaChunk = 256;
/// Lanes of one accumulator piece of a row carried alone (one 512-bit
/// register of f32).
constexpr int64_t kPieceLanes = 16;
/// Chunk width for wider rows (4 rows x 4 registers: measured faster than
/// 2 rows x 8 registers at head dim 256).
constexpr int64_t kSplitFmaChunk = 64;
/// Chunk width of Q.K^T's score columns: 8 rows x 2 registers, which loads
/// each K^T row chunk once per 8 query rows instead of 4 (measured 9-10%
/// faster than 4 x 4 for f32 at head dims 64-256).
constexpr int64_t kQKChunk = 32;
/// With 256-bit registers: the column chunk of both contractions (3 ymm:
/// 4 rows x 3 registers = 12 accumulators). Wider rows are split into
/// chunks of whole registers, near-equal (64 -> 24, 24, 16).
constexpr int64_t kQKChunk256 = 24;

/// Builds the contraction as vector code on tensors and returns the new
/// dest: the columns are split into chunks (see kSplitFmaChunk); per
/// chunk, R rows of dest are 1-D vectors carried in registers over the
/// reduction loop, each step loading one rhs row chunk and issuing one
/// vector.fma per row with a broadcast lhs scalar.
Value buildBroadcastFmaKernel(OpBuilder &b, Location loc,
                              const BroadcastFmaTiles &t);

/// Reads t[i, j : j + n] as a vector<n x f32> (extending narrower floats).
Value readF32Row(OpBuilder &b, Location loc, Value t, Value i, Value j,
                 int64_t n);

} // namespace mlir::flex

#endif
