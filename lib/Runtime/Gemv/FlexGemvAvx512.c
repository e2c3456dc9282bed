/*===- FlexGemvAvx512.c - few-row products on AVX-512 and AVX512-BF16 -----===*
 *
 * The AVX-512 kernels of the few-row products (FlexGemv.c dispatches):
 *   - f32 (AVX512F): one weight row at a time, 16-lane FMAs;
 *   - bf16 weights (AVX512F + AVX512BW + AVX512-BF16): VDPBF16PS on bf16
 *     pairs of the weight and of x, into f32 sums.
 * Each weight row is loaded once for the M rows of x; the K tail is masked.
 * Every function carries its own target attribute: the file builds for
 * any x86-64, and only flex_gemv_install_avx512 (baseline code) runs before
 * the CPU's features are known.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexGemvKernels.h"

#include "../FlexX86.h"

#define FLEX_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* One row at a time (a sequential stream: 1.45x the read rate of four rows
 * at a time on a model's weights, Zen 4), four accumulators of 16 floats. */
FLEX_AVX512 static void f32_rows_1(const FlexGemvSlice *s) {
  const float *x = (const float *)s->x;
  const int64_t K = s->K, K16 = K & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const float *r = (const float *)s->w + n * s->ldw;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k), _mm512_loadu_ps(x + k), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k + 16), _mm512_loadu_ps(x + k + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k + 32), _mm512_loadu_ps(x + k + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k + 48), _mm512_loadu_ps(x + k + 48), a3);
    }
    for (; k < K16; k += 16)
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k), _mm512_loadu_ps(x + k), a0);
    if (tail)
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + K16),
                           _mm512_maskz_loadu_ps(tail, x + K16), a1);
    flex_gemv_store(s, 0, n, _mm512_reduce_add_ps(_mm512_add_ps(
                                 _mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))));
  }
}

/* M (2..FLEX_GEMV_MAX_ROWS, a constant where inlined) rows of x against one
 * weight row at a time: each 16 weights loaded once, two accumulators a
 * row. */
FLEX_AVX512_INLINE void f32_rows_m(const FlexGemvSlice *s, const int M) {
  const int64_t K = s->K, K16 = K & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
  const float *x = (const float *)s->x;
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const float *r = (const float *)s->w + n * s->ldw;
    __m512 a[FLEX_GEMV_MAX_ROWS], b[FLEX_GEMV_MAX_ROWS];
    for (int m = 0; m < M; ++m)
      a[m] = b[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      __m512 w0 = _mm512_loadu_ps(r + k), w1 = _mm512_loadu_ps(r + k + 16);
      for (int m = 0; m < M; ++m) {
        a[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * s->xm + k), a[m]);
        b[m] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + m * s->xm + k + 16), b[m]);
      }
    }
    for (; k < K16; k += 16) {
      __m512 w0 = _mm512_loadu_ps(r + k);
      for (int m = 0; m < M; ++m)
        a[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * s->xm + k), a[m]);
    }
    if (tail) {
      __m512 w0 = _mm512_maskz_loadu_ps(tail, r + K16);
      for (int m = 0; m < M; ++m)
        b[m] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(tail, x + m * s->xm + K16), b[m]);
    }
    for (int m = 0; m < M; ++m)
      flex_gemv_store(s, m, n, _mm512_reduce_add_ps(_mm512_add_ps(a[m], b[m])));
  }
}

FLEX_AVX512 static void f32_rows_2(const FlexGemvSlice *s) { f32_rows_m(s, 2); }
FLEX_AVX512 static void f32_rows_3(const FlexGemvSlice *s) { f32_rows_m(s, 3); }
FLEX_AVX512 static void f32_rows_4(const FlexGemvSlice *s) { f32_rows_m(s, 4); }

#define FLEX_LOAD(p) ((__m512bh)_mm512_loadu_si512((const void *)(p)))

/* One row at a time (a sequential stream), four accumulators of 32 bf16
   pairs each. */
FLEX_AVX512_BF16 static void bf16_rows_1(const FlexGemvSlice *s) {
  const uint16_t *x = (const uint16_t *)s->x;
  const int64_t K = s->K, K32 = K & ~(int64_t)31;
  const __mmask32 tail = (__mmask32)((1ull << (K - K32)) - 1ull);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const uint16_t *r = (const uint16_t *)s->w + n * s->ldw;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 128 <= K; k += 128) {
      a0 = _mm512_dpbf16_ps(a0, FLEX_LOAD(r + k), FLEX_LOAD(x + k));
      a1 = _mm512_dpbf16_ps(a1, FLEX_LOAD(r + k + 32), FLEX_LOAD(x + k + 32));
      a2 = _mm512_dpbf16_ps(a2, FLEX_LOAD(r + k + 64), FLEX_LOAD(x + k + 64));
      a3 = _mm512_dpbf16_ps(a3, FLEX_LOAD(r + k + 96), FLEX_LOAD(x + k + 96));
    }
    for (; k < K32; k += 32)
      a0 = _mm512_dpbf16_ps(a0, FLEX_LOAD(r + k), FLEX_LOAD(x + k));
    if (tail)
      a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_maskz_loadu_epi16(tail, r + K32),
                            (__m512bh)_mm512_maskz_loadu_epi16(tail, x + K32));
    flex_gemv_store(s, 0, n, _mm512_reduce_add_ps(_mm512_add_ps(
                                 _mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))));
  }
}

/* M (2..FLEX_GEMV_MAX_ROWS) rows of x against one weight row at a time:
   each 64 weights loaded once, two accumulators a row. */
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
bf16_rows_m(const FlexGemvSlice *s, const int M) {
  const uint16_t *x = (const uint16_t *)s->x;
  const int64_t K = s->K, K32 = K & ~(int64_t)31;
  const __mmask32 tail = (__mmask32)((1ull << (K - K32)) - 1ull);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const uint16_t *r = (const uint16_t *)s->w + n * s->ldw;
    __m512 a[FLEX_GEMV_MAX_ROWS], b[FLEX_GEMV_MAX_ROWS];
    for (int m = 0; m < M; ++m)
      a[m] = b[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
      __m512bh w0 = FLEX_LOAD(r + k), w1 = FLEX_LOAD(r + k + 32);
      for (int m = 0; m < M; ++m) {
        a[m] = _mm512_dpbf16_ps(a[m], w0, FLEX_LOAD(x + m * s->xm + k));
        b[m] = _mm512_dpbf16_ps(b[m], w1, FLEX_LOAD(x + m * s->xm + k + 32));
      }
    }
    for (; k < K32; k += 32) {
      __m512bh w0 = FLEX_LOAD(r + k);
      for (int m = 0; m < M; ++m)
        a[m] = _mm512_dpbf16_ps(a[m], w0, FLEX_LOAD(x + m * s->xm + k));
    }
    if (tail) {
      __m512bh w0 = (__m512bh)_mm512_maskz_loadu_epi16(tail, r + K32);
      for (int m = 0; m < M; ++m)
        b[m] = _mm512_dpbf16_ps(
            b[m], w0, (__m512bh)_mm512_maskz_loadu_epi16(tail, x + m * s->xm + K32));
    }
    for (int m = 0; m < M; ++m)
      flex_gemv_store(s, m, n, _mm512_reduce_add_ps(_mm512_add_ps(a[m], b[m])));
  }
}
#undef FLEX_LOAD

FLEX_AVX512_BF16 static void bf16_rows_2(const FlexGemvSlice *s) { bf16_rows_m(s, 2); }
FLEX_AVX512_BF16 static void bf16_rows_3(const FlexGemvSlice *s) { bf16_rows_m(s, 3); }
FLEX_AVX512_BF16 static void bf16_rows_4(const FlexGemvSlice *s) { bf16_rows_m(s, 4); }

/* f32 where the CPU has AVX512F; bf16 where it also has AVX512BW and
   AVX512-BF16 (elsewhere a lower ISA's bf16 kernels stay). */
int flex_gemv_install_avx512(FlexGemvKernels *k) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f"))
    return 0;
  static const FlexGemvRows f32[] = {f32_rows_1, f32_rows_2, f32_rows_3, f32_rows_4};
  for (int m = 0; m < FLEX_GEMV_MAX_ROWS; ++m)
    k->f32.rows[m] = f32[m];
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16")) {
    static const FlexGemvRows bf16[] = {bf16_rows_1, bf16_rows_2, bf16_rows_3, bf16_rows_4};
    for (int m = 0; m < FLEX_GEMV_MAX_ROWS; ++m)
      k->bf16.rows[m] = bf16[m];
    k->bf16.x_f32 = 0;
  }
  return 1;
}
