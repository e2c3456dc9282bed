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
 *     x over the group, then scaled with the group's scale and zero.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantKernels.h"

enum { LANES = 8, CHUNK = 512 };

static void i8_rows(const FlexQuantCall *c, int64_t m0, int rows, int64_t n0,
                    int64_t n1) {
  const int64_t K = c->K;
  float wide[CHUNK];
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t *wr = (const int8_t *)c->w + n * c->wm;
    float acc[FLEX_QUANT_ROWS][LANES] = {{0}}, tail[FLEX_QUANT_ROWS] = {0};
    for (int64_t k0 = 0; k0 < K; k0 += CHUNK) {
      const int64_t len = K - k0 < CHUNK ? K - k0 : CHUNK, vec = len - len % LANES;
      for (int64_t k = 0; k < len; ++k)
        wide[k] = (float)wr[k0 + k];
      for (int m = 0; m < rows; ++m) {
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
    for (int m = 0; m < rows; ++m) {
      float sum = 0.0f;
      for (int j = 0; j < LANES; ++j)
        sum += acc[m][j];
      flex_quant_store(c, m0 + m, n, (sum + tail[m]) * s);
    }
  }
}

/* The 4-bit value of column `col` (< BN) of a packed row of `layout`. */
static inline int nibble(const uint8_t *row, int col, const int layout) {
  int byte, high;
  if (layout == 2)
    byte = col & 31, high = col >= 32;
  else if (layout == 1)
    byte = col & 15, high = col >= 16;
  else
    byte = col >> 1, high = col & 1;
  return high ? row[byte] >> 4 : row[byte] & 15;
}

__attribute__((always_inline)) static inline void
i4_block(const FlexQuantCall *c, int64_t m0, int rows, int64_t block, const int layout) {
  enum { COLS = 16 };
  const int BN = layout == 2 ? 64 : 32;
  const int64_t K = c->K, G = c->group, groups = K / G, N = c->N;
  const int64_t n_base = block * BN;
  const uint8_t *base = c->w + block * K * (BN / 2);
  float yacc[FLEX_QUANT_ROWS][64] = {{0}};
  for (int64_t g = 0; g < groups; ++g) {
    for (int ch = 0; ch < BN / COLS; ++ch) {
      float acc[FLEX_QUANT_ROWS][COLS] = {{0}};
      for (int64_t k = g * G; k < (g + 1) * G; ++k) {
        const uint8_t *row = base + k * (BN / 2);
        float q[COLS];
        for (int j = 0; j < COLS; ++j)
          q[j] = (float)nibble(row, ch * COLS + j, layout);
        for (int m = 0; m < rows; ++m) {
          const float xv = c->x[(m0 + m) * c->xm + k];
          for (int j = 0; j < COLS; ++j)
            acc[m][j] += xv * q[j];
        }
      }
      for (int j = 0; j < COLS; ++j) {
        const int64_t at = (g * N + n_base + ch * COLS + j) * 2;
        const float s = flex_quant_scale(c, at), z = flex_quant_scale(c, at + 1);
        for (int m = 0; m < rows; ++m)
          yacc[m][ch * COLS + j] +=
              s * acc[m][j] + (z - 8.0f * s) * c->xsum[(m0 + m) * groups + g];
      }
    }
  }
  for (int m = 0; m < rows; ++m)
    for (int j = 0; j < BN; ++j)
      flex_quant_store(c, m0 + m, n_base + j, yacc[m][j]);
}

static void i4_layout0(const FlexQuantCall *c, int64_t m0, int rows, int64_t b) {
  i4_block(c, m0, rows, b, 0);
}
static void i4_layout1(const FlexQuantCall *c, int64_t m0, int rows, int64_t b) {
  i4_block(c, m0, rows, b, 1);
}
static void i4_layout2(const FlexQuantCall *c, int64_t m0, int rows, int64_t b) {
  i4_block(c, m0, rows, b, 2);
}

int flex_quant_install_generic(FlexQuantKernels *k) {
  k->i8 = i8_rows;
  k->i4[0] = i4_layout0;
  k->i4[1] = i4_layout1;
  k->i4[2] = i4_layout2;
  return 1;
}
