/*===- FlexGemvGeneric.c - few-row products on any CPU -------------------===*
 *
 * The portable kernels of the few-row products (FlexGemv.c dispatches),
 * used where no ISA file has kernels for the CPU (or a lower ISA is forced,
 * TORCH_MLIR_FLEX_RUNTIME_ISA=generic). Plain C, written for the
 * auto-vectorizer of the baseline ISA (SSE2 on x86-64, NEON on AArch64):
 * LANES independent partial sums a row of x (a float sum the compiler may
 * not reorder, as one accumulator would be, is not vectorized), summed in
 * a fixed order at the end; bf16 weights widened to f32 (exact) on the
 * fly, against x widened once per product by the dispatcher (x_f32).
 * One weight row at a time, read once for the M rows of x.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexGemvKernels.h"

enum { LANES = 8 };

/* Weight k of a row: f32, or bf16 widened. `bf16` is a constant where
   inlined. */
__attribute__((always_inline)) static inline float weight(const void *row, int64_t k,
                                                          const int bf16) {
  return bf16 ? flex_bf16_to_f32(((const uint16_t *)row)[k]) : ((const float *)row)[k];
}

/* M (1..FLEX_GEMV_MAX_ROWS, a constant where inlined) rows of f32 x. */
__attribute__((always_inline)) static inline void rows(const FlexGemvSlice *s, const int M,
                                                       const int bf16) {
  const float *x = (const float *)s->x;
  const int64_t K = s->K, KL = K - K % LANES, xm = s->xm;
  const size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const void *r = (const char *)s->w + (size_t)(n * s->ldw) * es;
    float acc[FLEX_GEMV_MAX_ROWS][LANES] = {{0}};
    for (int64_t k = 0; k < KL; k += LANES) {
      float w[LANES];
      for (int j = 0; j < LANES; ++j)
        w[j] = weight(r, k + j, bf16);
      for (int m = 0; m < M; ++m)
        for (int j = 0; j < LANES; ++j)
          acc[m][j] += w[j] * x[m * xm + k + j];
    }
    for (int m = 0; m < M; ++m) {
      float tail = 0.0f;
      for (int64_t k = KL; k < K; ++k)
        tail += weight(r, k, bf16) * x[m * xm + k];
      float sum = 0.0f;
      for (int j = 0; j < LANES; ++j)
        sum += acc[m][j];
      flex_gemv_store(s, m, n, sum + tail);
    }
  }
}

static void f32_rows_1(const FlexGemvSlice *s) { rows(s, 1, 0); }
static void f32_rows_2(const FlexGemvSlice *s) { rows(s, 2, 0); }
static void f32_rows_3(const FlexGemvSlice *s) { rows(s, 3, 0); }
static void f32_rows_4(const FlexGemvSlice *s) { rows(s, 4, 0); }
static void bf16_rows_1(const FlexGemvSlice *s) { rows(s, 1, 1); }
static void bf16_rows_2(const FlexGemvSlice *s) { rows(s, 2, 1); }
static void bf16_rows_3(const FlexGemvSlice *s) { rows(s, 3, 1); }
static void bf16_rows_4(const FlexGemvSlice *s) { rows(s, 4, 1); }

int flex_gemv_install_generic(FlexGemvKernels *k) {
  static const FlexGemvRows f32[] = {f32_rows_1, f32_rows_2, f32_rows_3, f32_rows_4};
  static const FlexGemvRows bf16[] = {bf16_rows_1, bf16_rows_2, bf16_rows_3, bf16_rows_4};
  for (int m = 0; m < FLEX_GEMV_MAX_ROWS; ++m) {
    k->f32.rows[m] = f32[m];
    k->bf16.rows[m] = bf16[m];
  }
  k->bf16.x_f32 = 1;
  return 1;
}
