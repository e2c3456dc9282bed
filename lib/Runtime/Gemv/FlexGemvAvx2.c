/*===- FlexGemvAvx2.c - few-row products on AVX2 + FMA --------------------===*
 *
 * The AVX2 kernels of the few-row products (FlexGemv.c dispatches), for
 * CPUs with AVX2 and FMA but no AVX-512 (Zen 1-3, Haswell to Comet Lake),
 * and for bf16 weights on AVX-512 CPUs without AVX512-BF16:
 *   - f32: one weight row at a time, 8-lane FMAs;
 *   - bf16 weights: 8 weights at a time widened to f32 in registers
 *     (VPMOVZXWD, then a 16-bit shift: exact) and multiplied by x, which
 *     the dispatcher widened to f32 once per product (x_f32), with FMAs.
 * One row of x: four accumulators; M = 2..4 rows: each weight vector loaded
 * (and widened) once for the M rows, two accumulators a row. The K tail is
 * masked (f32) or copied into a zeroed block (bf16 weights).
 * Every function carries its own target attribute: the file builds for
 * any x86-64, and only flex_gemv_install_avx2 (baseline code) runs before
 * the CPU's features are known.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexGemvKernels.h"

#include "../FlexX86.h"

#include <string.h>

/* The last K - K8 (< 8) bf16 of a row, widened; the other lanes 0. */
FLEX_AVX2_INLINE __m256 widen_tail(const uint16_t *p, int64_t count) {
  uint16_t block[8] = {0};
  memcpy(block, p, (size_t)count * sizeof(uint16_t));
  return flex_avx2_widen_bf16(block);
}

/* Weight vectors: f32 loaded, or bf16 widened. `bf16` is a constant where
   inlined, so each kernel below is compiled for one of them. */
FLEX_AVX2_INLINE __m256 weights(const void *row, int64_t k, const int bf16) {
  return bf16 ? flex_avx2_widen_bf16((const uint16_t *)row + k)
              : _mm256_loadu_ps((const float *)row + k);
}

FLEX_AVX2_INLINE __m256 weights_tail(const void *row, int64_t k, int64_t count,
                                     __m256i mask, const int bf16) {
  return bf16 ? widen_tail((const uint16_t *)row + k, count)
              : _mm256_maskload_ps((const float *)row + k, mask);
}

/* One row of f32 x against one weight row at a time (a sequential stream),
   four accumulators of 8 floats. */
FLEX_AVX2_INLINE void rows_1(const FlexGemvSlice *s, const int bf16) {
  const float *x = (const float *)s->x;
  const int64_t K = s->K, K8 = K & ~(int64_t)7;
  const size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
  const __m256i mask = flex_avx2_first_lanes(K - K8);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const void *r = (const char *)s->w + (size_t)(n * s->ldw) * es;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      a0 = _mm256_fmadd_ps(weights(r, k, bf16), _mm256_loadu_ps(x + k), a0);
      a1 = _mm256_fmadd_ps(weights(r, k + 8, bf16), _mm256_loadu_ps(x + k + 8), a1);
      a2 = _mm256_fmadd_ps(weights(r, k + 16, bf16), _mm256_loadu_ps(x + k + 16), a2);
      a3 = _mm256_fmadd_ps(weights(r, k + 24, bf16), _mm256_loadu_ps(x + k + 24), a3);
    }
    for (; k < K8; k += 8)
      a0 = _mm256_fmadd_ps(weights(r, k, bf16), _mm256_loadu_ps(x + k), a0);
    if (K8 < K)
      a1 = _mm256_fmadd_ps(weights_tail(r, K8, K - K8, mask, bf16),
                           _mm256_maskload_ps(x + K8, mask), a1);
    flex_gemv_store(s, 0, n, flex_avx2_hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))));
  }
}

/* M (2..FLEX_GEMV_MAX_ROWS, a constant where inlined) rows of f32 x against
   one weight row at a time: each 8 weights loaded (and widened) once, two
   accumulators a row. */
FLEX_AVX2_INLINE void rows_m(const FlexGemvSlice *s, const int M, const int bf16) {
  const float *x = (const float *)s->x;
  const int64_t K = s->K, K8 = K & ~(int64_t)7, xm = s->xm;
  const size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
  const __m256i mask = flex_avx2_first_lanes(K - K8);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const void *r = (const char *)s->w + (size_t)(n * s->ldw) * es;
    __m256 a[FLEX_GEMV_MAX_ROWS], b[FLEX_GEMV_MAX_ROWS];
    for (int m = 0; m < M; ++m)
      a[m] = b[m] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      __m256 w0 = weights(r, k, bf16), w1 = weights(r, k + 8, bf16);
      for (int m = 0; m < M; ++m) {
        a[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * xm + k), a[m]);
        b[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * xm + k + 8), b[m]);
      }
    }
    for (; k < K8; k += 8) {
      __m256 w0 = weights(r, k, bf16);
      for (int m = 0; m < M; ++m)
        a[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * xm + k), a[m]);
    }
    if (K8 < K) {
      __m256 w0 = weights_tail(r, K8, K - K8, mask, bf16);
      for (int m = 0; m < M; ++m)
        b[m] = _mm256_fmadd_ps(w0, _mm256_maskload_ps(x + m * xm + K8, mask), b[m]);
    }
    for (int m = 0; m < M; ++m)
      flex_gemv_store(s, m, n, flex_avx2_hsum(_mm256_add_ps(a[m], b[m])));
  }
}

FLEX_AVX2 static void f32_rows_1(const FlexGemvSlice *s) { rows_1(s, 0); }
FLEX_AVX2 static void f32_rows_2(const FlexGemvSlice *s) { rows_m(s, 2, 0); }
FLEX_AVX2 static void f32_rows_3(const FlexGemvSlice *s) { rows_m(s, 3, 0); }
FLEX_AVX2 static void f32_rows_4(const FlexGemvSlice *s) { rows_m(s, 4, 0); }
FLEX_AVX2 static void bf16_rows_1(const FlexGemvSlice *s) { rows_1(s, 1); }
FLEX_AVX2 static void bf16_rows_2(const FlexGemvSlice *s) { rows_m(s, 2, 1); }
FLEX_AVX2 static void bf16_rows_3(const FlexGemvSlice *s) { rows_m(s, 3, 1); }
FLEX_AVX2 static void bf16_rows_4(const FlexGemvSlice *s) { rows_m(s, 4, 1); }

/* Both dtypes, where the CPU has AVX2 and FMA (and the OS keeps the YMM
   state, which __builtin_cpu_supports checks). */
int flex_gemv_install_avx2(FlexGemvKernels *k) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return 0;
  static const FlexGemvRows f32[] = {f32_rows_1, f32_rows_2, f32_rows_3, f32_rows_4};
  static const FlexGemvRows bf16[] = {bf16_rows_1, bf16_rows_2, bf16_rows_3, bf16_rows_4};
  for (int m = 0; m < FLEX_GEMV_MAX_ROWS; ++m) {
    k->f32.rows[m] = f32[m];
    k->bf16.rows[m] = bf16[m];
  }
  k->bf16.x_f32 = 1;
  return 1;
}
