/*===- FlexGemvGeneric.c - few-row products on any CPU -------------------===*
 *
 * The portable kernels of the few-row products (FlexGemv.c dispatches),
 * used where no ISA file has kernels for the CPU (or a lower ISA is forced,
 * TORCH_MLIR_FLEX_RUNTIME_ISA=generic). Plain C, written for the
 * auto-vectorizer of the baseline ISA (SSE2 on x86-64, NEON on AArch64):
 * LANES independent partial sums a row of x (a float sum the compiler may
 * not reorder, as one accumulator would be, is not vectorized), summed in
 * a fixed order at the end; bf16 weights widened to f32 (exact), in the
 * loop for one row of x and into a block on the stack for several (1.45x
 * the rate of the block for one row), against x widened once per product
 * by the dispatcher (x_f32). One weight row at a time, read from memory
 * once for the M rows of x.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexGemvKernels.h"

enum { LANES = 8, CHUNK = 512 };

/* acc[j] += sum of w[k] * x[k] over k = j mod LANES, k < n (n a multiple
   of LANES): LANES independent sums, which vectorize. */
static inline void add_dot(float *restrict acc, const float *restrict w,
                           const float *restrict x, int64_t n) {
  float a[LANES];
  for (int j = 0; j < LANES; ++j)
    a[j] = acc[j];
  for (int64_t k = 0; k < n; k += LANES)
    for (int j = 0; j < LANES; ++j)
      a[j] += w[k + j] * x[k + j];
  for (int j = 0; j < LANES; ++j)
    acc[j] = a[j];
}

/* One row of x against bf16 weights widened on the fly (no block). */
static float dot_bf16(const uint16_t *restrict w, const float *restrict x, int64_t K) {
  const int64_t vec = K - K % LANES;
  float a[LANES] = {0}, tail = 0.0f, sum = 0.0f;
  for (int64_t k = 0; k < vec; k += LANES)
    for (int j = 0; j < LANES; ++j)
      a[j] += flex_bf16_to_f32(w[k + j]) * x[k + j];
  for (int64_t k = vec; k < K; ++k)
    tail += flex_bf16_to_f32(w[k]) * x[k];
  for (int j = 0; j < LANES; ++j)
    sum += a[j];
  return sum + tail;
}

/* Each weight row in chunks of CHUNK elements (bf16 widened into a block
   on the stack), each chunk against the M rows of x in turn: the weights
   read from memory once, then from the cache (one loop a row of x
   vectorizes; the M rows in one loop did not). */
__attribute__((always_inline)) static inline void rows(const FlexGemvSlice *s, const int bf16) {
  const int64_t K = s->K, M = s->M, xm = s->xm;
  const float *x = (const float *)s->x;
  float wide[CHUNK];
  for (int64_t n = s->n0; n < s->n1; ++n) {
    float acc[FLEX_GEMV_MAX_ROWS][LANES] = {{0}}, tail[FLEX_GEMV_MAX_ROWS] = {0};
    for (int64_t k0 = 0; k0 < K; k0 += CHUNK) {
      const int64_t len = K - k0 < CHUNK ? K - k0 : CHUNK, vec = len - len % LANES;
      const float *w;
      if (bf16) {
        const uint16_t *from = (const uint16_t *)s->w + n * s->ldw + k0;
        for (int64_t k = 0; k < len; ++k)
          wide[k] = flex_bf16_to_f32(from[k]);
        w = wide;
      } else {
        w = (const float *)s->w + n * s->ldw + k0;
      }
      for (int64_t m = 0; m < M; ++m) {
        add_dot(acc[m], w, x + m * xm + k0, vec);
        for (int64_t k = vec; k < len; ++k) /* the row's last elements */
          tail[m] += w[k] * x[m * xm + k0 + k];
      }
    }
    for (int64_t m = 0; m < M; ++m) {
      float sum = 0.0f;
      for (int j = 0; j < LANES; ++j)
        sum += acc[m][j];
      flex_gemv_store(s, m, n, sum + tail[m]);
    }
  }
}

static void f32_rows(const FlexGemvSlice *s) { rows(s, 0); }
static void bf16_rows(const FlexGemvSlice *s) {
  if (s->M > 1) {
    rows(s, 1);
    return;
  }
  for (int64_t n = s->n0; n < s->n1; ++n)
    flex_gemv_store(s, 0, n,
                    dot_bf16((const uint16_t *)s->w + n * s->ldw, (const float *)s->x, s->K));
}

int flex_gemv_install_generic(FlexGemvKernels *k) {
  for (int m = 0; m < FLEX_GEMV_MAX_ROWS; ++m) { /* one kernel for every M */
    k->f32.rows[m] = f32_rows;
    k->bf16.rows[m] = bf16_rows;
  }
  k->bf16.x_f32 = 1;
  return 1;
}
