/*===- FlexQuant.h - products by quantized weights: the runtime ABI -------===*
 *
 * The functions that flex-quant-matmul-to-calls emits calls of (the shared
 * design of issue #41: every argument an int64_t, as the calls pass `index`
 * values), and the counters the Python side (backend/blas.py) reads to see
 * which kernels ran. FlexQuant.c holds the checks, the threads and the
 * choice of kernels; one file per ISA family beside it the kernels
 * (FlexQuantKernels.h).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_QUANT_FLEXQUANT_H
#define FLEX_RUNTIME_QUANT_FLEXQUANT_H

#include <stdint.h>

/* `flags` bits of both entry points. */
enum {
  FLEX_QUANT_X_BF16 = 1, /* x is bf16 (else f32) */
  FLEX_QUANT_Y_BF16 = 2, /* y is bf16, rounded once to nearest even */
  FLEX_QUANT_S_BF16 = 4  /* scales (int8) or scale_and_zero (int4) bf16 */
};

/* The weight formats, as the counters name them. */
enum { FLEX_QUANT_INT8 = 0, FLEX_QUANT_INT4 = 1 };

/* y[m,n] = (sum_k x[m,k] * w[n,k]) * scales[n], m < M, n < N, k < K;
 * w int8; f32 sums. x[m,k] at element x_off + m*x_rs + k of x_ptr (f32 or
 * bf16), w[n,k] at byte w_off + n*w_rs + k, scales[n] at s_off + n, y[m,n]
 * at y_off + m*y_rs + n. The pointers are addresses, as int64_t. */
void flex_quant_matmul_i8(int64_t M, int64_t N, int64_t K, int64_t x_ptr,
                          int64_t x_off, int64_t x_rs, int64_t w_ptr,
                          int64_t w_off, int64_t w_rs, int64_t s_ptr,
                          int64_t s_off, int64_t y_ptr, int64_t y_off,
                          int64_t y_rs, int64_t flags);

/* y[m,n] = sum_k x[m,k] * ((q[n,k] - 8) * sz[k/g][n][0] + sz[k/g][n][1]):
 * q the 4-bit weights that torch's _convert_weight_to_int4pack_for_cpu
 * packed in `layout` (0: DEFAULT, 1: AVX2, 2: AVX512; quant-design.md),
 * contiguous from byte w_off; sz [K/g][N][2] contiguous from element
 * sz_off; g = group_size. N is a multiple of 16; where the layout's column
 * block (32, or 64 for layout 2) does not divide it, the last N mod block
 * columns are torch's short block (FlexQuantKernels.h). */
void flex_quant_matmul_i4(int64_t M, int64_t N, int64_t K, int64_t x_ptr,
                          int64_t x_off, int64_t x_rs, int64_t w_ptr,
                          int64_t w_off, int64_t sz_ptr, int64_t sz_off,
                          int64_t y_ptr, int64_t y_off, int64_t y_rs,
                          int64_t group_size, int64_t layout, int64_t flags);

/* The ISA whose kernels run quantized products now: the highest of this
 * CPU up to the runtime's ISA in effect (flex_runtime_isa, Gemv/). */
const char *flex_runtime_quant_kernel(void);

/* How many products ran in this process: all, or those of one ISA's
 * kernels and one format (FLEX_QUANT_INT8 / _INT4; -1 for an unknown ISA
 * or format). */
int64_t flex_runtime_quant_products(void);
int64_t flex_runtime_quant_products_on(const char *isa, int format);

/* How many calls were refused for bad arguments (y left as it was), and
 * the message of the last one (NULL before any). */
int64_t flex_runtime_quant_rejected(void);
const char *flex_runtime_quant_error(void);

/* The activations of int4 products of FLEX_QUANT_I4_DOT_MIN_ROWS (8) rows
 * or more (FlexQuantI4Dot.h): "f32" (the default: weight-only numerics, as
 * torchao's eager) or "int8" (x quantized per row and group, int8 dot
 * products). The first read takes TORCH_MLIR_FLEX_QUANT_ACTIVATIONS; the
 * setter ("int8", "f32", or NULL / "" for f32) returns the mode then in
 * effect, NULL for an unknown one (nothing changed). The int8 path's
 * products per kernel variant ("generic", "avx2", "avx512_vnni": the i-th
 * name, NULL past the last; NULL: all; -1 for an unknown name), and the
 * variant it would run now (from flex_runtime_quant_kernel's ISA). */
const char *flex_runtime_quant_activations(void);
const char *flex_runtime_quant_set_activations(const char *mode);
const char *flex_runtime_quant_i8act_variant_name(int i);
const char *flex_runtime_quant_i8act_kernel(void);
int64_t flex_runtime_quant_i8act_products(const char *variant);

/* C[m,n] (+)= sum_k A[m,k] * B[k,n]: uint8 A (int8 with flags bit 2), int8
 * B, exact int32 sums (FlexQuantInt8Gemm.c; flex-int-matmul-to-calls).
 * A[m,k] at byte a_off + m*a_rs + k*a_cs, B[k,n] at b_off + k*b_rs +
 * n*b_cs, C[m,n] at int32 element c_off + m*c_rs + n*c_cs. flags bit 1:
 * add to C (else overwrite it). Read in place when k is contiguous in A's
 * rows and B's columns (B = t(w) of a weight w [N,K]), else copied. */
void flex_gemm_u8s8(int64_t M, int64_t N, int64_t K, int64_t a_ptr, int64_t a_off,
                    int64_t a_rs, int64_t a_cs, int64_t b_ptr, int64_t b_off,
                    int64_t b_rs, int64_t b_cs, int64_t c_ptr, int64_t c_off,
                    int64_t c_rs, int64_t c_cs, int64_t flags);

/* Its kernel variants ("generic", on x86-64 "avx2", "avx_vnni",
 * "avx512_vnni"): the i-th name (NULL past the last), whether this CPU runs
 * one, the one in effect (the best at or below flex_runtime_isa, unless
 * forced), forcing one (NULL or "": none; returns the variant then in
 * effect, or NULL for an unknown or unavailable one), products run (all
 * for NULL; -1 for an unknown name), and calls refused with the last
 * message. */
const char *flex_runtime_int8_gemm_variant_name(int i);
int flex_runtime_int8_gemm_available(const char *name);
const char *flex_runtime_int8_gemm_kernel(void);
const char *flex_runtime_int8_gemm_set_kernel(const char *name);
int64_t flex_runtime_int8_gemm_products(const char *variant);
int64_t flex_runtime_int8_gemm_rejected(void);
const char *flex_runtime_int8_gemm_error(void);

#endif
