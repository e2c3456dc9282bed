/*===- FlexGemv.h - products of a few rows on every CPU -------------------===*
 *
 * The few-row path of the GEMM runtime (FlexGemv.c and its per-ISA kernel
 * files, docs/runtime.md "Runtime kernels per ISA"), and the functions the
 * Python side (backend/blas.py) calls to choose and count its kernels.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_GEMV_FLEXGEMV_H
#define FLEX_RUNTIME_GEMV_FLEXGEMV_H

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

/* The same in bf16 (x, w), with f32 sums of the exact products and an f32
 * or bf16 (`out_bf16`, rounded once) y; on every CPU. */
int flex_gemv_bf16(int64_t M, int64_t N, int64_t K, const uint16_t *x,
                   int64_t sxm, int64_t sxk, const uint16_t *w, int64_t ldw,
                   void *y, int64_t sym, int64_t syn, int out_bf16,
                   int accumulate);

/* The ISAs of the kernels, lowest first ("generic", then on x86-64 "avx2",
 * "avx512"): the name of the i-th, NULL past the last. */
const char *flex_runtime_isa_name(int i);

/* Whether this CPU runs kernels of the ISA `name`. */
int flex_runtime_isa_available(const char *name);

/* Caps the kernels at the ISA `name` (NULL or "": the CPU's highest; the
 * first call reads TORCH_MLIR_FLEX_RUNTIME_ISA likewise); returns the ISA
 * then in effect, the highest of this CPU up to `name`, or NULL (nothing
 * changed) for an unknown name. */
const char *flex_runtime_set_isa(const char *name);

/* The ISA in effect. */
const char *flex_runtime_isa(void);

/* The ISA whose kernels run f32 (bf16 = 0) or bf16 (1) weights now (below
 * the ISA in effect where it has none for that dtype). */
const char *flex_runtime_gemv_kernel(int bf16);

/* How many products flex_gemv_f32 / flex_gemv_bf16 have run in this
 * process: all, or those of one ISA's kernels and one weight dtype (-1 for
 * an unknown ISA). */
int64_t flex_runtime_gemv_products(void);
int64_t flex_runtime_gemv_products_on(const char *isa, int bf16);

#endif
