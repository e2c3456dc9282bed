/*===- FlexQuantGeneric.c - quantized-weight products on any CPU ----------===*
 *
 * The portable kernels of flex_quant_matmul_i8 / _i4 (FlexQuant.c
 * dispatches; FlexQuantKernels.h the contract), used where no ISA file has
 * kernels for the CPU or a lower ISA is forced
 * (TORCH_MLIR_FLEX_RUNTIME_ISA=generic). Plain C written for the baseline
 * auto-vectorizer, as Gemv/FlexGemvGeneric.c:
 *   - int8: one weight row at a time, widened to f32 into a block on the
 *     stack, then LANES independent partial sums a row of x;
 *   - int4: 16 columns of a packed block at a time, each k's nibbles
 *     unpacked into 16 floats, multiplied by x[m,k] into 16 sums a row of
 *     x over the group, then scaled with the group's scale and zero;
 *   - the short last block of an int4 weight whose N is not a multiple of
 *     the layout's block (flex_quant_i4_tail), for every ISA: at most 48
 *     columns of a product, the rest on the ISA's own kernels.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantKernels.h"

enum { LANES = 8, CHUNK = 512 };

/* Weight rows [n0, n1) against R rows of x from m0 (R a constant where
   inlined). */
__attribute__((always_inline)) static inline void
i8_run(const FlexQuantCall *c, int64_t m0, const int R, int64_t n0, int64_t n1) {
  const int64_t K = c->K;
  float wide[CHUNK];
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t *wr = (const int8_t *)c->w + n * c->wm;
    float acc[FLEX_QUANT_ROWS][LANES] = {{0}}, tail[FLEX_QUANT_ROWS] = {0};
    for (int64_t k0 = 0; k0 < K; k0 += CHUNK) {
      const int64_t len = K - k0 < CHUNK ? K - k0 : CHUNK, vec = len - len % LANES;
      for (int64_t k = 0; k < len; ++k)
        wide[k] = (float)wr[k0 + k];
      for (int m = 0; m < R; ++m) {
        const float *x = c->x + (m0 + m) * c->xm + k0;
        float a[LANES];
        for (int j = 0; j < LANES; ++j)
          a[j] = acc[m][j];
        for (int64_t k = 0; k < vec; k += LANES)
          for (int j = 0; j < LANES; ++j)
            a[j] += wide[k + j] * x[k + j];
        for (int j = 0; j < LANES; ++j)
          acc[m][j] = a[j];
        for (int64_t k = vec; k < len; ++k)
          tail[m] += wide[k] * x[k];
      }
    }
    const float s = flex_quant_scale(c, n);
    for (int m = 0; m < R; ++m) {
      float sum = 0.0f;
      for (int j = 0; j < LANES; ++j)
        sum += acc[m][j];
      flex_quant_store(c, m0 + m, n, (sum + tail[m]) * s);
    }
  }
}

/* The 4-bit values of columns 16v .. 16v+15 of a packed row of `layout`
   (layout, v constants where inlined: loops the compiler vectorizes). */
__attribute__((always_inline)) static inline void
nibbles(const uint8_t *restrict row, const int v, const int layout, float *restrict q) {
  if (layout == 0) {
    for (int i = 0; i < 8; ++i) {
      q[2 * i] = (float)(row[8 * v + i] & 15);
      q[2 * i + 1] = (float)(row[8 * v + i] >> 4);
    }
    return;
  }
  const uint8_t *from = row + (layout == 2 ? 16 * (v & 1) : 0);
  const int shift = (layout == 2 ? v >= 2 : v == 1) ? 4 : 0;
  for (int j = 0; j < 16; ++j)
    q[j] = (float)((from[j] >> shift) & 15);
}

/* One packed block against R rows of x (R, layout constants). */
__attribute__((always_inline)) static inline void
i4_block(const FlexQuantCall *c, int64_t m0, const int R, int64_t block, const int layout) {
  enum { COLS = 16 };
  const int BN = layout == 2 ? 64 : 32;
  const int64_t K = c->K, G = c->group, groups = K / G, N = c->N, xm = c->xm;
  const int64_t n_base = block * BN;
  const uint8_t *base = c->w + block * K * (BN / 2);
  const float *x = c->x + m0 * xm;
  float yacc[FLEX_QUANT_ROWS][64] = {{0}};
  for (int64_t g = 0; g < groups; ++g) {
    for (int v = 0; v < BN / COLS; ++v) {
      float acc[FLEX_QUANT_ROWS][COLS] = {{0}};
      for (int64_t k = g * G; k < (g + 1) * G; ++k) {
        float q[COLS];
        nibbles(base + k * (BN / 2), v, layout, q);
        for (int m = 0; m < R; ++m) {
          const float xv = x[m * xm + k];
          for (int j = 0; j < COLS; ++j)
            acc[m][j] += xv * q[j];
        }
      }
      for (int j = 0; j < COLS; ++j) {
        const int64_t at = (g * N + n_base + v * COLS + j) * 2;
        const float s = flex_quant_scale(c, at), z = flex_quant_scale(c, at + 1);
        for (int m = 0; m < R; ++m)
          yacc[m][v * COLS + j] +=
              s * acc[m][j] + (z - 8.0f * s) * c->xsum[(m0 + m) * groups + g];
      }
    }
  }
  for (int m = 0; m < R; ++m)
    for (int j = 0; j < BN; ++j)
      flex_quant_store(c, m0 + m, n_base + j, yacc[m][j]);
}

FLEX_QUANT_ENTRY_POINTS()

void flex_quant_i4_tail(const FlexQuantCall *c, int64_t m0, int rows) {
  const int64_t n_base = flex_quant_tail_start(c), width = c->N - n_base;
  const int64_t K = c->K, G = c->group, groups = K / G, N = c->N, xm = c->xm;
  const uint8_t *base = c->w + n_base * (K / 2); /* after the whole blocks */
  const float *x = c->x + m0 * xm;
  float yacc[FLEX_QUANT_ROWS][64] = {{0}};
  for (int64_t g = 0; g < groups; ++g) {
    float acc[FLEX_QUANT_ROWS][64] = {{0}};
    for (int64_t k = g * G; k < (g + 1) * G; ++k) {
      const uint8_t *row = base + k * (width / 2); /* byte i: columns 2i, 2i + 1 */
      for (int m = 0; m < rows; ++m) {
        const float xv = x[m * xm + k];
        for (int64_t i = 0; i < width / 2; ++i) {
          acc[m][2 * i] += xv * (float)(row[i] & 15);
          acc[m][2 * i + 1] += xv * (float)(row[i] >> 4);
        }
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      const int64_t at = (g * N + n_base + j) * 2;
      const float s = flex_quant_scale(c, at), z = flex_quant_scale(c, at + 1);
      for (int m = 0; m < rows; ++m)
        yacc[m][j] += s * acc[m][j] + (z - 8.0f * s) * c->xsum[(m0 + m) * groups + g];
    }
  }
  for (int m = 0; m < rows; ++m)
    for (int64_t j = 0; j < width; ++j)
      flex_quant_store(c, m0 + m, n_base + j, yacc[m][j]);
}

int flex_quant_install_generic(FlexQuantKernels *k) { return fill_kernels(k); }
