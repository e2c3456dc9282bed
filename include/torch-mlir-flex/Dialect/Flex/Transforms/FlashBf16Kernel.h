//===- FlashBf16Kernel.h - vdpbf16ps tile contraction ----------*- C++ -*-===//
//
// The AVX512-BF16 variant of the flash micro-kernel (flex-to-flash with
// `bf16-dot`): K^T and V packed as bf16 pairs, and a kernel with the
// contract of buildBroadcastFmaKernel built on x86vector.avx512.dot
// (vdpbf16ps: 16 f32 lanes, each += a[2i] * b[2i] + a[2i+1] * b[2i+1]).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHBF16KERNEL_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHBF16KERNEL_H

#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

namespace mlir::flex {

/// Can a contraction over `reduction` into rows of `width` f32 run on
/// vdpbf16ps? The reduction goes in pairs (even), the row in pieces of
/// 16, 8 or 4 lanes (a multiple of 4).
bool canUseBf16Dot(int64_t reduction, int64_t width);

/// K [B, H, N, E] (bf16, E even, N a multiple of the N-tile Nt) -> K^T in
/// pairs of E, key block by key block, [B, H, (N / Nt) E/2, 2 Nt]:
///   out[b, h, (n / Nt) E/2 + e2, 2 (n mod Nt) + j] = K[b, h, n, 2 e2 + j]
/// so that one block is contiguous, like the plain K^T (one scf.forall
/// iteration per (b, h)).
Value packKeyPairs(OpBuilder &b, Location loc, Value k, int64_t Nt);

/// V [B, H, N, Ev] (bf16, N even) -> V in pairs of N, [B, H, N/2, 2 Ev]:
///   out[b, h, n2, 2 ev + j] = V[b, h, 2 n2 + j, ev]
/// (rows interleaved by vector.interleave, per (b, h) in an scf.forall, or
/// without `parallel` in nested scf.for loops: the backward packs its
/// tile's Q and dO rows this way inside the tile's forall).
Value packValuePairs(OpBuilder &b, Location loc, Value v,
                     bool parallel = true);

/// src [2 K, W] (f32, rounded to bf16 nearest even, or bf16) -> dest
/// [K, 2 W] bf16, rows 2k and 2k + 1 interleaved:
///   dest[k, 2 w + j] = bf16(src[2 k + j, w])
/// (packValuePairs per head; the pairs of a transposed lhs; the backward's
/// P and dS as AMX's pair-packed rhs).
Value packRowPairs(OpBuilder &b, Location loc, Value src, Value dest);

/// src [R, C] (f32 or bf16) rounded to bf16 row by row into dest [R, C].
Value roundRowsToBf16(OpBuilder &b, Location loc, Value src, Value dest);

/// The K^T tile of key rows [n0, n0 + Nt) at (bi, hi) of packKeyPairs'
/// result: [E/2, 2 Nt].
Value sliceKeyPairs(OpBuilder &b, Location loc, Value packed, Value bi,
                    Value hi, Value n0, int64_t E, int64_t Nt);

/// The V tile of rows [n0, n0 + Nt) (n0, Nt even) at (bi, hi) of
/// packValuePairs' result: [Nt/2, 2 Ev].
Value sliceValuePairs(OpBuilder &b, Location loc, Value packed, Value bi,
                      Value hi, Value n0, int64_t Nt, int64_t Ev);

/// buildBroadcastFmaKernel's contraction with bf16 products:
///   dest[m, :] = init[m, :] + sum_k lhs[m, k] * rhs[k, :]
/// where `t.rhs` is the pair-packed tile [reduction / 2, 2 width] (bf16),
/// `t.lhs` [rows, reduction] is bf16, or f32 and then rounded to bf16 once
/// (nearest even, as torch rounds P before P.V for bf16 inputs). Sums are
/// f32. Needs canUseBf16Dot(t.reduction, t.width) and a CPU with
/// AVX512-BF16 (lowered by convert-vector-to-llvm{enable-x86vector}).
/// init as in buildBroadcastFmaKernel: dest * rowScale, dest
/// (`accumulate`) or 0; `outScale` multiplies the sums. With
/// `lhsTransposed` lhs is [reduction, rows] (the backward's P and dS for
/// P^T.dO, dS^T.Q): rounded and packed in pairs of reduction rows first
/// (packValuePairs' layout, [reduction / 2, 2 rows]), so that a step
/// broadcasts one word as with a row-major lhs. `t.lhsScratch` receives
/// the rounded / packed lhs (else a fresh tensor); `t.chunk` is not used
/// (the chunks are kMaxDotChunk columns).
Value buildBf16DotKernel(OpBuilder &b, Location loc,
                         const BroadcastFmaTiles &t);

/// Can an [m, k] x [k, n] product run on AMX tiles (flex-amx-contractions:
/// m, n multiples of 16, k of 32)?
bool canUseAmx(int64_t m, int64_t k, int64_t n);

/// acc[m, n] += f32(lhs[m, k]) * f32(rhs[k floordiv 2, 2 n + k mod 2]) as a
/// linalg.generic marked `flex.amx`: lhs [M, K] bf16 row-major, rhs the
/// pair-packed [K/2, 2 N] bf16 (packKeyPairs / packValuePairs /
/// packRowPairs tiles), acc [M, N] f32; flex-amx-contractions makes it AMX
/// tile loops after bufferization. Needs canUseAmx(M, K, N).
Value buildAmxProduct(OpBuilder &b, Location loc, Value lhs, Value rhs,
                      Value acc);

} // namespace mlir::flex

#endif
