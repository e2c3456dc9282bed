/*===- FlexQuantKernels.h - what the per-ISA quantized kernels share ------===*
 *
 * The contract between the dispatcher (FlexQuant.c: checks, threads, the
 * choice of kernels) and the kernel files, one per ISA family as in Gemv/
 * (FlexQuantGeneric.c, FlexQuantAvx2.c, FlexQuantAvx512.c):
 *   - x arrives as f32 rows (bf16 x widened once per call by the
 *     dispatcher) and, for int4, with its sums per group
 *     (xsum[m][k/g] = sum of x[m,k] over the group);
 *   - an int8 kernel computes y[m0 .. m0+rows) x [n0, n1), rows <= 4;
 *   - an int4 kernel computes y[m0 .. m0+rows) x one block of BN columns
 *     (the packing's column blocks; a short last block, flex_quant_i4_tail,
 *     is the generic file's for every ISA), rows <= 4, from the group sums:
 *       y[m,n] = sum_g s[g,n] * sum_{k in g} x[m,k] * q[n,k]
 *                    + (z[g,n] - 8 s[g,n]) * xsum[m][g];
 *   - each file exports flex_quant_install_<isa>, which fills the kernels
 *     if this CPU runs them (checked in baseline code) and returns 1 then.
 * The dispatcher tiles larger M into blocks of 4 rows, with the weight
 * columns outermost, so a weight block comes from memory once per call.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_QUANT_FLEXQUANTKERNELS_H
#define FLEX_RUNTIME_QUANT_FLEXQUANTKERNELS_H

#include "../FlexBf16.h"
#include "../FlexInternal.h"
#include "FlexQuant.h"

#include <stdint.h>

enum { FLEX_QUANT_ROWS = 4 }; /* rows of x a kernel call takes at most */

typedef struct {
  int64_t M, N, K;
  const float *x; /* x[m,k] at m * xm + k */
  int64_t xm;
  const float *xsum; /* int4: [M][K / group] */
  const uint8_t *w;  /* int8: w[n,k] at n * wm + k; int4: the packed bytes */
  int64_t wm;
  const void *s; /* int8: scales [N]; int4: sz [K/group][N][2] */
  void *y;       /* y[m,n] at m * ym + n */
  int64_t ym;
  int64_t group, layout;
  int s_bf16, y_bf16;
} FlexQuantCall;

typedef void (*FlexQuantI8)(const FlexQuantCall *c, int64_t m0, int rows,
                            int64_t n0, int64_t n1);
typedef void (*FlexQuantI4)(const FlexQuantCall *c, int64_t m0, int rows,
                            int64_t block);

typedef struct {
  FlexQuantI8 i8;
  FlexQuantI4 i4[3]; /* by layout */
} FlexQuantKernels;

/* The kernel files' install functions (the contract above). */
FLEX_RUNTIME_INTERNAL int flex_quant_install_generic(FlexQuantKernels *k);
#if FLEX_GEMV_X86
FLEX_RUNTIME_INTERNAL int flex_quant_install_avx2(FlexQuantKernels *k);
FLEX_RUNTIME_INTERNAL int flex_quant_install_avx512(FlexQuantKernels *k);
#endif

/* Columns of one packed block of `layout`. */
static inline int64_t flex_quant_block_cols(int64_t layout) {
  return layout == 2 ? 64 : 32;
}

/* The first column after the whole blocks of an int4 weight. N is a
 * multiple of 16 (torch's packing refuses others); where it is not one of
 * the block, torch packs the last N mod BN columns (16, 32 or 48) as one
 * short block after the whole ones, N mod BN / 2 bytes a k, k-major, byte
 * i holding its columns 2i (low nibble) and 2i + 1 (high) whatever the
 * layout (as layout 0). */
static inline int64_t flex_quant_tail_start(const FlexQuantCall *c) {
  return c->N - c->N % flex_quant_block_cols(c->layout);
}

/* y[m0 .. m0+rows) x the short last block's columns (FlexQuantGeneric.c;
   every ISA's dispatch runs it for the last unit). */
FLEX_RUNTIME_INTERNAL void flex_quant_i4_tail(const FlexQuantCall *c, int64_t m0, int rows);

/* Element i of the scales (int8: [N]) or of sz, f32 or bf16. */
static inline float flex_quant_scale(const FlexQuantCall *c, int64_t i) {
  return c->s_bf16 ? flex_bf16_to_f32(((const uint16_t *)c->s)[i])
                   : ((const float *)c->s)[i];
}

/* y[m,n] = v: f32, or bf16 rounded once. */
static inline void flex_quant_store(const FlexQuantCall *c, int64_t m,
                                    int64_t n, float v) {
  if (c->y_bf16)
    ((uint16_t *)c->y)[m * c->ym + n] = flex_f32_to_bf16(v);
  else
    ((float *)c->y)[m * c->ym + n] = v;
}

/* The rows an int8 tile reads: W weight rows from n (wr[j]) and R rows
   of x from m0 (x[m]). */
__attribute__((always_inline)) static inline void
flex_quant_i8_tile_rows(const FlexQuantCall *c, int64_t m0, int R, int64_t n, int W,
                        const int8_t **wr, const float **x) {
  for (int j = 0; j < W; ++j)
    wr[j] = (const int8_t *)c->w + (n + j) * c->wm;
  for (int m = 0; m < R; ++m)
    x[m] = c->x + (m0 + m) * c->xm;
}

/* Prefetches, once per 64 bytes of k, the bytes of the next tile's weight
 * row j (W rows further on, where the hardware prefetcher has not yet
 * begun: a row is only K bytes, too short a stream for it to learn). A
 * prefetch never faults, so past the last row is harmless. On the Zen 5
 * host (quant_bench.py, 2 threads, weights not in cache) the AVX-512 int8
 * rows read 33 -> 67 GB/s with it. */
static inline __attribute__((always_inline)) void
flex_quant_prefetch_next(const int8_t *row, int64_t k, int W, int64_t wm) {
  if ((k & 63) == 0)
    __builtin_prefetch(row + k + W * wm, 0, 3);
}

/* The prefetches of a few-row int4 kernel at the start of group g of the
 * block whose bytes start at `base` (n_base its first column, BN its
 * columns): the weight bytes FLEX_QUANT_I4_AHEAD bytes on (a thread's
 * blocks are one sequential stream, but the hardware prefetcher alone ran
 * ahead too little), and this group's scales and zeros of the thread's next
 * block (groups are a row of sz apart: as many short streams as groups,
 * more than the hardware follows; the next group's of the same block,
 * prefetched before, came too late and made products slower). One Zen 5
 * core, weights from memory (decode shapes of Qwen2-0.5B): 29-32 -> 33-39
 * GB/s of weights + scales, the 151936 x 896 LM head 23 -> 29. A prefetch
 * never faults: past the weight's end is harmless. */
enum { FLEX_QUANT_I4_AHEAD = 8192 };
static inline __attribute__((always_inline)) void
flex_quant_i4_prefetch(const FlexQuantCall *c, const uint8_t *base, int64_t g, int64_t n_base,
                       const int BN) {
  const int64_t G = c->group, es = c->s_bf16 ? 2 : 4;
  const char *sz = (const char *)c->s + ((g * c->N + n_base + BN) * 2) * es;
  for (int64_t l = 0; l < BN * 2 * es; l += 64)
    __builtin_prefetch(sz + l, 0, 3);
  const uint8_t *w = base + g * G * (BN / 2) + FLEX_QUANT_I4_AHEAD;
  for (int64_t l = 0; l < G * (BN / 2); l += 64)
    __builtin_prefetch(w + l, 0, 3);
}

/* The entry points of a kernel file, from its two templates (always
 * inlined; R, the rows of x, and the layout constants here, so that each
 * row count and layout gets its own compiled copy):
 *   i8_run(c, m0, R, n0, n1)           int8: columns [n0, n1);
 *   i4_block(c, m0, R, block, layout)  int4: one packed block.
 * ATTR is the file's target attribute (empty in baseline code). Defines
 * the FlexQuantI8 i8_rows, the FlexQuantI4 i4_layout0..2 and
 * fill_kernels(k), which puts them in *k and returns 1. */
/* template(c, m0, R, a, b) with R = rows, 1 to 4, a constant. */
#define FLEX_QUANT_BY_ROWS_(template, a, b)                                    \
  switch (rows) {                                                              \
  case 1: template(c, m0, 1, a, b); break;                                     \
  case 2: template(c, m0, 2, a, b); break;                                     \
  case 3: template(c, m0, 3, a, b); break;                                     \
  default: template(c, m0, 4, a, b); break;                                    \
  }
#define FLEX_QUANT_I4_LAYOUT_(ATTR, L)                                         \
  ATTR static void i4_layout##L(const FlexQuantCall *c, int64_t m0, int rows,  \
                                int64_t b) {                                   \
    FLEX_QUANT_BY_ROWS_(i4_block, b, L)                                        \
  }
#define FLEX_QUANT_ENTRY_POINTS(ATTR)                                          \
  ATTR static void i8_rows(const FlexQuantCall *c, int64_t m0, int rows,       \
                           int64_t n0, int64_t n1) {                           \
    FLEX_QUANT_BY_ROWS_(i8_run, n0, n1)                                        \
  }                                                                            \
  FLEX_QUANT_I4_LAYOUT_(ATTR, 0)                                               \
  FLEX_QUANT_I4_LAYOUT_(ATTR, 1)                                               \
  FLEX_QUANT_I4_LAYOUT_(ATTR, 2)                                               \
  static int fill_kernels(FlexQuantKernels *k) {                               \
    k->i8 = i8_rows;                                                           \
    k->i4[0] = i4_layout0;                                                     \
    k->i4[1] = i4_layout1;                                                     \
    k->i4[2] = i4_layout2;                                                     \
    return 1;                                                                  \
  }

#endif
