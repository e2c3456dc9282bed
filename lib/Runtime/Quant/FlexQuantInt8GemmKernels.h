/*===- FlexQuantInt8GemmKernels.h - the int8 GEMM's kernel contract -------===*
 *
 * Between the dispatcher of flex_gemm_u8s8 (FlexQuantInt8Gemm.c: checks,
 * operand layouts, threads, the choice of kernels) and its kernel files
 * (generic C in FlexQuantInt8Gemm.c, x86-64 in FlexQuantInt8GemmX86.c):
 *   - A arrives as rows of uint8 with k contiguous (a[m,k] at m * am + k);
 *     a signed A is read as a ^ 0x80 (= a + 128) and the dispatcher's
 *     column sums of B take the 128 back off;
 *   - B arrives as columns of int8 with k contiguous (b[k,n] at n * bn + k:
 *     the transpose of a linear layer's weight read in place);
 *   - a kernel computes C[m0 .. m0+rows) x [n0, n1), rows <= 4, as exact
 *     int32 sums: C (+)= sum_k a[m,k] * b[k,n] (- 128 * bsum[n]).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_QUANT_FLEXQUANTINT8GEMMKERNELS_H
#define FLEX_RUNTIME_QUANT_FLEXQUANTINT8GEMMKERNELS_H

#include "FlexQuant.h"

#include <stdint.h>

enum { FLEX_I8GEMM_ROWS = 4 }; /* rows of A a kernel call takes at most */

typedef struct {
  int64_t M, N, K;
  const uint8_t *a; /* a[m,k] at m * am + k */
  int64_t am;
  const int8_t *b; /* b[k,n] at n * bn + k */
  int64_t bn;
  int32_t *c; /* c[m,n] at m * cm + n * cn */
  int64_t cm, cn;
  const int32_t *bsum; /* signed A: sum_k b[k,n]; else NULL */
  int accumulate;
} FlexI8GemmCall;

typedef void (*FlexI8GemmKernel)(const FlexI8GemmCall *c, int64_t m0,
                                 int rows, int64_t n0, int64_t n1);

/* c[m,n] = sum (+ the old c[m,n] when accumulating), minus the signed-A
   correction. */
static inline void flex_i8gemm_store(const FlexI8GemmCall *c, int64_t m,
                                     int64_t n, int32_t sum) {
  /* unsigned: the sums wrap modulo 2^32 as torch._int_mm's int32 would */
  int32_t *dst = c->c + m * c->cm + n * c->cn;
  uint32_t v = (uint32_t)sum;
  if (c->bsum)
    v -= 128u * (uint32_t)c->bsum[n];
  *dst = (int32_t)(c->accumulate ? (uint32_t)*dst + v : v);
}

/* The kernels of FlexQuantInt8GemmX86.c, NULL where this CPU lacks the
   ISA (checked in baseline code). */
#define FLEX_I8GEMM_INTERNAL __attribute__((visibility("hidden")))
#if FLEX_GEMV_X86
FLEX_I8GEMM_INTERNAL FlexI8GemmKernel flex_i8gemm_avx2(void);
FLEX_I8GEMM_INTERNAL FlexI8GemmKernel flex_i8gemm_avx_vnni(void);
FLEX_I8GEMM_INTERNAL FlexI8GemmKernel flex_i8gemm_avx512_vnni(void);
#endif

#endif
