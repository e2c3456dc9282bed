/*===- FlexGemv.h - products of one row on every CPU ----------------------===*
 *
 * The few-row path of the GEMM runtime (FlexGemv.c, docs/dense-ops.md).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_FLEXGEMV_H
#define FLEX_RUNTIME_FLEXGEMV_H

#include <stdint.h>

/* Products of at most this many rows run here. */
#define FLEX_GEMV_MAX_ROWS 4

/* y[m * sym + n * syn] (+)= sum_k x[m * sxm + k * sxk] * w[n * ldw + k] for
 * m < M, n < N (f32; rows of w contiguous). Returns 1 when it ran the
 * product, 0 when it did not (M outside 1..FLEX_GEMV_MAX_ROWS, nothing to
 * do, no memory, or FLEX_GEMV=0 in the environment). */
int flex_gemv_f32(int64_t M, int64_t N, int64_t K, const float *x,
                  int64_t sxm, int64_t sxk, const float *w, int64_t ldw,
                  float *y, int64_t sym, int64_t syn, int accumulate);

/* The same in bf16 (x, w), with f32 sums and an f32 or bf16 (`out_bf16`,
 * rounded once) y; runs only where the CPU has AVX512-BF16, else returns
 * 0. */
int flex_gemv_bf16(int64_t M, int64_t N, int64_t K, const uint16_t *x,
                   int64_t sxm, int64_t sxk, const uint16_t *w, int64_t ldw,
                   void *y, int64_t sym, int64_t syn, int out_bf16,
                   int accumulate);

/* How many products flex_gemv_f32 / flex_gemv_bf16 have run in this process. */
int64_t flex_runtime_gemv_products(void);

#endif
