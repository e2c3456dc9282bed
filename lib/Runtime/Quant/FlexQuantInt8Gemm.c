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
 * MIN_PARALLEL weight bytes) and, in each thread, rows tiled by 4 inside
 * blocks of columns whose bytes stay in cache for all the rows.
 * The kernel variant follows the runtime's ISA in effect
 * (flex_runtime_isa of Gemv/FlexGemv.c): the best of this CPU at or below
 * it: avx512_vnni ("avx512"), avx_vnni then avx2 ("avx2"), generic C
 * (below; every CPU). flex_runtime_int8_gemm_set_kernel forces one (tests).
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* cpu_set_t */
#include "FlexQuantInt8GemmKernels.h"

#include "../Gemv/FlexGemv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_PARALLEL = 1 << 16, MAX_THREADS = 16, BLOCK_BYTES = 64 << 10 };
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
 * Threads over the columns.
 * ---------------------------------------------------------------------- */
typedef struct {
  const FlexI8GemmCall *call;
  FlexI8GemmKernel kernel;
  int64_t n0, n1;
} Slice;

static void run_slice(const Slice *s) {
  const FlexI8GemmCall *c = s->call;
  int64_t step = BLOCK_BYTES / (c->K > 0 ? c->K : 1);
  step = step < 4 ? 4 : step & ~(int64_t)3;
  if (c->M <= FLEX_I8GEMM_ROWS)
    step = s->n1 - s->n0; /* one pass over the slice's columns */
  for (int64_t n = s->n0; n < s->n1; n += step) {
    const int64_t end = n + step < s->n1 ? n + step : s->n1;
    for (int64_t m = 0; m < c->M; m += FLEX_I8GEMM_ROWS)
      s->kernel(c, m, c->M - m < FLEX_I8GEMM_ROWS ? (int)(c->M - m) : FLEX_I8GEMM_ROWS, n, end);
  }
}

static void *run_pthread(void *arg) {
  run_slice((const Slice *)arg);
  return NULL;
}

typedef struct {
  void (*parallel)(void (*)(void *), void *, unsigned, unsigned);
  int (*thread_num)(void), (*num_threads)(void), (*max_threads)(void);
} Gomp;

/* libgomp's entry points where the process has them (torch's workers). */
static const Gomp *gomp(void) {
  static Gomp g;
  static int state; /* 0: not looked up, 1: found, 2: missing */
  if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 0) {
    Gomp f;
    *(void **)&f.parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    *(void **)&f.thread_num = dlsym(RTLD_DEFAULT, "omp_get_thread_num");
    *(void **)&f.num_threads = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
    *(void **)&f.max_threads = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    const int found = f.parallel && f.thread_num && f.num_threads && f.max_threads;
    if (found)
      g = f;
    __atomic_store_n(&state, found ? 1 : 2, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 1 ? &g : NULL;
}

typedef struct {
  Slice *slices;
  int count;
} Team;

static void run_team_member(void *arg) {
  const Team *team = (const Team *)arg;
  const Gomp *g = gomp();
  for (int t = g->thread_num(); t < team->count; t += g->num_threads())
    run_slice(&team->slices[t]);
}

static void split_and_run(const FlexI8GemmCall *c, FlexI8GemmKernel kernel) {
  const Gomp *g = gomp();
  int threads = 1;
  if (c->N * c->K >= MIN_PARALLEL) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      threads = CPU_COUNT(&set);
    if (g && g->max_threads() < threads)
      threads = g->max_threads();
    threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
  }
  const int64_t groups = (c->N + 3) / 4; /* columns go to threads by 4 */
  if (threads > groups)
    threads = (int)groups;
  Slice slices[MAX_THREADS];
  const int64_t per = groups / threads, extra = groups % threads;
  int64_t n = 0;
  for (int t = 0; t < threads; ++t) {
    const int64_t end = n + (per + (t < extra)) * 4;
    slices[t] = (Slice){c, kernel, n, end < c->N ? end : c->N};
    n = slices[t].n1;
  }
  if (threads == 1) {
    run_slice(&slices[0]);
  } else if (g) {
    Team team = {slices, threads};
    g->parallel(run_team_member, &team, (unsigned)threads, 0);
  } else {
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < threads; ++t)
      started[t] = pthread_create(&ids[t], NULL, run_pthread, &slices[t]) == 0;
    run_slice(&slices[0]);
    for (int t = 1; t < threads; ++t) {
      if (started[t])
        pthread_join(ids[t], NULL);
      else
        run_slice(&slices[t]);
    }
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
  split_and_run(&call, g_kernels[variant]);
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
