/*===- FlexGemv.c - products of a few rows on every CPU: the dispatcher ---===*
 *
 * flex_gemv_f32 / flex_gemv_bf16: y[m][n] (+)= sum_k x[m][k] * W[n][k] for
 * m < M <= FLEX_GEMV_MAX_ROWS, n < N, where the rows of W are contiguous (a
 * linear layer's weight: the product of a few tokens, one per sequence of a
 * decode batch). Such a product reads the whole weight once and does M
 * FMAs per element, so it is bound by memory bandwidth; the BLAS inside
 * torch runs it on one thread (on a 2-core AMD Zen 4: 14.8 GB/s for the
 * 151936 x 896 lm_head of a Qwen2-0.5B decode step, where two threads read
 * 31 GB/s), and oneDNN ran the bf16 one at 17 GB/s. Here the output
 * features are split between threads (libgomp's workers, torch's; pthreads
 * started per call where the process has no libgomp; only products of at
 * least MIN_PARALLEL weight elements are split: ../FlexThreads.c, shared
 * with Quant/), each running the kernel
 * of the CPU's ISA (one file per ISA family beside this one, as ggml-cpu
 * keeps them; FlexGemvKernels.h):
 *   - FlexGemvAvx512.c: f32 with AVX512F; bf16 weights with AVX512-BF16
 *     (VDPBF16PS on bf16 pairs);
 *   - FlexGemvAvx2.c: f32 with AVX2 + FMA; bf16 weights widened to f32 in
 *     registers (on AVX-512 CPUs without AVX512-BF16 too);
 *   - FlexGemvGeneric.c: portable C for every other CPU.
 * The kernels are chosen once per process from the CPU's features
 * (__builtin_cpu_supports, in each ISA file's install function), the
 * highest ISA first; TORCH_MLIR_FLEX_RUNTIME_ISA (read once) or
 * flex_runtime_set_isa caps them at a lower ISA (for tests and
 * comparisons). Each weight row is loaded once for the M rows of x; the
 * BLAS packs the weight for M > 1 first (a second pass over it): a 4-row
 * product of a tiny model's 256 x 128 weight spent most of its time
 * packing. Reading the weight as one sequential stream matters for a
 * model's short rows (896 elements): bf16 25 GB/s against 20 four rows at a
 * time; f32, over a Qwen2-0.5B's weights, 41.5 GB/s against 28.5 (AVX-512).
 * FLEX_GEMV=0 (read once) leaves every product to the BLAS.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexGemvKernels.h"

#include "../FlexThreads.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * The ISAs, lowest first: each overrides the kernels of those before it
 * that it has for this CPU. Adding an ISA: a file and a line here.
 * ---------------------------------------------------------------------- */
typedef struct {
  const char *name;
  int (*install)(FlexGemvKernels *);
} Isa;

static const Isa kIsas[] = {
    {"generic", flex_gemv_install_generic},
#if FLEX_GEMV_X86
    {"avx2", flex_gemv_install_avx2},
    {"avx512", flex_gemv_install_avx512},
#endif
};
enum { NUM_ISAS = sizeof kIsas / sizeof kIsas[0], F32 = 0, BF16 = 1 };

/* The kernels of the ISAs up to one of them (its cap). */
typedef struct {
  FlexGemvKernels kernels;
  int isa_of[2]; /* kIsas index of the F32 / BF16 kernels */
  int top;       /* the highest ISA of this CPU up to the cap */
} Choice;

static Choice g_choices[NUM_ISAS]; /* [c]: capped at kIsas[c] */
static int g_available[NUM_ISAS];  /* the CPU runs kernels of kIsas[i] */
static int g_cap = NUM_ISAS - 1;   /* the g_choices in use */
static int64_t g_products[NUM_ISAS][2]; /* run, by ISA and weight dtype */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int isa_index(const char *name) {
  for (int i = 0; i < NUM_ISAS; ++i)
    if (strcmp(kIsas[i].name, name) == 0)
      return i;
  return -1;
}

static void choose_kernels(void) {
  FlexGemvKernels so_far;
  memset(&so_far, 0, sizeof so_far);
  int isa_of[2] = {-1, -1}, top = 0;
  for (int i = 0; i < NUM_ISAS; ++i) {
    FlexGemvKernels k;
    memset(&k, 0, sizeof k);
    g_available[i] = kIsas[i].install(&k);
    if (g_available[i])
      top = i;
    if (k.f32.rows[0])
      so_far.f32 = k.f32, isa_of[F32] = i;
    if (k.bf16.rows[0])
      so_far.bf16 = k.bf16, isa_of[BF16] = i;
    g_choices[i].kernels = so_far;
    g_choices[i].isa_of[F32] = isa_of[F32];
    g_choices[i].isa_of[BF16] = isa_of[BF16];
    g_choices[i].top = top;
  }
  const char *env = getenv("TORCH_MLIR_FLEX_RUNTIME_ISA");
  int cap = env && *env ? isa_index(env) : -1;
  __atomic_store_n(&g_cap, cap >= 0 ? cap : NUM_ISAS - 1, __ATOMIC_RELEASE);
}

static const Choice *choice(void) {
  pthread_once(&g_once, choose_kernels);
  return &g_choices[__atomic_load_n(&g_cap, __ATOMIC_ACQUIRE)];
}

const char *flex_runtime_set_isa(const char *name) {
  pthread_once(&g_once, choose_kernels);
  int cap = name && *name ? isa_index(name) : NUM_ISAS - 1;
  if (cap < 0)
    return NULL;
  __atomic_store_n(&g_cap, cap, __ATOMIC_RELEASE);
  return kIsas[g_choices[cap].top].name;
}

const char *flex_runtime_isa(void) { return kIsas[choice()->top].name; }

const char *flex_runtime_isa_name(int i) {
  return i >= 0 && i < NUM_ISAS ? kIsas[i].name : NULL;
}

int flex_runtime_isa_available(const char *name) {
  pthread_once(&g_once, choose_kernels);
  int i = name ? isa_index(name) : -1;
  return i >= 0 && g_available[i];
}

const char *flex_runtime_gemv_kernel(int bf16) {
  int i = choice()->isa_of[bf16 ? BF16 : F32];
  return i >= 0 ? kIsas[i].name : NULL;
}

int64_t flex_runtime_gemv_products_on(const char *isa, int bf16) {
  int i = isa ? isa_index(isa) : -1;
  return i < 0 ? -1 : __atomic_load_n(&g_products[i][bf16 ? BF16 : F32], __ATOMIC_RELAXED);
}

int64_t flex_runtime_gemv_products(void) {
  int64_t total = 0;
  for (int i = 0; i < NUM_ISAS; ++i)
    total += __atomic_load_n(&g_products[i][F32], __ATOMIC_RELAXED) +
             __atomic_load_n(&g_products[i][BF16], __ATOMIC_RELAXED);
  return total;
}

/* FLEX_GEMV=0 leaves every product to the BLAS. */
static int enabled(void) {
  static int cached = -1;
  if (cached < 0) {
    const char *v = getenv("FLEX_GEMV");
    cached = !(v && strcmp(v, "0") == 0);
  }
  return cached;
}

/* One thread's share (FlexThreads.c): outputs [n0, n1) of the product. */
static void run_share(const void *proto, int64_t n0, int64_t n1) {
  FlexGemvSlice s = *(const FlexGemvSlice *)proto;
  s.n0 = n0;
  s.n1 = n1;
  s.rows(&s);
}

/* ------------------------------------------------------------------------
 * The entry points.
 * ---------------------------------------------------------------------- */

/* The M rows of x (element (m, k) at m * sxm + k * sxk, `es` bytes each),
   each contiguous, as the kernel reads them: x itself (rows *xm = sxm
   apart) where it is so and needs no widening, else a malloc'ed M x K copy
   in *copy, bf16 widened to f32 when `widen` (NULL when out of memory). */
static const void *rows_of_x(const void *x, int64_t M, int64_t sxm, int64_t sxk,
                             int64_t K, size_t es, int widen, void **copy,
                             int64_t *xm) {
  *copy = NULL;
  *xm = sxm;
  if (!widen && (sxk == 1 || K == 1))
    return x;
  size_t out_es = widen ? sizeof(float) : es;
  char *packed = malloc((size_t)(M * K) * out_es);
  if (packed)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const char *from = (const char *)x + (m * sxm + k * sxk) * (int64_t)es;
        if (widen)
          ((float *)packed)[m * K + k] = flex_bf16_to_f32(*(const uint16_t *)from);
        else
          memcpy(packed + (m * K + k) * (int64_t)es, from, es);
      }
  *copy = packed;
  *xm = K;
  return packed;
}

/* One product on the kernels of `dtype` (F32 or BF16 weights). */
static int run(int dtype, int64_t M, int64_t N, int64_t K, const void *x,
               int64_t sxm, int64_t sxk, const void *w, int64_t ldw, void *y,
               int64_t sym, int64_t syn, int out_bf16, int accumulate) {
  if (M <= 0 || M > FLEX_GEMV_MAX_ROWS || N <= 0 || K <= 0 || !enabled())
    return 0;
  const Choice *c = choice();
  const FlexGemvKernel *kernel = dtype == BF16 ? &c->kernels.bf16 : &c->kernels.f32;
  void *copy;
  int64_t xm;
  const void *rows_x = rows_of_x(x, M, sxm, sxk, K, dtype == BF16 ? 2 : 4,
                                 dtype == BF16 && kernel->x_f32, &copy, &xm);
  if (!rows_x)
    return 0;
  FlexGemvSlice proto = {0,  0,   K,          ldw,      M,
                         xm, rows_x, w,       y,        sym,
                         syn, accumulate, out_bf16, kernel->rows[M - 1]};
  /* f32: groups of 4 weight rows a thread (bf16: any row), at least one
     whole group each. */
  const int64_t group = dtype == F32 ? 4 : 1;
  int threads = flex_threads_for(N * K);
  if (threads > N / group)
    threads = N / group > 0 ? (int)(N / group) : 1;
  flex_threads_run(run_share, &proto, N, group, threads);
  free(copy);
  __atomic_add_fetch(&g_products[c->isa_of[dtype]][dtype], 1, __ATOMIC_RELAXED);
  return 1;
}

int flex_gemv_f32(int64_t M, int64_t N, int64_t K, const float *x,
                  int64_t sxm, int64_t sxk, const float *w, int64_t ldw,
                  float *y, int64_t sym, int64_t syn, int accumulate) {
  return run(F32, M, N, K, x, sxm, sxk, w, ldw, y, sym, syn, 0, accumulate);
}

int flex_gemv_bf16(int64_t M, int64_t N, int64_t K, const uint16_t *x,
                   int64_t sxm, int64_t sxk, const uint16_t *w, int64_t ldw,
                   void *y, int64_t sym, int64_t syn, int out_bf16,
                   int accumulate) {
  return run(BF16, M, N, K, x, sxm, sxk, w, ldw, y, sym, syn, out_bf16, accumulate);
}
