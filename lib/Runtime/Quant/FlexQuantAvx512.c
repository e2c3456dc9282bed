/*===- FlexQuantAvx512.c - quantized-weight products on AVX-512 ----------===*
 *
 * The AVX512F kernels of flex_quant_matmul_i8 / _i4 (FlexQuant.c
 * dispatches; FlexQuantKernels.h the contract):
 *   - int8: four weight rows at a time (one load of each 16 bytes of x
 *     for the four), 16 weights widened in registers (VPMOVSXBD,
 *     VCVTDQ2PS) and multiplied by each row of x with FMAs, the sums scaled
 *     once per output; the K tail through a zeroed 16-byte block;
 *   - int4: the whole packed block (64 or 32 columns) of one k at a time:
 *     each 16 of its 32 or 16 bytes widened once (VPMOVZXBD), converted as
 *     low nibbles and as whole bytes (VCVTDQ2PS), multiplied by the
 *     broadcast x[m,k] into sums per group; per group the high nibbles'
 *     sums taken out of the bytes', the sums put in column order, then s *
 *     sum + (z - 8 s) * xsum (the scale/zero pairs deinterleaved by
 *     VPERMT2PS); the weight bytes 8 KB ahead and the next block's scales
 *     prefetched once per group (flex_quant_i4_prefetch). One core,
 *     weights in cache (Zen 5): 50 -> 68 G weights/s at one row of x.
 * The int8 dot-product instructions (VNNI) are not used: they take int8
 * (or uint8) x, and x here is f32 (or bf16), whose quantization would
 * change the results. Every function carries its own target attribute;
 * only flex_quant_install_avx512 (baseline code) runs before the CPU's
 * features are known.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantKernels.h"

#include "../FlexX86.h"

#include <string.h>

FLEX_AVX512_INLINE __m512 widen_i8(const int8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* W weight rows from n against R rows of x from m0 (both constants where
   inlined): R * W sums of 16 lanes. */
FLEX_AVX512_INLINE void i8_tile(const FlexQuantCall *c, int64_t m0, const int R,
                                const int W, int64_t n) {
  const int64_t K = c->K, K16 = K & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
  __m512 acc[FLEX_QUANT_ROWS][4];
  const int8_t *wr[4];
  const float *x[FLEX_QUANT_ROWS];
  flex_quant_i8_tile_rows(c, m0, R, n, W, wr, x);
  for (int m = 0; m < R; ++m)
    for (int j = 0; j < W; ++j)
      acc[m][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K16; k += 16) {
    __m512 xv[FLEX_QUANT_ROWS];
    for (int m = 0; m < R; ++m)
      xv[m] = _mm512_loadu_ps(x[m] + k);
    for (int j = 0; j < W; ++j) {
      flex_quant_prefetch_next(wr[j], k, W, c->wm);
      const __m512 w = widen_i8(wr[j] + k);
      for (int m = 0; m < R; ++m)
        acc[m][j] = _mm512_fmadd_ps(w, xv[m], acc[m][j]);
    }
  }
  if (tail) {
    __m512 xv[FLEX_QUANT_ROWS];
    for (int m = 0; m < R; ++m)
      xv[m] = _mm512_maskz_loadu_ps(tail, x[m] + K16);
    for (int j = 0; j < W; ++j) {
      int8_t block[16] = {0};
      memcpy(block, wr[j] + K16, (size_t)(K - K16));
      const __m512 w = widen_i8(block);
      for (int m = 0; m < R; ++m)
        acc[m][j] = _mm512_fmadd_ps(w, xv[m], acc[m][j]);
    }
  }
  for (int j = 0; j < W; ++j) {
    const float s = flex_quant_scale(c, n + j);
    for (int m = 0; m < R; ++m)
      flex_quant_store(c, m0 + m, n + j, _mm512_reduce_add_ps(acc[m][j]) * s);
  }
}

FLEX_AVX512_INLINE void i8_run(const FlexQuantCall *c, int64_t m0, const int R,
                               int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4)
    i8_tile(c, m0, R, 4, n);
  for (; n < n1; ++n)
    i8_tile(c, m0, R, 1, n);
}

/* The scales and zeros of 16 columns: pairs at p (f32 or bf16). */
FLEX_AVX512_INLINE void scales_zeros(const FlexQuantCall *c, int64_t at, __m512 *s, __m512 *z) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 a, b;
  if (c->s_bf16) {
    const __m512i raw = _mm512_loadu_si512((const void *)((const uint16_t *)c->s + at));
    a = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(raw)), 16));
    b = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(raw, 1)), 16));
  } else {
    a = _mm512_loadu_ps((const float *)c->s + at);
    b = _mm512_loadu_ps((const float *)c->s + at + 16);
  }
  *s = _mm512_permutex2var_ps(a, even, b);
  *z = _mm512_permutex2var_ps(a, odd, b);
}

/* One k of a packed block (its BN/2 bytes at `row`) against R rows of x
   (x[m * xm] the k's), into acc[m][v]: per 16 bytes p, zero-extended to
   32 bits once (VPMOVZXBD), the low nibbles (and, VCVTDQ2PS) into sum 2p
   and the whole bytes, low + 16 high (VCVTDQ2PS), into sum 2p + 1: three
   operations a byte's two weights where a shift of the high nibble was a
   fourth (the high sums are taken out once per group: high_sums). */
FLEX_AVX512_INLINE void i4_step(const uint8_t *row, const float *x, int64_t xm, const int R,
                                const int P, __m512 (*acc)[4]) {
  __m512 w[4];
  for (int p = 0; p < P; ++p) {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + 16 * p)));
    w[2 * p] = _mm512_cvtepi32_ps(_mm512_and_si512(d, _mm512_set1_epi32(15)));
    w[2 * p + 1] = _mm512_cvtepi32_ps(d);
  }
  for (int m = 0; m < R; ++m) {
    const __m512 xv = _mm512_set1_ps(x[m * xm]);
    for (int v = 0; v < 2 * P; ++v)
      acc[m][v] = _mm512_fmadd_ps(w[v], xv, acc[m][v]);
  }
}

/* The sums of x * high nibble from i4_step's: (byte sums - low sums) / 16
   (exact scaling; the subtraction adds an f32 rounding of the byte sums,
   about a sixteenth of the high sums' own). */
FLEX_AVX512_INLINE void high_sums(const int P, __m512 *acc) {
  for (int p = 0; p < P; ++p)
    acc[2 * p + 1] =
        _mm512_mul_ps(_mm512_sub_ps(acc[2 * p + 1], acc[2 * p]), _mm512_set1_ps(1.0f / 16.0f));
}

/* The sums of one group, acc[v] from i4_step, as the 16-column vectors of
   the block in order (out[v]: columns 16v ..). */
FLEX_AVX512_INLINE void in_order(const __m512 *acc, const int layout, __m512 *out) {
  if (layout == 2) { /* bytes 16p + i: columns 16p + i (low), 32 + 16p + i */
    out[0] = acc[0], out[1] = acc[2], out[2] = acc[1], out[3] = acc[3];
  } else if (layout == 1) { /* byte i: columns i, 16 + i */
    out[0] = acc[0], out[1] = acc[1];
  } else { /* byte i: columns 2i, 2i + 1 */
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    out[0] = _mm512_permutex2var_ps(acc[0], lo, acc[1]);
    out[1] = _mm512_permutex2var_ps(acc[0], hi, acc[1]);
  }
}

/* One packed block against R rows of x (R, layout constants). */
FLEX_AVX512_INLINE void i4_block(const FlexQuantCall *c, int64_t m0, const int R,
                                 int64_t block, const int layout) {
  enum { MAXV = 4 };
  const int BN = layout == 2 ? 64 : 32, V = BN / 16, P = BN / 32, U = R * V < 8 ? 2 : 1;
  const int64_t K = c->K, G = c->group, groups = K / G, N = c->N, n_base = block * BN;
  const uint8_t *base = c->w + block * K * (BN / 2);
  const float *x = c->x + m0 * c->xm;
  __m512 y[FLEX_QUANT_ROWS][MAXV];
  for (int m = 0; m < R; ++m)
    for (int v = 0; v < V; ++v)
      y[m][v] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    flex_quant_i4_prefetch(c, base, g, n_base, BN);
    /* U sets of sums, k by k in turn, where R * V sums alone are too few
       FMA chains (each an FMA's latency a k). */
    __m512 acc[2][FLEX_QUANT_ROWS][MAXV];
    for (int u = 0; u < U; ++u)
      for (int m = 0; m < R; ++m)
        for (int v = 0; v < V; ++v)
          acc[u][m][v] = _mm512_setzero_ps();
    int64_t k = g * G;
    for (; k + U <= (g + 1) * G; k += U)
      for (int u = 0; u < U; ++u)
        i4_step(base + (k + u) * (BN / 2), x + k + u, c->xm, R, P, acc[u]);
    for (; k < (g + 1) * G; ++k)
      i4_step(base + k * (BN / 2), x + k, c->xm, R, P, acc[0]);
    for (int u = 1; u < U; ++u)
      for (int m = 0; m < R; ++m)
        for (int v = 0; v < V; ++v)
          acc[0][m][v] = _mm512_add_ps(acc[0][m][v], acc[u][m][v]);
    __m512 sums[FLEX_QUANT_ROWS][MAXV];
    for (int m = 0; m < R; ++m) {
      high_sums(P, acc[0][m]);
      in_order(acc[0][m], layout, sums[m]);
    }
    for (int v = 0; v < V; ++v) {
      __m512 s, z;
      scales_zeros(c, (g * N + n_base + 16 * v) * 2, &s, &z);
      const __m512 shift = _mm512_fnmadd_ps(_mm512_set1_ps(8.0f), s, z); /* z - 8 s */
      for (int m = 0; m < R; ++m) {
        const __m512 xs = _mm512_set1_ps(c->xsum[(m0 + m) * groups + g]);
        y[m][v] = _mm512_fmadd_ps(s, sums[m][v], _mm512_fmadd_ps(shift, xs, y[m][v]));
      }
    }
  }
  for (int m = 0; m < R; ++m) {
    float out[64];
    for (int v = 0; v < V; ++v)
      _mm512_storeu_ps(out + 16 * v, y[m][v]);
    for (int j = 0; j < BN; ++j)
      flex_quant_store(c, m0 + m, n_base + j, out[j]);
  }
}

FLEX_QUANT_ENTRY_POINTS(FLEX_AVX512)

/* Every kernel, where the CPU has AVX512F. */
int flex_quant_install_avx512(FlexQuantKernels *k) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f"))
    return 0;
  return fill_kernels(k);
}
