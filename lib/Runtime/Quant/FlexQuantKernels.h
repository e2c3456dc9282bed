/*===- FlexQuantKernels.h - what the per-ISA quantized kernels share ------===*
 *
 * The contract between the dispatcher (FlexQuant.c: checks, threads, the
 * choice of kernels) and the kernel files, one per ISA family as in Gemv/
 * (FlexQuantGeneric.c, FlexQuantAvx2.c, FlexQuantAvx512.c):
 *   - x arrives as f32 rows (bf16 x widened once per call by the
 *     dispatcher) and, for int4, with its sums per group
 *     (xsum[m][k/g] = sum of x[m,k] over the group);
 *   - an int8 kernel computes y[m0 .. m0+rows) x [n0, n1), rows <= 4;
 *   - an int4 kernel computes y[m0 .. m0+rows) x one block of BN columns
 *     (the packing's column blocks), rows <= 4, from the group sums:
 *       y[m,n] = sum_g s[g,n] * sum_{k in g} x[m,k] * q[n,k]
 *                    + (z[g,n] - 8 s[g,n]) * xsum[m][g];
 *   - each file exports flex_quant_install_<isa>, which fills the kernels
 *     if this CPU runs them (checked in baseline code) and returns 1 then.
 * The dispatcher tiles larger M into blocks of 4 rows, with the weight
 * columns outermost, so a weight block comes from memory once per call.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_QUANT_FLEXQUANTKERNELS_H
#define FLEX_RUNTIME_QUANT_FLEXQUANTKERNELS_H

#include "../FlexBf16.h"
#include "../FlexInternal.h"
#include "FlexQuant.h"

#include <stdint.h>

enum { FLEX_QUANT_ROWS = 4 }; /* rows of x a kernel call takes at most */

typedef struct {
  int64_t M, N, K;
  const float *x; /* x[m,k] at m * xm + k */
  int64_t xm;
  const float *xsum; /* int4: [M][K / group] */
  const uint8_t *w;  /* int8: w[n,k] at n * wm + k; int4: the packed bytes */
  int64_t wm;
  const void *s; /* int8: scales [N]; int4: sz [K/group][N][2] */
  void *y;       /* y[m,n] at m * ym + n */
  int64_t ym;
  int64_t group, layout;
  int s_bf16, y_bf16;
} FlexQuantCall;

typedef void (*FlexQuantI8)(const FlexQuantCall *c, int64_t m0, int rows,
                            int64_t n0, int64_t n1);
typedef void (*FlexQuantI4)(const FlexQuantCall *c, int64_t m0, int rows,
                            int64_t block);

typedef struct {
  FlexQuantI8 i8;
  FlexQuantI4 i4[3]; /* by layout */
} FlexQuantKernels;

/* Columns of one packed block of `layout`. */
static inline int64_t flex_quant_block_cols(int64_t layout) {
  return layout == 2 ? 64 : 32;
}

/* Element i of the scales (int8: [N]) or of sz, f32 or bf16. */
static inline float flex_quant_scale(const FlexQuantCall *c, int64_t i) {
  return c->s_bf16 ? flex_bf16_to_f32(((const uint16_t *)c->s)[i])
                   : ((const float *)c->s)[i];
}

/* y[m,n] = v: f32, or bf16 rounded once. */
static inline void flex_quant_store(const FlexQuantCall *c, int64_t m,
                                    int64_t n, float v) {
  if (c->y_bf16)
    ((uint16_t *)c->y)[m * c->ym + n] = flex_f32_to_bf16(v);
  else
    ((float *)c->y)[m * c->ym + n] = v;
}

FLEX_RUNTIME_INTERNAL int flex_quant_install_generic(FlexQuantKernels *k);
#if FLEX_GEMV_X86
FLEX_RUNTIME_INTERNAL int flex_quant_install_avx2(FlexQuantKernels *k);
FLEX_RUNTIME_INTERNAL int flex_quant_install_avx512(FlexQuantKernels *k);
#endif

#endif
