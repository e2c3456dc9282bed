/*===- FlexQuantI4Dot.h - int4 products through int8 dot products --------===*
 *
 * The opt-in int8-activation path of flex_quant_matmul_i4 for products of
 * many rows (prefill; TORCH_MLIR_FLEX_QUANT_ACTIVATIONS=int8 or
 * flex_runtime_quant_set_activations("int8"), docs/quantization.md):
 *   - x quantized per row and per weight group (FlexQuantI4Dot.c):
 *     sx = max|x| / 127 over the group's k's, qx = x / sx rounded to
 *     nearest (ties to even), int8 in -127..127;
 *   - per group an exact int32 sum D = sum_k qx[m,k] * q[n,k] - 8 sum_k
 *     qx[m,k] (q the unsigned nibble 0..15; the correction -8 sum qx is
 *     where each sum starts), then
 *       y[m,n] = sum_g s[g,n] * sx[m,g] * D + z[g,n] * xsum[m,g]
 *     (xsum the exact f32 group sums of x, as on the f32 path);
 *   - the weights' nibbles re-arranged per call, per thread, a block of W
 *     columns and a chunk of k at a time, into a small panel: a byte per
 *     nibble, k in fours per 32-bit lane, [k/4][W][4] (the operand layout
 *     of VPDPBUSD / VPMADDUBSW); the weights themselves read where the
 *     model keeps them, never copied whole.
 * This header is the contract between the dispatcher (FlexQuantI4Dot.c,
 * with the generic kernel) and the x86-64 kernels (FlexQuantI4DotX86.c).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_QUANT_FLEXQUANTI4DOT_H
#define FLEX_RUNTIME_QUANT_FLEXQUANTI4DOT_H

#include "FlexQuantKernels.h"

/* The fewest rows of x that take the int8 path when it is on (fewer:
   the f32 kernels, decode). i4_dot_bench.py, the 0.5B shapes, one Zen 5
   core, int8 against f32 (AVX512-VNNI): 4 rows 0.8x the time, 8 rows
   1.2x faster, 12 1.45x, 16 1.65x, 128 2.3-2.6x. */
enum { FLEX_QUANT_I4_DOT_MIN_ROWS = 8 };

/* A product on the int8 path: the call and x quantized. */
typedef struct {
  const FlexQuantCall *c;
  const int8_t *qx;    /* qx[m,k] at m * K + k */
  const float *sx;     /* [M][groups] */
  const int32_t *corr; /* [M][groups]: -8 * sum of the group's qx */
  int64_t groups;
} FlexQuantI4Dot;

/* Rows [m, m + rows) of a tile of y (yt, rows W floats apart, added to) from
 * groups [g0, g1) of a block of W columns: the block's panel from k = g0 *
 * G (G * W bytes a group), its scales and zeros per group at sz[(g - g0) *
 * 2W + j] and sz[(g - g0) * 2W + W + j] (f32, column order). */
typedef void (*FlexQuantI4DotTile)(const FlexQuantI4Dot *d, const uint8_t *panel,
                                   const float *sz, int64_t m, int rows, int64_t g0,
                                   int64_t g1, int W, float *yt);

/* The panel of k in [k0, k1) (multiples of 4) of a block of W columns whose
 * row k is the W/2 bytes at src + k * W/2 in `layout` (0: byte i columns
 * 2i, 2i+1; 1: byte i columns i, 16 + i; 2: byte 16p + i columns 16p + i,
 * 32 + 16p + i; low nibble first). */
typedef void (*FlexQuantI4DotPanel)(const uint8_t *src, int layout, int W, int64_t k0,
                                    int64_t k1, uint8_t *out);

/* One group of x (G values, a multiple of 4, finite) quantized: q[k] =
 * x[k] / s rounded to nearest even, s = max|x| / 127 (f32 division; 0 and
 * q = 0 where x is all zeros); returns the sum of q (*s set). */
typedef int32_t (*FlexQuantI4DotQuant)(const float *x, int64_t G, int8_t *q, float *s);

typedef struct {
  const char *name; /* the variant, as the counters name it */
  FlexQuantI4DotTile tile;
  FlexQuantI4DotPanel panel;
  FlexQuantI4DotQuant quant;
  int rows; /* the most rows a tile call takes */
} FlexQuantI4DotKernels;

#if FLEX_GEMV_X86
/* Fill *k and return 1 where the CPU runs them (checked in baseline code). */
FLEX_RUNTIME_INTERNAL int flex_quant_i4_dot_install_avx2(FlexQuantI4DotKernels *k);
FLEX_RUNTIME_INTERNAL int flex_quant_i4_dot_install_vnni512(FlexQuantI4DotKernels *k);
#endif

/* Runs the product on the int8 path where it is on and applies (M, group,
 * finite x): returns 1 then, else 0 (the caller runs the f32 kernels).
 * `isa` the quant ISA in effect (its name), `f32` its kernels (a thread
 * that cannot allocate its panel runs its share on them). c->x f32 rows,
 * c->xsum the group sums. */
FLEX_RUNTIME_INTERNAL int flex_quant_i4_dot(const FlexQuantCall *c, const char *isa,
                                            const FlexQuantKernels *f32, int threads);

#endif
