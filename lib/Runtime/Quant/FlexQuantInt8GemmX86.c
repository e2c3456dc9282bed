/*===- FlexQuantInt8GemmX86.c - the int8 GEMM's x86-64 kernels -----------===*
 *
 * The kernels of flex_gemm_u8s8 (FlexQuantInt8Gemm.c dispatches;
 * FlexQuantInt8GemmKernels.h the contract): C[m,n] = sum_k a[m,k] * b[k,n],
 * uint8 a, int8 b, exact int32 sums, as dot products over k (a row of A
 * against a column of B, both contiguous in k), a tile of up to 4 rows
 * times a few columns at a time so each load of A or B feeds several
 * products, reduced across lanes once per tile:
 *   - avx512_vnni: VPDPBUSD on 64 bytes (4 x 4 tiles; the K tail through
 *     masked loads, AVX512BW);
 *   - avx_vnni: VPDPBUSD (VEX) on 32 bytes (4 x 2 tiles);
 *   - avx2: VPMADDUBSW would saturate its int16 pair sums (255 * 127 * 2 >
 *     32767), so 16 bytes of each are widened (VPMOVZXBW / VPMOVSXBW) and
 *     multiplied by VPMADDWD into int32 pairs (4 x 2 tiles).
 * Every function carries its own target attribute; only the flex_i8gemm_*
 * lookups (baseline code) run before the CPU's features are known.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantInt8GemmKernels.h"

#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define T512_INLINE T512 __attribute__((always_inline)) static inline
#define TVNNI __attribute__((target("avx2,avxvnni")))
#define TVNNI_INLINE TVNNI __attribute__((always_inline)) static inline
#define TAVX2 __attribute__((target("avx2")))
#define TAVX2_INLINE TAVX2 __attribute__((always_inline)) static inline

/* The rows and columns of a tile: row r (column j) past the last valid one
   reads row 0 (column 0) again and is not stored. */
static inline void tile_rows(const FlexI8GemmCall *c, int64_t m0, int R,
                             const uint8_t **ar) {
  for (int r = 0; r < FLEX_I8GEMM_ROWS; ++r)
    ar[r] = c->a + (m0 + (r < R ? r : 0)) * c->am;
}
static inline void tile_cols(const FlexI8GemmCall *c, int64_t n, int cols,
                             int C, const int8_t **br) {
  for (int j = 0; j < C; ++j)
    br[j] = c->b + (n + (j < cols ? j : 0)) * c->bn;
}

/* The scalar sum over k in [k0, K) of row ar against column br. */
static inline int32_t tail_dot(const uint8_t *ar, const int8_t *br, int64_t k0,
                               int64_t K, uint8_t flip) {
  uint32_t s = 0;
  for (int64_t k = k0; k < K; ++k)
    s += (uint32_t)((int32_t)(uint8_t)(ar[k] ^ flip) * br[k]);
  return (int32_t)s;
}

/* ------------------------------------------------------------------------
 * AVX512-VNNI.
 * ---------------------------------------------------------------------- */
/* acc += VPDPBUSD(a, b), in place: GCC 12 copied the sums of
   _mm512_dpbusd_epi32 through other registers and the stack at every step
   (M=128, K=896, N=4864 on one Zen 5 core: 1.9 ms, 1.47 ms with this). */
T512_INLINE __m512i dpbusd512(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* [sum(v0), sum(v1), sum(v2), sum(v3)]: pairs interleaved and added within
   128-bit lanes first (unpack, add), then the four lanes added. */
T512_INLINE __m128i hsum4_512(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

T512_INLINE void tile512(const FlexI8GemmCall *c, int64_t m0, const int R, int64_t n,
                         int cols) {
  const int64_t K = c->K, K64 = K & ~(int64_t)63;
  const uint8_t *ar[FLEX_I8GEMM_ROWS];
  const int8_t *br[4];
  tile_rows(c, m0, R, ar);
  tile_cols(c, n, cols, 4, br);
  const __m512i flip = _mm512_set1_epi8(c->bsum ? (char)0x80 : 0);
  __m512i acc[FLEX_I8GEMM_ROWS][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j)
      acc[r][j] = _mm512_setzero_si512();
  for (int64_t k = 0; k < K64; k += 64) {
    __m512i bv[4];
    for (int j = 0; j < 4; ++j)
      bv[j] = _mm512_loadu_si512(br[j] + k);
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_xor_si512(_mm512_loadu_si512(ar[r] + k), flip);
      for (int j = 0; j < 4; ++j)
        acc[r][j] = dpbusd512(acc[r][j], av, bv[j]);
    }
  }
  if (K64 < K) { /* b is zero past K: a's flipped zeros add nothing */
    const __mmask64 m = _cvtu64_mask64(~0ULL >> (64 - (K - K64)));
    __m512i bv[4];
    for (int j = 0; j < 4; ++j)
      bv[j] = _mm512_maskz_loadu_epi8(m, br[j] + K64);
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, ar[r] + K64), flip);
      for (int j = 0; j < 4; ++j)
        acc[r][j] = dpbusd512(acc[r][j], av, bv[j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, hsum4_512(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    for (int j = 0; j < cols; ++j)
      flex_i8gemm_store(c, m0 + r, n + j, out[j]);
  }
}

/* The full 4 x 4 tile (every M >= 4 block but the column tail), its 16
   sums named. */
T512_INLINE void tile512_4x4_(const FlexI8GemmCall *c, int64_t m0, int64_t n, const int flip_a) {
  const int64_t K = c->K, K64 = K & ~(int64_t)63;
  const uint8_t *ar[FLEX_I8GEMM_ROWS];
  const int8_t *br[4];
  tile_rows(c, m0, 4, ar);
  tile_cols(c, n, 4, 4, br);
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  __m512i s00 = _mm512_setzero_si512(), s01 = s00, s02 = s00, s03 = s00;
  __m512i s10 = s00, s11 = s00, s12 = s00, s13 = s00, s20 = s00, s21 = s00;
  __m512i s22 = s00, s23 = s00, s30 = s00, s31 = s00, s32 = s00, s33 = s00;
  __mmask64 mask = ~(__mmask64)0;
  for (int64_t k = 0; k < K; k += 64) {
    if (k >= K64) /* b is zero past K: a's flipped zeros add nothing */
      mask = _cvtu64_mask64(~0ULL >> (64 - (K - K64)));
    const __m512i b0 = _mm512_maskz_loadu_epi8(mask, br[0] + k);
    const __m512i b1 = _mm512_maskz_loadu_epi8(mask, br[1] + k);
    const __m512i b2 = _mm512_maskz_loadu_epi8(mask, br[2] + k);
    const __m512i b3 = _mm512_maskz_loadu_epi8(mask, br[3] + k);
#define FLEX_ROW(r)                                                              \
  {                                                                              \
    __m512i av = _mm512_maskz_loadu_epi8(mask, ar[r] + k);                       \
    if (flip_a)                                                                  \
      av = _mm512_xor_si512(av, flip);                                           \
    s##r##0 = dpbusd512(s##r##0, av, b0);                                        \
    s##r##1 = dpbusd512(s##r##1, av, b1);                                        \
    s##r##2 = dpbusd512(s##r##2, av, b2);                                        \
    s##r##3 = dpbusd512(s##r##3, av, b3);                                        \
  }
    FLEX_ROW(0) FLEX_ROW(1) FLEX_ROW(2) FLEX_ROW(3)
#undef FLEX_ROW
  }
  const __m128i sums[4] = {hsum4_512(s00, s01, s02, s03), hsum4_512(s10, s11, s12, s13),
                           hsum4_512(s20, s21, s22, s23), hsum4_512(s30, s31, s32, s33)};
  for (int r = 0; r < 4; ++r) {
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, sums[r]);
    for (int j = 0; j < 4; ++j)
      flex_i8gemm_store(c, m0 + r, n + j, out[j]);
  }
}

/* A's XOR by 0x80 only for a signed A. */
T512 static void tile512_4x4(const FlexI8GemmCall *c, int64_t m0, int64_t n) {
  if (c->bsum)
    tile512_4x4_(c, m0, n, 1);
  else
    tile512_4x4_(c, m0, n, 0);
}

T512_INLINE void rows512(const FlexI8GemmCall *c, int64_t m0, const int R, int64_t n0,
                         int64_t n1) {
  for (int64_t n = n0; n < n1; n += 4) {
    if (R == 4 && n + 4 <= n1)
      tile512_4x4(c, m0, n);
    else
      tile512(c, m0, R, n, n1 - n < 4 ? (int)(n1 - n) : 4);
  }
}

T512 static void kernel_avx512_vnni(const FlexI8GemmCall *c, int64_t m0, int rows,
                                    int64_t n0, int64_t n1) {
  switch (rows) {
  case 1: rows512(c, m0, 1, n0, n1); break;
  case 2: rows512(c, m0, 2, n0, n1); break;
  case 3: rows512(c, m0, 3, n0, n1); break;
  default: rows512(c, m0, 4, n0, n1); break;
  }
}

/* ------------------------------------------------------------------------
 * 256-bit: AVX-VNNI and AVX2, 4 x 2 tiles over 32 (VNNI) or 16 (AVX2)
 * bytes of k; the K tail in scalar code.
 * ---------------------------------------------------------------------- */
TAVX2_INLINE void store2_256(const FlexI8GemmCall *c, int64_t m, int64_t n, int cols,
                             __m256i v0, __m256i v1, const uint8_t *ar, const int8_t **br,
                             int64_t k0) {
  const __m128i q0 = _mm_add_epi32(_mm256_castsi256_si128(v0), _mm256_extracti128_si256(v0, 1));
  const __m128i q1 = _mm_add_epi32(_mm256_castsi256_si128(v1), _mm256_extracti128_si256(v1, 1));
  const __m128i h = _mm_hadd_epi32(q0, q1), s = _mm_hadd_epi32(h, h);
  const uint8_t flip = c->bsum ? 0x80 : 0;
  flex_i8gemm_store(c, m, n,
                    (int32_t)((uint32_t)_mm_cvtsi128_si32(s) +
                              (uint32_t)tail_dot(ar, br[0], k0, c->K, flip)));
  if (cols > 1)
    flex_i8gemm_store(c, m, n + 1,
                      (int32_t)((uint32_t)_mm_extract_epi32(s, 1) +
                                (uint32_t)tail_dot(ar, br[1], k0, c->K, flip)));
}

/* acc += VPDPBUSD (VEX) of a, b, in place (as dpbusd512). */
TVNNI_INLINE __m256i dpbusd256(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}

TVNNI_INLINE void tile_vnni(const FlexI8GemmCall *c, int64_t m0, const int R, int64_t n,
                            int cols) {
  const int64_t K32 = c->K & ~(int64_t)31;
  const uint8_t *ar[FLEX_I8GEMM_ROWS];
  const int8_t *br[2];
  tile_rows(c, m0, R, ar);
  tile_cols(c, n, cols, 2, br);
  const __m256i flip = _mm256_set1_epi8(c->bsum ? (char)0x80 : 0);
  __m256i acc[FLEX_I8GEMM_ROWS][2];
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t k = 0; k < K32; k += 32) {
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)(br[0] + k));
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(br[1] + k));
    for (int r = 0; r < R; ++r) {
      const __m256i av =
          _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(ar[r] + k)), flip);
      acc[r][0] = dpbusd256(acc[r][0], av, b0);
      acc[r][1] = dpbusd256(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < R; ++r)
    store2_256(c, m0 + r, n, cols, acc[r][0], acc[r][1], ar[r], br, K32);
}

TVNNI static void kernel_avx_vnni(const FlexI8GemmCall *c, int64_t m0, int rows,
                                  int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 2) {
    const int cols = n1 - n < 2 ? 1 : 2;
    switch (rows) {
    case 1: tile_vnni(c, m0, 1, n, cols); break;
    case 2: tile_vnni(c, m0, 2, n, cols); break;
    case 3: tile_vnni(c, m0, 3, n, cols); break;
    default: tile_vnni(c, m0, 4, n, cols); break;
    }
  }
}

TAVX2_INLINE void tile_avx2(const FlexI8GemmCall *c, int64_t m0, const int R, int64_t n,
                            int cols) {
  const int64_t K16 = c->K & ~(int64_t)15;
  const uint8_t *ar[FLEX_I8GEMM_ROWS];
  const int8_t *br[2];
  tile_rows(c, m0, R, ar);
  tile_cols(c, n, cols, 2, br);
  const __m128i flip = _mm_set1_epi8(c->bsum ? (char)0x80 : 0);
  __m256i acc[FLEX_I8GEMM_ROWS][2];
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t k = 0; k < K16; k += 16) {
    const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(br[0] + k)));
    const __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(br[1] + k)));
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_cvtepu8_epi16(
          _mm_xor_si128(_mm_loadu_si128((const __m128i *)(ar[r] + k)), flip));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int r = 0; r < R; ++r)
    store2_256(c, m0 + r, n, cols, acc[r][0], acc[r][1], ar[r], br, K16);
}

TAVX2 static void kernel_avx2(const FlexI8GemmCall *c, int64_t m0, int rows, int64_t n0,
                              int64_t n1) {
  for (int64_t n = n0; n < n1; n += 2) {
    const int cols = n1 - n < 2 ? 1 : 2;
    switch (rows) {
    case 1: tile_avx2(c, m0, 1, n, cols); break;
    case 2: tile_avx2(c, m0, 2, n, cols); break;
    case 3: tile_avx2(c, m0, 3, n, cols); break;
    default: tile_avx2(c, m0, 4, n, cols); break;
    }
  }
}

/* ------------------------------------------------------------------------
 * The lookups: a kernel where this CPU has its ISA, else NULL.
 * ---------------------------------------------------------------------- */
FlexI8GemmKernel flex_i8gemm_avx512_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vnni")
             ? kernel_avx512_vnni
             : (FlexI8GemmKernel)0;
}

FlexI8GemmKernel flex_i8gemm_avx_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni")
             ? kernel_avx_vnni
             : (FlexI8GemmKernel)0;
}

FlexI8GemmKernel flex_i8gemm_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? kernel_avx2 : (FlexI8GemmKernel)0;
}
