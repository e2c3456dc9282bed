/*===- FlexDnnl.h - bf16 and f32 products on oneDNN's matmul primitive ---===*
 *
 * The bf16 path of the GEMM runtime on a CPU with AVX512-BF16 or AMX, and
 * the f32 path on a CPU with AVX-512 (docs/dense-ops.md): a product runs as
 * a cached oneDNN matmul primitive, whose C API functions the Python side
 * hands over once (flex_runtime_set_dnnl, backend/blas.py), enabling each
 * input type (flex_runtime_dnnl_use).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_FLEXDNNL_H
#define FLEX_RUNTIME_FLEXDNNL_H

#include <stdint.h>

/* C[i] (+)= A[i] * B[i] for i < batch: bf16 A and B with an f32 or bf16
 * C (in_bf16), or f32 A, B and C; each operand as (pointer to its first
 * element, batch, row, column strides in elements). Returns 1 when oneDNN
 * ran the product, 0 when it was not handed over, is not enabled for this
 * input type, or declines these strides (the caller uses the BLAS). */
int flex_dnnl_product(int in_bf16, int64_t batch, int64_t M, int64_t N,
                      int64_t K, const void *a, int64_t sab, int64_t sam,
                      int64_t sak, const void *b, int64_t sbb, int64_t sbk,
                      int64_t sbn, void *c, int64_t scb, int64_t scm,
                      int64_t scn, int out_bf16, int accumulate);

/* Whether oneDNN runs products of this input type (handed over and
 * enabled). */
int flex_runtime_dnnl_uses(int in_bf16);

#endif
