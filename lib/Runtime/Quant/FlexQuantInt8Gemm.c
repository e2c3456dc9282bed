/*===- FlexQuantInt8Gemm.c - uint8 x int8 -> int32 products: dispatcher --===*
 *
 * flex_gemm_u8s8 (FlexQuant.h): C [M,N] (+)= A [M,K] x B [K,N] with uint8
 * (or int8) A, int8 B and exact int32 sums, the integer product of
 * torchao's dynamic-activation int8 linears (aten._int_mm of the per-token
 * quantized activations + 128 and the transposed int8 weight), called by
 * flex-int-matmul-to-calls. Here: the argument checks, the operands made
 * readable as dot products over k (B read in place where k is contiguous
 * in it, as for B = t(w) of a weight w [N,K]; other layouts copied once
 * per call), the column sums of B for a signed A (read as A + 128, the
 * 128 * sum taken back off), the columns split between threads (libgomp's
 * workers where the process has them, pthreads otherwise, from
 * MIN_PARALLEL weight bytes: ../FlexThreads.c, shared with Gemv/ and the
 * weight-only products) and, in each thread, rows tiled by 4 inside
 * blocks of columns whose bytes stay in cache for all the rows.
 * The kernel variant follows the runtime's ISA in effect
 * (flex_runtime_isa of Gemv/FlexGemv.c): the best of this CPU at or below
 * it: avx512_vnni ("avx512"), avx_vnni then avx2 ("avx2"), generic C
 * (below; every CPU). flex_runtime_int8_gemm_set_kernel forces one (tests).
 *
 *===----------------------------------------------------------------------===*/
#include "FlexQuantInt8GemmKernels.h"

#include "../FlexThreads.h"
#include "../Gemv/FlexGemv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK_BYTES = 64 << 10 };
enum { FLAG_ACCUMULATE = 1, FLAG_A_SIGNED = 2 };

/* The generic kernel: plain C, every CPU. */
static void kernel_generic(const FlexI8GemmCall *c, int64_t m0, int rows,
                           int64_t n0, int64_t n1) {
  const uint8_t flip = c->bsum ? 0x80 : 0;
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t *b = c->b + n * c->bn;
    for (int r = 0; r < rows; ++r) {
      const uint8_t *a = c->a + (m0 + r) * c->am;
      uint32_t s = 0; /* wraps as the int32 sums of torch._int_mm would */
      for (int64_t k = 0; k < c->K; ++k)
        s += (uint32_t)((int32_t)(uint8_t)(a[k] ^ flip) * b[k]);
      flex_i8gemm_store(c, m0 + r, n, (int32_t)s);
    }
  }
}

/* ------------------------------------------------------------------------
 * The variants, lowest first, with the runtime ISA each belongs to.
 * ---------------------------------------------------------------------- */
typedef struct {
  const char *name, *isa;
  FlexI8GemmKernel (*lookup)(void);
} Variant;

static FlexI8GemmKernel lookup_generic(void) { return kernel_generic; }

static const Variant kVariants[] = {
    {"generic", "generic", lookup_generic},
#if FLEX_GEMV_X86
    {"avx2", "avx2", flex_i8gemm_avx2},
    {"avx_vnni", "avx2", flex_i8gemm_avx_vnni},
    {"avx512_vnni", "avx512", flex_i8gemm_avx512_vnni},
#endif
};
enum { NUM_VARIANTS = sizeof kVariants / sizeof kVariants[0] };

static FlexI8GemmKernel g_kernels[NUM_VARIANTS];
static int64_t g_products[NUM_VARIANTS];
static int g_forced = -1;
static int64_t g_rejected;
static const char *g_error;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void install(void) {
  for (int i = 0; i < NUM_VARIANTS; ++i)
    g_kernels[i] = kVariants[i].lookup();
}

static int variant_index(const char *name) {
  for (int i = 0; i < NUM_VARIANTS; ++i)
    if (name && strcmp(kVariants[i].name, name) == 0)
      return i;
  return -1;
}

/* The variant to run: the forced one, else the highest this CPU has whose
   ISA is at or below the runtime's ISA in effect. */
static int chosen(void) {
  pthread_once(&g_once, install);
  const int forced = __atomic_load_n(&g_forced, __ATOMIC_ACQUIRE);
  if (forced >= 0)
    return forced;
  const char *isa = flex_runtime_isa();
  int cap = NUM_VARIANTS - 1;
  while (cap > 0 && strcmp(kVariants[cap].isa, isa) != 0)
    --cap;
  while (cap > 0 && !g_kernels[cap])
    --cap;
  return cap;
}

const char *flex_runtime_int8_gemm_kernel(void) { return kVariants[chosen()].name; }

const char *flex_runtime_int8_gemm_variant_name(int i) {
  return i >= 0 && i < NUM_VARIANTS ? kVariants[i].name : NULL;
}

int flex_runtime_int8_gemm_available(const char *name) {
  pthread_once(&g_once, install);
  const int i = variant_index(name);
  return i >= 0 && g_kernels[i] != NULL;
}

const char *flex_runtime_int8_gemm_set_kernel(const char *name) {
  pthread_once(&g_once, install);
  if (!name || !*name) {
    __atomic_store_n(&g_forced, -1, __ATOMIC_RELEASE);
    return flex_runtime_int8_gemm_kernel();
  }
  const int i = variant_index(name);
  if (i < 0 || !g_kernels[i])
    return NULL;
  __atomic_store_n(&g_forced, i, __ATOMIC_RELEASE);
  return kVariants[i].name;
}

int64_t flex_runtime_int8_gemm_products(const char *variant) {
  if (!variant) {
    int64_t total = 0;
    for (int i = 0; i < NUM_VARIANTS; ++i)
      total += __atomic_load_n(&g_products[i], __ATOMIC_RELAXED);
    return total;
  }
  const int i = variant_index(variant);
  return i < 0 ? -1 : __atomic_load_n(&g_products[i], __ATOMIC_RELAXED);
}

int64_t flex_runtime_int8_gemm_rejected(void) {
  return __atomic_load_n(&g_rejected, __ATOMIC_RELAXED);
}

const char *flex_runtime_int8_gemm_error(void) {
  return __atomic_load_n(&g_error, __ATOMIC_ACQUIRE);
}

static void reject(const char *why) {
  __atomic_store_n(&g_error, why, __ATOMIC_RELEASE);
  __atomic_add_fetch(&g_rejected, 1, __ATOMIC_RELAXED);
  fprintf(stderr, "torch-mlir-flex runtime: flex_gemm_u8s8: %s; the call did nothing\n", why);
}

/* ------------------------------------------------------------------------
 * One thread's share of the columns (../FlexThreads.c splits them).
 * ---------------------------------------------------------------------- */
typedef struct {
  const FlexI8GemmCall *call;
  FlexI8GemmKernel kernel;
} Product;

static void run_share(const void *product, int64_t n0, int64_t n1) {
  const Product *p = (const Product *)product;
  const FlexI8GemmCall *c = p->call;
  int64_t step = BLOCK_BYTES / (c->K > 0 ? c->K : 1);
  step = step < 4 ? 4 : step & ~(int64_t)3;
  if (c->M <= FLEX_I8GEMM_ROWS)
    step = n1 - n0; /* one pass over the share's columns */
  for (int64_t n = n0; n < n1; n += step) {
    const int64_t end = n + step < n1 ? n + step : n1;
    for (int64_t m = 0; m < c->M; m += FLEX_I8GEMM_ROWS)
      p->kernel(c, m, c->M - m < FLEX_I8GEMM_ROWS ? (int)(c->M - m) : FLEX_I8GEMM_ROWS, n, end);
  }
}

/* ------------------------------------------------------------------------
 * The entry point.
 * ---------------------------------------------------------------------- */
static const char *check(int64_t M, int64_t N, int64_t K, int64_t a_ptr,
                         int64_t a_off, int64_t b_ptr, int64_t b_off,
                         int64_t c_ptr, int64_t c_off, int64_t flags) {
  if (M < 0 || N < 0 || K < 0)
    return "negative size";
  if (flags & ~(int64_t)(FLAG_ACCUMULATE | FLAG_A_SIGNED))
    return "unknown flag bits";
  if (a_off < 0 || b_off < 0 || c_off < 0)
    return "negative offset";
  if (M > 0 && N > 0 && !c_ptr)
    return "null C";
  if (M > 0 && N > 0 && K > 0 && (!a_ptr || !b_ptr))
    return "null A or B";
  return NULL;
}

void flex_gemm_u8s8(int64_t M, int64_t N, int64_t K, int64_t a_ptr, int64_t a_off,
                    int64_t a_rs, int64_t a_cs, int64_t b_ptr, int64_t b_off,
                    int64_t b_rs, int64_t b_cs, int64_t c_ptr, int64_t c_off,
                    int64_t c_rs, int64_t c_cs, int64_t flags) {
  const char *bad = check(M, N, K, a_ptr, a_off, b_ptr, b_off, c_ptr, c_off, flags);
  if (bad) {
    reject(bad);
    return;
  }
  if (M == 0 || N == 0)
    return;
  const int variant = chosen();
  const uint8_t *a = (const uint8_t *)(intptr_t)a_ptr + a_off;
  const int8_t *b = (const int8_t *)(intptr_t)b_ptr + b_off;
  uint8_t *a_copy = NULL;
  int8_t *b_copy = NULL;
  int32_t *bsum = NULL;
  int64_t am = a_rs, bn = b_cs;
  /* Rows of A and columns of B with k contiguous, else a packed copy. */
  if (K > 1 && a_cs != 1) {
    a_copy = malloc((size_t)(M * K));
    if (!a_copy)
      goto no_memory;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)
        a_copy[m * K + k] = a[m * a_rs + k * a_cs];
    a = a_copy, am = K;
  }
  if (K > 1 && b_rs != 1) {
    b_copy = malloc((size_t)(N * K));
    if (!b_copy)
      goto no_memory;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        b_copy[n * K + k] = b[k * b_rs + n * b_cs];
    b = b_copy, bn = K;
  }
  if (flags & FLAG_A_SIGNED) {
    bsum = malloc((size_t)N * sizeof(int32_t));
    if (!bsum)
      goto no_memory;
    for (int64_t n = 0; n < N; ++n) {
      uint32_t s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += (uint32_t)(int32_t)b[n * bn + k];
      bsum[n] = (int32_t)s;
    }
  }
  FlexI8GemmCall call = {M, N, K, a, am, b, bn,
                         (int32_t *)(intptr_t)c_ptr + c_off, c_rs, c_cs,
                         bsum, (flags & FLAG_ACCUMULATE) != 0};
  const Product product = {&call, g_kernels[variant]};
  /* Columns go to threads by 4. */
  flex_threads_run(run_share, &product, N, 4, flex_threads_for(N * K));
  __atomic_add_fetch(&g_products[variant], 1, __ATOMIC_RELAXED);
  free(a_copy);
  free(b_copy);
  free(bsum);
  return;
no_memory:
  free(a_copy);
  free(b_copy);
  free(bsum);
  reject("out of memory for a packed copy of A or B");
}
