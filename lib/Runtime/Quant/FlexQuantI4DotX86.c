/*===- FlexQuantI4DotX86.c - int4 x int8 dot-product kernels on x86-64 ---===*
 *
 * The x86-64 kernels of the opt-in int8-activation path of
 * flex_quant_matmul_i4 (FlexQuantI4Dot.h the contract, FlexQuantI4Dot.c
 * the loops and the generic kernel):
 *   - the panel (both variants, SSE2, baseline x86-64): each 16 columns of
 *     four k's rows as bytes in column order (nibbles masked, layout 0's
 *     pairs interleaved), then transposed to 4 bytes a column (PUNPCKLBW /
 *     PUNPCKLWD);
 *   - avx512_vnni: VPDPBUSD, the panel's unsigned nibbles against four
 *     broadcast int8 of x (k, k+1, k+2, k+3), tiles of up to 4 rows x 32
 *     columns (8 int32 sums, started at -8 sum qx, and the 8 f32 sums of
 *     y in registers across a chunk's groups: 128 rows on one Zen 5 core
 *     390-420 -> 520-590 GFLOP/s against the tile of 4 x 64 columns with
 *     y in memory), then per group y += z * xsum + float(sum) * (s * sx);
 *   - avx2: VPMADDUBSW (nibble u8 x int8, pairs of k in int16: at most
 *     2 * 15 * 127, no saturation) added in int16 for up to 8 steps of 4 k
 *     (8 * 3810 < 32767), then VPMADDWD by ones into the int32 sums; tiles
 *     of up to 2 rows x 16 columns.
 * Every function carries its own target attribute; only the install
 * functions (baseline code) run before the CPU's features are known.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantI4Dot.h"

#include <immintrin.h>
#include <string.h>

#define TVNNI __attribute__((target("avx512f,avx512vnni")))
#define TVNNI_INLINE TVNNI __attribute__((always_inline)) static inline
#define TAVX2 __attribute__((target("avx2,fma")))
#define TAVX2_INLINE TAVX2 __attribute__((always_inline)) static inline

/* ------------------------------------------------------------------------
 * The panel.
 * ---------------------------------------------------------------------- */
/* Columns [16s, 16s + 16) of a packed row (FlexQuantI4Dot.h's layouts) as
   16 bytes in column order. */
static inline __m128i cols16(const uint8_t *row, int layout, int W, int s) {
  const __m128i low = _mm_set1_epi8(15);
  if (layout == 0) {
    const __m128i b = _mm_loadl_epi64((const __m128i *)(row + 8 * s));
    return _mm_unpacklo_epi8(_mm_and_si128(b, low), _mm_and_si128(_mm_srli_epi16(b, 4), low));
  }
  const int half = W / 32; /* 16-column slices of low nibbles: 1 or 2 */
  const __m128i b = _mm_loadu_si128((const __m128i *)(row + 16 * (s % half)));
  return s < half ? _mm_and_si128(b, low) : _mm_and_si128(_mm_srli_epi16(b, 4), low);
}

static void sse2_panel(const uint8_t *src, int layout, int W, int64_t k0, int64_t k1,
                       uint8_t *out) {
  const int64_t rb = W / 2;
  for (int64_t k = k0; k < k1; k += 4) {
    const uint8_t *r = src + k * rb;
    uint8_t *o = out + (k - k0) * W;
    for (int s = 0; s < W / 16; ++s) {
      const __m128i c0 = cols16(r, layout, W, s), c1 = cols16(r + rb, layout, W, s);
      const __m128i c2 = cols16(r + 2 * rb, layout, W, s), c3 = cols16(r + 3 * rb, layout, W, s);
      const __m128i t0 = _mm_unpacklo_epi8(c0, c1), t1 = _mm_unpackhi_epi8(c0, c1);
      const __m128i t2 = _mm_unpacklo_epi8(c2, c3), t3 = _mm_unpackhi_epi8(c2, c3);
      _mm_storeu_si128((__m128i *)(o + 64 * s), _mm_unpacklo_epi16(t0, t2));
      _mm_storeu_si128((__m128i *)(o + 64 * s + 16), _mm_unpackhi_epi16(t0, t2));
      _mm_storeu_si128((__m128i *)(o + 64 * s + 32), _mm_unpacklo_epi16(t1, t3));
      _mm_storeu_si128((__m128i *)(o + 64 * s + 48), _mm_unpackhi_epi16(t1, t3));
    }
  }
}

/* FlexQuantI4DotQuant on AVX2 (both variants): 8 values at a time, the
   rest one by one (the same operations: division, ties to even). */
TAVX2 static int32_t avx2_quant(const float *x, int64_t G, int8_t *q, float *sx) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const int64_t G8 = G & ~(int64_t)7;
  __m256 vmax = _mm256_setzero_ps();
  for (int64_t k = 0; k < G8; k += 8)
    vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
  float lanes[8], amax = 0.0f;
  _mm256_storeu_ps(lanes, vmax);
  for (int j = 0; j < 8; ++j)
    amax = lanes[j] > amax ? lanes[j] : amax;
  for (int64_t k = G8; k < G; ++k) {
    const float a = x[k] < 0 ? -x[k] : x[k];
    amax = a > amax ? a : amax;
  }
  const float s = amax / 127.0f;
  *sx = s > 0.0f ? s : 0.0f;
  if (!(s > 0.0f)) {
    memset(q, 0, (size_t)G);
    return 0;
  }
  const __m256 sv = _mm256_set1_ps(s);
  __m256i vsum = _mm256_setzero_si256();
  for (int64_t k = 0; k < G8; k += 8) {
    const __m256i r = _mm256_cvtps_epi32(_mm256_round_ps(
        _mm256_div_ps(_mm256_loadu_ps(x + k), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    vsum = _mm256_add_epi32(vsum, r);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storel_epi64((__m128i *)(q + k), _mm_packs_epi16(w, w));
  }
  int32_t sums[8], qsum = 0;
  _mm256_storeu_si256((__m256i *)sums, vsum);
  for (int j = 0; j < 8; ++j)
    qsum += sums[j];
  for (int64_t k = G8; k < G; ++k) {
    const int32_t r = (int32_t)_mm_cvtss_si32(_mm_round_ss(
        _mm_setzero_ps(), _mm_set_ss(x[k] / s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    q[k] = (int8_t)r;
    qsum += r;
  }
  return qsum;
}

/* Four int8 of x from p as one int32 (any alignment). */
static inline int32_t four(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* ------------------------------------------------------------------------
 * AVX512-VNNI.
 * ---------------------------------------------------------------------- */
/* acc += VPDPBUSD(u8 a, s8 b), in place (as FlexQuantInt8GemmX86.c: GCC
   12 moved the intrinsic's sums through other registers every step). */
TVNNI_INLINE __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* R rows x V * 16 columns from column j0 of a W-column block (R, V
   constants where inlined): the R * V int32 sums of a group and the R * V
   f32 sums of y in registers across the chunk's groups (y loaded and
   stored once a chunk). */
TVNNI_INLINE void vnni_tile(const FlexQuantI4Dot *d, const uint8_t *panel, const float *sz,
                            int64_t m, const int R, int64_t g0, int64_t g1, const int V, int W,
                            int j0, float *yt) {
  const FlexQuantCall *c = d->c;
  const int64_t G = c->group, K = c->K;
  const int8_t *qx[4];
  __m512 y[4][2];
  for (int r = 0; r < R; ++r) {
    qx[r] = d->qx + (m + r) * K;
    for (int v = 0; v < V; ++v)
      y[r][v] = _mm512_loadu_ps(yt + r * W + j0 + 16 * v);
  }
  for (int64_t g = g0; g < g1; ++g) {
    __m512i acc[4][2];
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(d->corr[(m + r) * d->groups + g]);
      for (int v = 0; v < V; ++v)
        acc[r][v] = start;
    }
    const uint8_t *p = panel + (g - g0) * G * W + 4 * j0;
    for (int64_t k = 0; k < G; k += 4) {
      __m512i w[2];
      for (int v = 0; v < V; ++v)
        w[v] = _mm512_loadu_si512((const void *)(p + k * W + 64 * v));
      for (int r = 0; r < R; ++r) {
        const __m512i xb = _mm512_set1_epi32(four(qx[r] + g * G + k));
        for (int v = 0; v < V; ++v)
          acc[r][v] = dpbusd(acc[r][v], w[v], xb);
      }
    }
    const float *s = sz + (g - g0) * 2 * W + j0, *z = s + W;
    __m512 sv[2], zv[2];
    for (int v = 0; v < V; ++v)
      sv[v] = _mm512_loadu_ps(s + 16 * v), zv[v] = _mm512_loadu_ps(z + 16 * v);
    for (int r = 0; r < R; ++r) {
      const int64_t i = (m + r) * d->groups + g;
      const __m512 xs = _mm512_set1_ps(c->xsum[i]), sx = _mm512_set1_ps(d->sx[i]);
      for (int v = 0; v < V; ++v) {
        const __m512 t = _mm512_fmadd_ps(zv[v], xs, y[r][v]);
        y[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][v]), _mm512_mul_ps(sv[v], sx), t);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      _mm512_storeu_ps(yt + r * W + j0 + 16 * v, y[r][v]);
}

/* The block's columns in slices of 32 (a last one of 16). */
#define VNNI_BY_V_(R)                                                          \
  for (int j0 = 0; j0 < W; j0 += 32) {                                         \
    if (W - j0 >= 32)                                                          \
      vnni_tile(d, panel, sz, m, R, g0, g1, 2, W, j0, yt);                     \
    else                                                                       \
      vnni_tile(d, panel, sz, m, R, g0, g1, 1, W, j0, yt);                     \
  }

TVNNI static void vnni_tiles(const FlexQuantI4Dot *d, const uint8_t *panel, const float *sz,
                             int64_t m, int rows, int64_t g0, int64_t g1, int W, float *yt) {
  switch (rows) {
  case 1: VNNI_BY_V_(1) break;
  case 2: VNNI_BY_V_(2) break;
  case 3: VNNI_BY_V_(3) break;
  default: VNNI_BY_V_(4) break;
  }
}

/* ------------------------------------------------------------------------
 * AVX2.
 * ---------------------------------------------------------------------- */
/* R rows x columns [j0, j0 + 16) of a W-column block. */
TAVX2_INLINE void avx2_tile16(const FlexQuantI4Dot *d, const uint8_t *panel, const float *sz,
                              int64_t m, const int R, int64_t g0, int64_t g1, int W, int j0,
                              float *yt) {
  const FlexQuantCall *c = d->c;
  const int64_t G = c->group, K = c->K;
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t *qx[2];
  for (int r = 0; r < R; ++r)
    qx[r] = d->qx + (m + r) * K;
  for (int64_t g = g0; g < g1; ++g) {
    __m256i acc[2][2];
    for (int r = 0; r < R; ++r)
      acc[r][0] = acc[r][1] = _mm256_set1_epi32(d->corr[(m + r) * d->groups + g]);
    const uint8_t *p = panel + (g - g0) * G * W + 4 * j0;
    for (int64_t k8 = 0; k8 < G; k8 += 32) { /* up to 8 steps of 4 k in int16 */
      const int64_t end = G - k8 < 32 ? G : k8 + 32;
      __m256i s16[2][2];
      for (int r = 0; r < R; ++r)
        s16[r][0] = s16[r][1] = _mm256_setzero_si256();
      for (int64_t k = k8; k < end; k += 4) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(p + k * W));
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + k * W + 32));
        for (int r = 0; r < R; ++r) {
          const __m256i xb = _mm256_set1_epi32(four(qx[r] + g * G + k));
          s16[r][0] = _mm256_add_epi16(s16[r][0], _mm256_maddubs_epi16(w0, xb));
          s16[r][1] = _mm256_add_epi16(s16[r][1], _mm256_maddubs_epi16(w1, xb));
        }
      }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < 2; ++v)
          acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(s16[r][v], ones));
    }
    const float *s = sz + (g - g0) * 2 * W + j0, *z = s + W;
    for (int v = 0; v < 2; ++v) {
      const __m256 sv = _mm256_loadu_ps(s + 8 * v), zv = _mm256_loadu_ps(z + 8 * v);
      for (int r = 0; r < R; ++r) {
        const int64_t i = (m + r) * d->groups + g;
        float *o = yt + r * W + j0 + 8 * v;
        __m256 y = _mm256_fmadd_ps(zv, _mm256_set1_ps(c->xsum[i]), _mm256_loadu_ps(o));
        y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][v]), _mm256_mul_ps(sv, _mm256_set1_ps(d->sx[i])), y);
        _mm256_storeu_ps(o, y);
      }
    }
  }
}

TAVX2 static void avx2_tiles(const FlexQuantI4Dot *d, const uint8_t *panel, const float *sz,
                             int64_t m, int rows, int64_t g0, int64_t g1, int W, float *yt) {
  for (int j0 = 0; j0 < W; j0 += 16) {
    if (rows == 1)
      avx2_tile16(d, panel, sz, m, 1, g0, g1, W, j0, yt);
    else
      avx2_tile16(d, panel, sz, m, 2, g0, g1, W, j0, yt);
  }
}

/* ------------------------------------------------------------------------
 * Installation (baseline code).
 * ---------------------------------------------------------------------- */
int flex_quant_i4_dot_install_avx2(FlexQuantI4DotKernels *k) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return 0;
  *k = (FlexQuantI4DotKernels){"avx2", avx2_tiles, sse2_panel, avx2_quant, 2};
  return 1;
}

int flex_quant_i4_dot_install_vnni512(FlexQuantI4DotKernels *k) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni") ||
      !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return 0;
  *k = (FlexQuantI4DotKernels){"avx512_vnni", vnni_tiles, sse2_panel, avx2_quant, 4};
  return 1;
}
