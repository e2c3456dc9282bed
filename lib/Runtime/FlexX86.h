/*===- FlexX86.h - what the x86-64 kernel files of the runtime share ------===*
 *
 * The target attributes of the per-ISA kernel files (Gemv/FlexGemvAvx2.c,
 * Gemv/FlexGemvAvx512.c, Quant/FlexQuantAvx2.c, Quant/FlexQuantAvx512.c:
 * each function carries its ISA, the files build with the baseline flags)
 * and the small AVX2 helpers more than one of them uses. Include only in
 * files built on x86-64 (FLEX_GEMV_X86).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_FLEXX86_H
#define FLEX_RUNTIME_FLEXX86_H

#include <immintrin.h>
#include <stdint.h>

#define FLEX_AVX2 __attribute__((target("avx2,fma")))
#define FLEX_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline
#define FLEX_AVX512 __attribute__((target("avx512f")))
#define FLEX_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* The sum of the 8 lanes. */
FLEX_AVX2_INLINE float flex_avx2_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Lanes [0, n) set, n in 0..8 (a mask for VMASKMOVPS). */
FLEX_AVX2_INLINE __m256i flex_avx2_first_lanes(int64_t n) {
  static const int32_t ones_then_zeros[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                              0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256((const __m256i *)(ones_then_zeros + 8 - n));
}

/* 8 bf16 at p as 8 f32 (exact): zero-extended to 32 bits, moved to the
   high half. */
FLEX_AVX2_INLINE __m256 flex_avx2_widen_bf16(const uint16_t *p) {
  __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

#endif
