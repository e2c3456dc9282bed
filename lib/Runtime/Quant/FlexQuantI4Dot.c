/*===- FlexQuantI4Dot.c - int4 products through int8 dot products --------===*
 *
 * The opt-in int8-activation path of flex_quant_matmul_i4 (the contract and
 * the numerics: FlexQuantI4Dot.h; the switch and the accuracy:
 * docs/quantization.md): the switch (TORCH_MLIR_FLEX_QUANT_ACTIVATIONS,
 * read once; flex_runtime_quant_set_activations), the counters per kernel
 * variant, the quantization of x (once per call, in the calling thread),
 * the split of the weight's column blocks between threads and, in each
 * thread, the loops: a block of W columns, rows of x in slabs of up to
 * DOT_MB, k in chunks of about DOT_KC (whole groups): the chunk's panel
 * built once and run against every tile of rows of the slab, the sums of
 * the slab's rows kept in a small f32 tile of y until the block is done.
 * Beside them the generic kernel (plain C, any CPU); the x86-64 kernels in
 * FlexQuantI4DotX86.c.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantI4Dot.h"

#include "../FlexThreads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DOT_KC = 256, DOT_MB = 256, DOT_MAX_W = 64 };

/* ------------------------------------------------------------------------
 * The generic kernel.
 * ---------------------------------------------------------------------- */
static uint8_t nibble(const uint8_t *row, int layout, int W, int j) {
  if (layout == 0)
    return (uint8_t)((row[j >> 1] >> ((j & 1) * 4)) & 15);
  return (uint8_t)(j < W / 2 ? row[j] & 15 : row[j - W / 2] >> 4);
}

static void generic_panel(const uint8_t *src, int layout, int W, int64_t k0, int64_t k1,
                          uint8_t *out) {
  for (int64_t k = k0; k < k1; ++k) {
    const uint8_t *row = src + k * (W / 2);
    uint8_t *o = out + (k - k0) / 4 * 4 * W + (k & 3);
    for (int j = 0; j < W; ++j)
      o[4 * j] = nibble(row, layout, W, j);
  }
}

static void generic_tile(const FlexQuantI4Dot *d, const uint8_t *panel, const float *sz,
                         int64_t m, int rows, int64_t g0, int64_t g1, int W, float *yt) {
  const FlexQuantCall *c = d->c;
  const int64_t G = c->group, K = c->K;
  for (int r = 0; r < rows; ++r) {
    float *y = yt + r * W;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t i = (m + r) * d->groups + g;
      const int8_t *xq = d->qx + (m + r) * K + g * G;
      const uint8_t *p = panel + (g - g0) * G * W;
      int32_t acc[DOT_MAX_W];
      for (int j = 0; j < W; ++j)
        acc[j] = d->corr[i];
      for (int64_t k = 0; k < G; k += 4) {
        const int32_t x0 = xq[k], x1 = xq[k + 1], x2 = xq[k + 2], x3 = xq[k + 3];
        const uint8_t *pk = p + k * W;
        for (int j = 0; j < W; ++j)
          acc[j] += pk[4 * j] * x0 + pk[4 * j + 1] * x1 + pk[4 * j + 2] * x2 + pk[4 * j + 3] * x3;
      }
      const float *s = sz + (g - g0) * 2 * W, *z = s + W;
      const float sx = d->sx[i], xs = c->xsum[i];
      for (int j = 0; j < W; ++j) {
        const float t = y[j] + z[j] * xs;
        y[j] = t + (float)acc[j] * (s[j] * sx);
      }
    }
  }
}

static int32_t generic_quant(const float *x, int64_t G, int8_t *q, float *sx);

/* ------------------------------------------------------------------------
 * The variants, the switch and the counters.
 * ---------------------------------------------------------------------- */
enum { V_GENERIC, V_AVX2, V_VNNI512, NUM_VARIANTS };
static const char *const kNames[NUM_VARIANTS] = {"generic", "avx2", "avx512_vnni"};
static FlexQuantI4DotKernels g_kernels[NUM_VARIANTS];
static int g_installed[NUM_VARIANTS];
static int64_t g_products[NUM_VARIANTS];
static int g_int8; /* the switch */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void install(void) {
  g_kernels[V_GENERIC] = (FlexQuantI4DotKernels){"generic", generic_tile, generic_panel, generic_quant, 4};
  g_installed[V_GENERIC] = 1;
#if FLEX_GEMV_X86
  g_installed[V_AVX2] = flex_quant_i4_dot_install_avx2(&g_kernels[V_AVX2]);
  g_installed[V_VNNI512] = flex_quant_i4_dot_install_vnni512(&g_kernels[V_VNNI512]);
#endif
  const char *env = getenv("TORCH_MLIR_FLEX_QUANT_ACTIVATIONS");
  if (env && *env) {
    if (strcmp(env, "int8") == 0)
      g_int8 = 1;
    else if (strcmp(env, "f32") != 0)
      fprintf(stderr, "torch-mlir-flex runtime: TORCH_MLIR_FLEX_QUANT_ACTIVATIONS=%s: not int8 "
                      "or f32; int4 products keep f32 activations\n", env);
  }
}

/* The variant for the quant ISA `isa`: VNNI under "avx512" where the CPU
   has it (else AVX2's), AVX2's under "avx2", else the generic one. */
static int variant_for(const char *isa) {
  pthread_once(&g_once, install);
  int v = V_GENERIC;
  if (strcmp(isa, "avx512") == 0)
    v = V_VNNI512;
  else if (strcmp(isa, "avx2") == 0)
    v = V_AVX2;
  while (v > V_GENERIC && !g_installed[v])
    --v;
  return v;
}

const char *flex_runtime_quant_activations(void) {
  pthread_once(&g_once, install);
  return __atomic_load_n(&g_int8, __ATOMIC_RELAXED) ? "int8" : "f32";
}

const char *flex_runtime_quant_set_activations(const char *mode) {
  pthread_once(&g_once, install);
  if (!mode || !*mode || strcmp(mode, "f32") == 0)
    __atomic_store_n(&g_int8, 0, __ATOMIC_RELAXED);
  else if (strcmp(mode, "int8") == 0)
    __atomic_store_n(&g_int8, 1, __ATOMIC_RELAXED);
  else
    return NULL;
  return flex_runtime_quant_activations();
}

const char *flex_runtime_quant_i8act_kernel(void) {
  return kNames[variant_for(flex_runtime_quant_kernel())];
}

const char *flex_runtime_quant_i8act_variant_name(int i) {
  return i >= 0 && i < NUM_VARIANTS ? kNames[i] : NULL;
}

int64_t flex_runtime_quant_i8act_products(const char *variant) {
  int64_t total = 0;
  int known = !variant;
  for (int v = 0; v < NUM_VARIANTS; ++v)
    if (!variant || strcmp(variant, kNames[v]) == 0) {
      total += __atomic_load_n(&g_products[v], __ATOMIC_RELAXED);
      known = 1;
    }
  return known ? total : -1;
}

/* ------------------------------------------------------------------------
 * x quantized; the threads' loops.
 * ---------------------------------------------------------------------- */
static int32_t generic_quant(const float *x, int64_t G, int8_t *q, float *sx) {
  float amax = 0.0f;
  for (int64_t k = 0; k < G; ++k) {
    const float a = x[k] < 0 ? -x[k] : x[k];
    amax = a > amax ? a : amax;
  }
  const float s = amax / 127.0f;
  int32_t qsum = 0;
  if (s > 0.0f) {
    for (int64_t k = 0; k < G; ++k) {
      /* to nearest, ties to even: |x / s| <= 127 < 2^22 */
      const float r = (x[k] / s + 12582912.0f) - 12582912.0f;
      q[k] = (int8_t)r;
      qsum += (int32_t)r;
    }
  } else {
    memset(q, 0, (size_t)G);
  }
  *sx = s > 0.0f ? s : 0.0f;
  return qsum;
}

/* qx, sx, corr of every row and group (FlexQuantI4Dot.h); 0 where a group
   of x is not finite (its sum is not: NaN, an infinity, or an overflow),
   whose product the f32 kernels then run to keep NaN and infinities. */
static int quantize(const FlexQuantCall *c, FlexQuantI4DotQuant quant, int64_t groups,
                    int8_t *qx, float *sx, int32_t *corr) {
  const int64_t G = c->group, K = c->K;
  for (int64_t m = 0; m < c->M; ++m)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t i = m * groups + g;
      const float sum = c->xsum[i];
      if (!(sum - sum == 0.0f))
        return 0;
      corr[i] = -8 * quant(c->x + m * c->xm + g * G, G, qx + m * K + g * G, &sx[i]);
    }
  return 1;
}

typedef struct {
  FlexQuantI4Dot d;
  const FlexQuantI4DotKernels *k;
  const FlexQuantKernels *f32;
} DotJob;

/* Blocks [b0, b1) on the f32 kernels (a thread without its buffers). */
static void f32_share(const DotJob *j, int64_t b0, int64_t b1) {
  const FlexQuantCall *c = j->d.c;
  const int64_t whole = c->N / flex_quant_block_cols(c->layout);
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t m = 0; m < c->M; m += FLEX_QUANT_ROWS) {
      const int rows = c->M - m < FLEX_QUANT_ROWS ? (int)(c->M - m) : FLEX_QUANT_ROWS;
      if (b < whole)
        j->f32->i4[c->layout](c, m, rows, b);
      else
        flex_quant_i4_tail(c, m, rows);
    }
}

static void dot_share(const void *ctx, int64_t b0, int64_t b1) {
  const DotJob *j = (const DotJob *)ctx;
  const FlexQuantI4Dot *d = &j->d;
  const FlexQuantCall *c = d->c;
  const int64_t K = c->K, G = c->group, M = c->M, N = c->N, BN = flex_quant_block_cols(c->layout);
  const int64_t kc = G >= DOT_KC ? G : DOT_KC / G * G, mb = M < DOT_MB ? M : DOT_MB;
  const int64_t whole = N / BN;
  void *panel = NULL, *yt = NULL;
  float *sz = malloc((size_t)(kc / G) * 2 * DOT_MAX_W * sizeof(float));
  if (!sz || posix_memalign(&panel, 64, (size_t)kc * DOT_MAX_W) ||
      posix_memalign(&yt, 64, (size_t)mb * DOT_MAX_W * sizeof(float))) {
    free(sz), free(panel), free(yt);
    f32_share(j, b0, b1);
    return;
  }
  float *y = (float *)yt;
  const int R = j->k->rows;
  for (int64_t b = b0; b < b1; ++b) {
    const int W = (int)(b < whole ? BN : N - whole * BN), layout = b < whole ? (int)c->layout : 0;
    const uint8_t *src = c->w + b * BN * (K / 2); /* the short block follows the whole ones */
    const int64_t n0 = b * BN;
    for (int64_t m0 = 0; m0 < M; m0 += mb) {
      const int64_t rows = M - m0 < mb ? M - m0 : mb;
      memset(y, 0, (size_t)(rows * W) * sizeof(float));
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t k1 = K - k0 < kc ? K : k0 + kc, g0 = k0 / G, g1 = k1 / G;
        j->k->panel(src, layout, W, k0, k1, (uint8_t *)panel);
        for (int64_t g = g0; g < g1; ++g)
          for (int jj = 0; jj < W; ++jj) {
            const int64_t at = (g * N + n0 + jj) * 2;
            sz[(g - g0) * 2 * W + jj] = flex_quant_scale(c, at);
            sz[(g - g0) * 2 * W + W + jj] = flex_quant_scale(c, at + 1);
          }
        for (int64_t m = m0; m < m0 + rows; m += R)
          j->k->tile(d, (const uint8_t *)panel, sz, m, m0 + rows - m < R ? (int)(m0 + rows - m) : R,
                     g0, g1, W, y + (m - m0) * W);
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int jj = 0; jj < W; ++jj)
          flex_quant_store(c, m0 + r, n0 + jj, y[r * W + jj]);
    }
  }
  free(sz), free(panel), free(yt);
}

int flex_quant_i4_dot(const FlexQuantCall *c, const char *isa, const FlexQuantKernels *f32,
                      int threads) {
  pthread_once(&g_once, install);
  if (!__atomic_load_n(&g_int8, __ATOMIC_RELAXED) || c->M < FLEX_QUANT_I4_DOT_MIN_ROWS ||
      c->group % 4 != 0)
    return 0;
  const int v = variant_for(isa);
  const int64_t groups = c->K / c->group;
  int8_t *qx = malloc((size_t)(c->M * c->K));
  float *sx = malloc((size_t)(c->M * groups) * sizeof(float));
  int32_t *corr = malloc((size_t)(c->M * groups) * sizeof(int32_t));
  int ok = qx && sx && corr && quantize(c, g_kernels[v].quant, groups, qx, sx, corr);
  if (ok) {
    const DotJob job = {{c, qx, sx, corr, groups}, &g_kernels[v], f32};
    const int64_t bn = flex_quant_block_cols(c->layout);
    flex_threads_run(dot_share, &job, (c->N + bn - 1) / bn, 1, threads);
    __atomic_add_fetch(&g_products[v], 1, __ATOMIC_RELAXED);
  }
  free(qx), free(sx), free(corr);
  return ok;
}
