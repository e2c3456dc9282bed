/*===- FlexQuant.c - products by quantized weights: the dispatcher --------===*
 *
 * flex_quant_matmul_i8 / flex_quant_matmul_i4 (FlexQuant.h), the calls of
 * flex.quant_matmul after bufferization (issue #41): x [M,K] f32 or bf16
 * times int8 weights with per-channel scales, or 4-bit weights in torch's
 * CPU packing with group scales and zeros, into y [M,N] f32 or bf16. The
 * quantized bytes are read where the model keeps them, never copied to
 * floats. Here: the argument checks, x widened to f32 once per call (bf16
 * x) and its group sums (int4), the output columns split between threads
 * (libgomp's workers, torch's, where the process has libgomp; pthreads
 * otherwise; from MIN_PARALLEL weight elements: ../FlexThreads.c, shared
 * with Gemv/) and, in each thread, the
 * rows of x tiled by 4 inside blocks of weight columns, so that a weight
 * block is read from memory once per call for any M.
 * The kernels are those of the runtime's ISA in effect (flex_runtime_isa
 * of Gemv/FlexGemv.c: the CPU's highest, or the cap of
 * TORCH_MLIR_FLEX_RUNTIME_ISA / flex_runtime_set_isa), one file per ISA
 * family beside this one (FlexQuantKernels.h). Int4 products of many rows
 * take the opt-in int8-activation path where it is on (FlexQuantI4Dot.h).
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantI4Dot.h"
#include "FlexQuantKernels.h"

#include "../FlexThreads.h"
#include "../Gemv/FlexGemv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { I8_BLOCK_BYTES = 64 << 10 };

/* ------------------------------------------------------------------------
 * The kernels per ISA, lowest first, named as Gemv/'s ISAs.
 * ---------------------------------------------------------------------- */
typedef struct {
  const char *name;
  int (*install)(FlexQuantKernels *);
} QuantIsa;

static const QuantIsa kIsas[] = {
    {"generic", flex_quant_install_generic},
#if FLEX_GEMV_X86
    {"avx2", flex_quant_install_avx2},
    {"avx512", flex_quant_install_avx512},
#endif
};
enum { NUM_ISAS = sizeof kIsas / sizeof kIsas[0] };

static FlexQuantKernels g_kernels[NUM_ISAS];
static int g_installed[NUM_ISAS];
static int64_t g_products[NUM_ISAS][2];
static int64_t g_rejected;
static const char *g_error;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void install(void) {
  for (int i = 0; i < NUM_ISAS; ++i)
    g_installed[i] = kIsas[i].install(&g_kernels[i]);
}

/* kIsas index of the kernels to run: the ISA in effect, or the highest
   installed below it. */
static int chosen(void) {
  pthread_once(&g_once, install);
  const char *isa = flex_runtime_isa();
  int i = NUM_ISAS - 1;
  while (i > 0 && (strcmp(kIsas[i].name, isa) != 0))
    --i;
  while (i > 0 && !g_installed[i])
    --i;
  return i;
}

const char *flex_runtime_quant_kernel(void) { return kIsas[chosen()].name; }

int64_t flex_runtime_quant_products_on(const char *isa, int format) {
  if (!isa || (format != FLEX_QUANT_INT8 && format != FLEX_QUANT_INT4))
    return -1;
  for (int i = 0; i < NUM_ISAS; ++i)
    if (strcmp(kIsas[i].name, isa) == 0)
      return __atomic_load_n(&g_products[i][format], __ATOMIC_RELAXED);
  return -1;
}

int64_t flex_runtime_quant_products(void) {
  int64_t total = 0;
  for (int i = 0; i < NUM_ISAS; ++i)
    for (int f = 0; f < 2; ++f)
      total += __atomic_load_n(&g_products[i][f], __ATOMIC_RELAXED);
  return total;
}

int64_t flex_runtime_quant_rejected(void) {
  return __atomic_load_n(&g_rejected, __ATOMIC_RELAXED);
}

const char *flex_runtime_quant_error(void) {
  return __atomic_load_n(&g_error, __ATOMIC_ACQUIRE);
}

/* Refuses a call: y is left as it was, the message kept and printed. */
static void reject(const char *fn, const char *why) {
  __atomic_store_n(&g_error, why, __ATOMIC_RELEASE);
  __atomic_add_fetch(&g_rejected, 1, __ATOMIC_RELAXED);
  fprintf(stderr, "torch-mlir-flex runtime: %s: %s; the call did nothing\n", fn, why);
}

/* ------------------------------------------------------------------------
 * One thread's share (../FlexThreads.c splits the units between threads).
 * ---------------------------------------------------------------------- */
typedef struct {
  const FlexQuantCall *call;
  const FlexQuantKernels *kernels;
  int format;
} Product;

/* Units [n0, n1) of the product: columns (int8) or packed blocks (int4). */
static void run_share(const void *product, int64_t n0, int64_t n1) {
  const Product *p = (const Product *)product;
  const FlexQuantCall *c = p->call;
  const int64_t M = c->M;
  if (p->format == FLEX_QUANT_INT8) {
    int64_t step = I8_BLOCK_BYTES / (c->K > 0 ? c->K : 1);
    step = step < 4 ? 4 : step & ~(int64_t)3;
    if (M <= FLEX_QUANT_ROWS)
      step = n1 - n0; /* one pass over the share's weight rows */
    for (int64_t n = n0; n < n1; n += step) {
      const int64_t end = n + step < n1 ? n + step : n1;
      for (int64_t m = 0; m < M; m += FLEX_QUANT_ROWS)
        p->kernels->i8(c, m, M - m < FLEX_QUANT_ROWS ? (int)(M - m) : FLEX_QUANT_ROWS, n, end);
    }
  } else {
    const FlexQuantI4 kernel = p->kernels->i4[c->layout];
    const int64_t whole = c->N / flex_quant_block_cols(c->layout); /* then the short one */
    for (int64_t b = n0; b < n1; ++b)
      for (int64_t m = 0; m < M; m += FLEX_QUANT_ROWS) {
        const int rows = M - m < FLEX_QUANT_ROWS ? (int)(M - m) : FLEX_QUANT_ROWS;
        if (b < whole)
          kernel(c, m, rows, b);
        else
          flex_quant_i4_tail(c, m, rows);
      }
  }
}

/* ------------------------------------------------------------------------
 * The entry points.
 * ---------------------------------------------------------------------- */

/* x as f32 rows: x itself, or a malloc'ed widened copy in *copy. */
static const float *f32_rows(const void *x, int64_t M, int64_t K, int64_t rs,
                             int bf16, float **copy, int64_t *xm) {
  *copy = NULL;
  *xm = rs;
  if (!bf16)
    return (const float *)x;
  float *wide = malloc((size_t)(M * K > 0 ? M * K : 1) * sizeof(float));
  if (!wide)
    return NULL;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      wide[m * K + k] = flex_bf16_to_f32(((const uint16_t *)x)[m * rs + k]);
  *copy = wide;
  *xm = K;
  return wide;
}

/* The arguments of a call as passed: pointers as addresses, offsets and
   row strides in elements (FlexQuant.h); w_rs of int8 only, group and
   layout of int4 only (0 in the other). */
typedef struct {
  int64_t M, N, K, x_ptr, x_off, x_rs, w_ptr, w_off, w_rs, s_ptr, s_off, y_ptr, y_off, y_rs;
  int64_t group, layout, flags;
} Args;

/* Checks shared by both formats; NULL when the call is well-formed. */
static const char *check_common(const Args *a) {
  const int64_t M = a->M, N = a->N, K = a->K;
  if (M < 0 || N < 0 || K < 0)
    return "negative size";
  if (a->flags & ~(int64_t)(FLEX_QUANT_X_BF16 | FLEX_QUANT_Y_BF16 | FLEX_QUANT_S_BF16))
    return "unknown flag bits";
  if (a->x_off < 0 || a->w_off < 0 || a->s_off < 0 || a->y_off < 0)
    return "negative offset";
  if ((M > 1 && a->x_rs < K) || (M > 1 && a->y_rs < N))
    return "row stride of x or y smaller than its row";
  if (M > 0 && N > 0 && !a->y_ptr)
    return "null y";
  if (M > 0 && N > 0 && K > 0 && (!a->x_ptr || !a->w_ptr || !a->s_ptr))
    return "null x, weight or scales";
  return NULL;
}

/* y = 0 where K is 0 (an empty sum). */
static void zero_y(int64_t M, int64_t N, void *y, int64_t y_rs, int bf16) {
  for (int64_t m = 0; m < M; ++m)
    memset((char *)y + (m * y_rs) * (bf16 ? 2 : 4), 0, (size_t)N * (bf16 ? 2 : 4));
}

/* x[0] + ... + x[n-1] in 8 partial sums (one chain of n dependent adds
   was 4-5 us of a decode step's 896x4864 product, before its threads). */
static float group_sum(const float *x, int64_t n) {
  float part[8] = {0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j)
      part[j] += x[k + j];
  for (; k < n; ++k)
    part[0] += x[k];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

static void run(const char *fn, FlexQuantCall *c, int format, int x_bf16) {
  const int isa = chosen();
  float *copy = NULL, *xsum = NULL;
  c->x = f32_rows(c->x, c->M, c->K, c->xm, x_bf16, &copy, &c->xm);
  if (!c->x) {
    reject(fn, "out of memory widening x");
    return;
  }
  const Product product = {c, &g_kernels[isa], format};
  const int threads = flex_threads_for(c->N * c->K);
  if (format == FLEX_QUANT_INT8) {
    flex_threads_run(run_share, &product, c->N, 4, threads);
  } else {
    const int64_t groups = c->K / c->group;
    xsum = malloc((size_t)(c->M * groups) * sizeof(float));
    if (!xsum) {
      free(copy);
      reject(fn, "out of memory for the group sums of x");
      return;
    }
    for (int64_t m = 0; m < c->M; ++m)
      for (int64_t g = 0; g < groups; ++g)
        xsum[m * groups + g] = group_sum(c->x + m * c->xm + g * c->group, c->group);
    c->xsum = xsum;
    const int64_t bn = flex_quant_block_cols(c->layout);
    /* many rows, where the switch is on: int8 x (FlexQuantI4Dot.c) */
    if (!flex_quant_i4_dot(c, kIsas[isa].name, &g_kernels[isa], threads))
      flex_threads_run(run_share, &product, (c->N + bn - 1) / bn, 1, threads);
  }
  free(copy);
  free(xsum);
  __atomic_add_fetch(&g_products[isa][format], 1, __ATOMIC_RELAXED);
}

/* Refuses the call where `bad` (the first check it failed), else runs it
   in `format`. */
static void checked_run(const char *fn, int format, const Args *a, const char *bad) {
  if (bad) {
    reject(fn, bad);
    return;
  }
  const int xb = (a->flags & FLEX_QUANT_X_BF16) != 0, yb = (a->flags & FLEX_QUANT_Y_BF16) != 0;
  const int sb = (a->flags & FLEX_QUANT_S_BF16) != 0;
  void *y = (char *)(intptr_t)a->y_ptr + a->y_off * (yb ? 2 : 4);
  if (a->M == 0 || a->N == 0)
    return;
  if (a->K == 0) {
    zero_y(a->M, a->N, y, a->y_rs, yb);
    return;
  }
  FlexQuantCall c = {a->M, a->N, a->K,
                     (const float *)((const char *)(intptr_t)a->x_ptr + a->x_off * (xb ? 2 : 4)),
                     a->x_rs, NULL, (const uint8_t *)(intptr_t)a->w_ptr + a->w_off, a->w_rs,
                     (const char *)(intptr_t)a->s_ptr + a->s_off * (sb ? 2 : 4), y, a->y_rs,
                     a->group, a->layout, sb, yb};
  run(fn, &c, format, xb);
}

void flex_quant_matmul_i8(int64_t M, int64_t N, int64_t K, int64_t x_ptr,
                          int64_t x_off, int64_t x_rs, int64_t w_ptr,
                          int64_t w_off, int64_t w_rs, int64_t s_ptr,
                          int64_t s_off, int64_t y_ptr, int64_t y_off,
                          int64_t y_rs, int64_t flags) {
  const Args a = {M,     N,     K,     x_ptr, x_off, x_rs, w_ptr, w_off, w_rs,
                  s_ptr, s_off, y_ptr, y_off, y_rs,  0,    0,     flags};
  const char *bad = check_common(&a);
  if (!bad && N > 1 && w_rs < K)
    bad = "row stride of the weight smaller than its row";
  checked_run("flex_quant_matmul_i8", FLEX_QUANT_INT8, &a, bad);
}

void flex_quant_matmul_i4(int64_t M, int64_t N, int64_t K, int64_t x_ptr,
                          int64_t x_off, int64_t x_rs, int64_t w_ptr,
                          int64_t w_off, int64_t sz_ptr, int64_t sz_off,
                          int64_t y_ptr, int64_t y_off, int64_t y_rs,
                          int64_t group_size, int64_t layout, int64_t flags) {
  const Args a = {M,      N,      K,     x_ptr, x_off, x_rs,       w_ptr,  w_off, 0,
                  sz_ptr, sz_off, y_ptr, y_off, y_rs,  group_size, layout, flags};
  const char *bad = check_common(&a);
  if (!bad && (layout < 0 || layout > 2))
    bad = "layout not 0, 1 or 2";
  else if (!bad && (group_size <= 0 || K % group_size != 0))
    bad = "group size not a positive divisor of K";
  else if (!bad && N % 16 != 0)
    bad = "N not a multiple of 16 (torch's int4 packing needs one)";
  checked_run("flex_quant_matmul_i4", FLEX_QUANT_INT4, &a, bad);
}
