/*===- FlexGemvKernels.h - what the per-ISA few-row kernels share ---------===*
 *
 * The contract between the dispatcher (FlexGemv.c: checks, threads, the
 * choice of kernels) and the kernel files, one per ISA family as ggml-cpu
 * keeps them (FlexGemvGeneric.c, FlexGemvAvx2.c, FlexGemvAvx512.c):
 *   - a kernel computes the outputs [n0, n1) of one thread's slice;
 *   - each file exports flex_gemv_install_<isa>, which fills the kernels it
 *     can run on this CPU (it checks the CPU's features itself, in code
 *     compiled for the baseline ISA) and returns 1 when it filled any.
 * Adding an ISA is one more file and one line in FlexGemv.c's `kIsas`.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_GEMV_FLEXGEMVKERNELS_H
#define FLEX_RUNTIME_GEMV_FLEXGEMVKERNELS_H

#include "../FlexBf16.h"
#include "../FlexInternal.h"
#include "FlexGemv.h"

#include <stdint.h>

/* One thread's share of a product: outputs n0 <= n < n1 of the M rows. */
typedef struct FlexGemvSlice FlexGemvSlice;
struct FlexGemvSlice {
  int64_t n0, n1, K, ldw; /* weight row n at w + n * ldw (elements) */
  int64_t M, xm;          /* rows of x, each contiguous, xm elements apart */
  const void *x;          /* f32, or bf16 for kernels that read it so */
  const void *w;          /* f32 or bf16, as the kernel's dtype says */
  void *y;
  int64_t ym, sy; /* y[m][n] at m * ym + n * sy */
  int accumulate, out_bf16;
  void (*rows)(const FlexGemvSlice *);
};

typedef void (*FlexGemvRows)(const FlexGemvSlice *);

/* The kernels of one weight dtype: rows[M - 1] takes M rows of x. */
typedef struct {
  FlexGemvRows rows[FLEX_GEMV_MAX_ROWS];
  /* bf16 weights only: the kernels read x widened to f32 (exact) by the
     dispatcher once per product, instead of bf16. */
  int x_f32;
} FlexGemvKernel;

typedef struct {
  FlexGemvKernel f32;  /* f32 x, f32 weights */
  FlexGemvKernel bf16; /* bf16 weights, x bf16 or f32 (x_f32) */
} FlexGemvKernels;

/* y[m][n] (+)= v: an f32 output, or a bf16 one rounded once. */
static inline void flex_gemv_store(const FlexGemvSlice *s, int64_t m,
                                   int64_t n, float v) {
  int64_t at = m * s->ym + n * s->sy;
  if (s->out_bf16) {
    uint16_t *out = (uint16_t *)s->y + at;
    *out = flex_f32_to_bf16(s->accumulate ? flex_bf16_to_f32(*out) + v : v);
  } else {
    float *out = (float *)s->y + at;
    *out = s->accumulate ? *out + v : v;
  }
}

/* Each fills the kernels this CPU can run and returns 1 when it filled
   any (0: the CPU lacks the ISA). Internal to the library. */
FLEX_RUNTIME_INTERNAL int flex_gemv_install_generic(FlexGemvKernels *k);
#if FLEX_GEMV_X86
FLEX_RUNTIME_INTERNAL int flex_gemv_install_avx2(FlexGemvKernels *k);
FLEX_RUNTIME_INTERNAL int flex_gemv_install_avx512(FlexGemvKernels *k);
#endif

#endif
