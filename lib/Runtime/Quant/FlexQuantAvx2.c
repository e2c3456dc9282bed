/*===- FlexQuantAvx2.c - quantized-weight products on AVX2 + FMA ----------===*
 *
 * The AVX2 kernels of flex_quant_matmul_i8 / _i4 (FlexQuant.c dispatches;
 * FlexQuantKernels.h the contract), for CPUs with AVX2 and FMA but no
 * AVX-512 (Zen 1-3, Haswell to Comet Lake):
 *   - int8: four weight rows at a time (two for 3-4 rows of x: 16 YMM
 *     registers), 8 weights widened in registers (VPMOVSXBD, VCVTDQ2PS)
 *     and multiplied by each row of x with FMAs, the sums scaled once per
 *     output; the K tail through a zeroed 8-byte block;
 *   - int4: 8 packed bytes of each k at a time (the block's bytes of a
 *     group stay in L1 for its other bytes), widened once (VPMOVZXBD),
 *     converted as low nibbles (and) and as whole bytes (VCVTDQ2PS: 16
 *     columns), multiplied by the broadcast x[m,k] into sums per group;
 *     per group the high nibbles' sums taken out of the bytes', then s *
 *     sum + (z - 8 s) * xsum; the weight bytes 8 KB ahead and the next
 *     block's scales prefetched once per group (flex_quant_i4_prefetch).
 * Every function carries its own target attribute; only
 * flex_quant_install_avx2 (baseline code) runs before the CPU's features
 * are known.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantKernels.h"

#include "../FlexX86.h"

#include <string.h>

FLEX_AVX2_INLINE __m256 widen_i8(const int8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* W weight rows from n against R rows of x from m0 (constants where
   inlined): R * W sums of 8 lanes. */
FLEX_AVX2_INLINE void i8_tile(const FlexQuantCall *c, int64_t m0, const int R, const int W,
                              int64_t n) {
  const int64_t K = c->K, K8 = K & ~(int64_t)7;
  __m256 acc[FLEX_QUANT_ROWS][4];
  const int8_t *wr[4];
  const float *x[FLEX_QUANT_ROWS];
  flex_quant_i8_tile_rows(c, m0, R, n, W, wr, x);
  for (int m = 0; m < R; ++m)
    for (int j = 0; j < W; ++j)
      acc[m][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K8; k += 8) {
    __m256 xv[FLEX_QUANT_ROWS];
    for (int m = 0; m < R; ++m)
      xv[m] = _mm256_loadu_ps(x[m] + k);
    for (int j = 0; j < W; ++j) {
      flex_quant_prefetch_next(wr[j], k, W, c->wm);
      const __m256 w = widen_i8(wr[j] + k);
      for (int m = 0; m < R; ++m)
        acc[m][j] = _mm256_fmadd_ps(w, xv[m], acc[m][j]);
    }
  }
  if (K8 < K) {
    const __m256i mask = flex_avx2_first_lanes(K - K8);
    __m256 xv[FLEX_QUANT_ROWS];
    for (int m = 0; m < R; ++m)
      xv[m] = _mm256_maskload_ps(x[m] + K8, mask);
    for (int j = 0; j < W; ++j) {
      int8_t block[16] = {0};
      memcpy(block, wr[j] + K8, (size_t)(K - K8));
      const __m256 w = widen_i8(block);
      for (int m = 0; m < R; ++m)
        acc[m][j] = _mm256_fmadd_ps(w, xv[m], acc[m][j]);
    }
  }
  for (int j = 0; j < W; ++j) {
    const float s = flex_quant_scale(c, n + j);
    for (int m = 0; m < R; ++m)
      flex_quant_store(c, m0 + m, n + j, flex_avx2_hsum(acc[m][j]) * s);
  }
}

FLEX_AVX2_INLINE void i8_run(const FlexQuantCall *c, int64_t m0, const int R, int64_t n0,
                             int64_t n1) {
  const int W = R <= 2 ? 4 : 2;
  int64_t n = n0;
  for (; n + W <= n1; n += W)
    i8_tile(c, m0, R, W, n);
  for (; n < n1; ++n)
    i8_tile(c, m0, R, 1, n);
}

/* The scales and zeros of 8 columns: pairs from element `at` of sz. */
FLEX_AVX2_INLINE void scales_zeros(const FlexQuantCall *c, int64_t at, __m256 *s, __m256 *z) {
  __m256 a, b;
  if (c->s_bf16) {
    a = flex_avx2_widen_bf16((const uint16_t *)c->s + at);
    b = flex_avx2_widen_bf16((const uint16_t *)c->s + at + 8);
  } else {
    a = _mm256_loadu_ps((const float *)c->s + at);
    b = _mm256_loadu_ps((const float *)c->s + at + 8);
  }
  /* [s0 s1 s4 s5 | s2 s3 s6 s7] -> in order (64-bit pairs 0, 2, 1, 3) */
  *s = _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
  *z = _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* y[m][col .. col+8) += s * acc[m] + (z - 8 s) * xsum[m][g] for the 8
   columns from `col` of the block (its scale/zero pairs from sz). */
FLEX_AVX2_INLINE void add_group(const FlexQuantCall *c, int64_t m0, const int R, int64_t g,
                                int64_t n_base, int col, const __m256 *acc,
                                float (*y)[64]) {
  const int64_t groups = c->K / c->group;
  __m256 s, z;
  scales_zeros(c, (g * c->N + n_base + col) * 2, &s, &z);
  const __m256 shift = _mm256_fnmadd_ps(_mm256_set1_ps(8.0f), s, z); /* z - 8 s */
  for (int m = 0; m < R; ++m) {
    const __m256 xs = _mm256_set1_ps(c->xsum[(m0 + m) * groups + g]);
    float *out = y[m] + col;
    _mm256_storeu_ps(out, _mm256_fmadd_ps(s, acc[m], _mm256_fmadd_ps(shift, xs, _mm256_loadu_ps(out))));
  }
}

/* One k of 8 packed bytes at p against R rows of x (x[m * xm] the k's):
   the low nibbles into lo, the whole bytes (low + 16 high) into hi, three
   operations where a shift of the high nibble was a fourth (hi becomes the
   high nibbles' sums once per group: (hi - lo) / 16). */
FLEX_AVX2_INLINE void i4_step(const uint8_t *p, const float *x, int64_t xm, const int R,
                              __m256 *lo, __m256 *hi) {
  const __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
  const __m256 wl = _mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(15)));
  const __m256 wh = _mm256_cvtepi32_ps(d);
  for (int m = 0; m < R; ++m) {
    const __m256 xv = _mm256_broadcast_ss(x + m * xm);
    lo[m] = _mm256_fmadd_ps(wl, xv, lo[m]);
    hi[m] = _mm256_fmadd_ps(wh, xv, hi[m]);
  }
}

/* One packed block against R rows of x (R, layout constants), 8 bytes of
   each k at a time (the group's bytes stay in L1 for the next 8): the 8
   bytes widened to 32 bits once (VPMOVZXBD), their low nibbles (and) and
   high nibbles (shift) two vectors of 8 columns: columns c.. and c+BN/2..
   (layouts 2, 1), or the even and odd columns of 16 (layout 0: put in
   order once per group). */
FLEX_AVX2_INLINE void i4_block(const FlexQuantCall *c, int64_t m0, const int R, int64_t block,
                               const int layout) {
  const int BN = layout == 2 ? 64 : 32;
  const int64_t K = c->K, G = c->group, groups = K / G, n_base = block * BN;
  const uint8_t *base = c->w + block * K * (BN / 2);
  const float *x = c->x + m0 * c->xm;
  enum { U = 2 };
  float y[FLEX_QUANT_ROWS][64];
  memset(y, 0, sizeof y);
  for (int64_t g = 0; g < groups; ++g) {
    flex_quant_i4_prefetch(c, base, g, n_base, BN);
    for (int v = 0; v < BN / 16; ++v) { /* bytes 8v .. 8v+7 of each k */
      /* U sets of sums, k by k in turn: with few rows of x, one set was
         as many FMA chains as rows * 2, each an FMA's latency a k. */
      __m256 lo[U][FLEX_QUANT_ROWS], hi[U][FLEX_QUANT_ROWS];
      for (int u = 0; u < U; ++u)
        for (int m = 0; m < R; ++m)
          lo[u][m] = hi[u][m] = _mm256_setzero_ps();
      int64_t k = g * G;
      for (; k + U <= (g + 1) * G; k += U)
        for (int u = 0; u < U; ++u)
          i4_step(base + (k + u) * (BN / 2) + 8 * v, x + k + u, c->xm, R, lo[u], hi[u]);
      for (; k < (g + 1) * G; ++k)
        i4_step(base + k * (BN / 2) + 8 * v, x + k, c->xm, R, lo[0], hi[0]);
      for (int u = 1; u < U; ++u)
        for (int m = 0; m < R; ++m) {
          lo[0][m] = _mm256_add_ps(lo[0][m], lo[u][m]);
          hi[0][m] = _mm256_add_ps(hi[0][m], hi[u][m]);
        }
      for (int m = 0; m < R; ++m) /* byte sums -> high nibbles' (exact / 16) */
        hi[0][m] = _mm256_mul_ps(_mm256_sub_ps(hi[0][m], lo[0][m]), _mm256_set1_ps(1.0f / 16.0f));
      if (layout == 0) { /* lo: columns 16v + 2i, hi: 16v + 2i + 1 */
        for (int m = 0; m < R; ++m) {
          const __m256 a = _mm256_unpacklo_ps(lo[0][m], hi[0][m]); /* 0-3 | 8-11 */
          const __m256 b = _mm256_unpackhi_ps(lo[0][m], hi[0][m]); /* 4-7 | 12-15 */
          lo[0][m] = _mm256_permute2f128_ps(a, b, 0x20);
          hi[0][m] = _mm256_permute2f128_ps(a, b, 0x31);
        }
        add_group(c, m0, R, g, n_base, 16 * v, lo[0], y);
        add_group(c, m0, R, g, n_base, 16 * v + 8, hi[0], y);
      } else {
        add_group(c, m0, R, g, n_base, 8 * v, lo[0], y);
        add_group(c, m0, R, g, n_base, 8 * v + BN / 2, hi[0], y);
      }
    }
  }
  for (int m = 0; m < R; ++m)
    for (int j = 0; j < BN; ++j)
      flex_quant_store(c, m0 + m, n_base + j, y[m][j]);
}

FLEX_QUANT_ENTRY_POINTS(FLEX_AVX2)

/* Every kernel, where the CPU has AVX2 and FMA. */
int flex_quant_install_avx2(FlexQuantKernels *k) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return 0;
  return fill_kernels(k);
}
