/*===- FlexGemv.c - products of one row on every CPU ----------------------===*
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
 * least MIN_PARALLEL weight elements are split), each
 *   - f32: an AVX-512 loop of one weight row at a time where the CPU has
 *     it, else a plain loop;
 *   - bf16 (only where the CPU has AVX512-BF16, else the caller's path):
 *     one weight row at a time with VDPBF16PS, bf16 pairs into f32 sums;
 * each weight row loaded once for the M rows of x. The BLAS packs the
 * weight for M > 1 first (a second pass over it): a 4-row product of a
 * tiny model's 256 x 128 weight spent most of its time packing.
 * Reading the weight as one sequential stream matters for a model's short
 * rows (896 elements): bf16 25 GB/s against 20 four rows at a time; f32,
 * over a Qwen2-0.5B's weights, 41.5 GB/s against 28.5.
 * FLEX_GEMV=0 (read once) leaves every product to the BLAS.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* cpu_set_t */
#include "FlexBf16.h"
#include "FlexGemv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FLEX_HAVE_AVX512_PATH 1
#endif

/* Split from 64 Ki weight elements: with 1 Mi, a Qwen2-0.5B's q/o (896 x
   896) and k/v (128 x 896) products ran on one thread while the other
   waited (9% of an f32 decode step's bytes; perf: the idle worker 7% of
   the samples); 64 Ki: f32 decode 82.6/79.3/72.0 -> 77.7/72.2/56.7
   ms/token in alternating processes, bf16 unchanged (38.7/40.7 ->
   38.7/39.1). */
enum { MIN_PARALLEL = 1 << 16, MAX_THREADS = 16 };

typedef struct Slice Slice;
struct Slice {
  int64_t n0, n1, K, ldw;
  int64_t M, xm;     /* rows of x, each contiguous, xm elements apart */
  const void *x, *w; /* f32 or bf16, as `rows` reads them */
  void *y;
  int64_t ym, sy; /* y[m][n] at m * ym + n * sy */
  int accumulate, out_bf16;
  void (*rows)(const Slice *);
};

static void store(const Slice *s, int64_t m, int64_t n, float v) {
  int64_t at = m * s->ym + n * s->sy;
  if (s->out_bf16) {
    uint16_t *out = (uint16_t *)s->y + at;
    *out = flex_f32_to_bf16(s->accumulate ? flex_bf16_to_f32(*out) + v : v);
  } else {
    float *out = (float *)s->y + at;
    *out = s->accumulate ? *out + v : v;
  }
}

static void rows_f32(const Slice *s) {
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const float *row = (const float *)s->w + n * s->ldw;
    for (int64_t m = 0; m < s->M; ++m) {
      const float *x = (const float *)s->x + m * s->xm;
      float acc = 0.0f;
      for (int64_t k = 0; k < s->K; ++k)
        acc += x[k] * row[k];
      store(s, m, n, acc);
    }
  }
}

#ifdef FLEX_HAVE_AVX512_PATH
/* One row at a time (a sequential stream: 1.45x the read rate of four rows
 * at a time on a model's weights, Zen 4), four accumulators of 16 floats;
 * the K tail masked. */
__attribute__((target("avx512f"))) static void rows_f32_avx512(const Slice *s) {
  const float *x = (const float *)s->x;
  const int64_t K = s->K, K16 = K & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const float *r = (const float *)s->w + n * s->ldw;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k), _mm512_loadu_ps(x + k), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k + 16), _mm512_loadu_ps(x + k + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k + 32), _mm512_loadu_ps(x + k + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k + 48), _mm512_loadu_ps(x + k + 48), a3);
    }
    for (; k < K16; k += 16)
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + k), _mm512_loadu_ps(x + k), a0);
    if (tail)
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + K16),
                           _mm512_maskz_loadu_ps(tail, x + K16), a1);
    store(s, 0, n, _mm512_reduce_add_ps(
                    _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))));
  }
}

/* M (2..FLEX_GEMV_MAX_ROWS, a constant where inlined) rows of x against one
 * weight row at a time: each 16 weights loaded once, two accumulators a
 * row; the K tail masked. */
__attribute__((target("avx512f"), always_inline)) static inline void
rows_f32_avx512_m(const Slice *s, const int M) {
  const int64_t K = s->K, K16 = K & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
  const float *x = (const float *)s->x;
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const float *r = (const float *)s->w + n * s->ldw;
    __m512 a[FLEX_GEMV_MAX_ROWS], b[FLEX_GEMV_MAX_ROWS];
    for (int m = 0; m < M; ++m)
      a[m] = b[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      __m512 w0 = _mm512_loadu_ps(r + k), w1 = _mm512_loadu_ps(r + k + 16);
      for (int m = 0; m < M; ++m) {
        a[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * s->xm + k), a[m]);
        b[m] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + m * s->xm + k + 16), b[m]);
      }
    }
    for (; k < K16; k += 16) {
      __m512 w0 = _mm512_loadu_ps(r + k);
      for (int m = 0; m < M; ++m)
        a[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * s->xm + k), a[m]);
    }
    if (tail) {
      __m512 w0 = _mm512_maskz_loadu_ps(tail, r + K16);
      for (int m = 0; m < M; ++m)
        b[m] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(tail, x + m * s->xm + K16), b[m]);
    }
    for (int m = 0; m < M; ++m)
      store(s, m, n, _mm512_reduce_add_ps(_mm512_add_ps(a[m], b[m])));
  }
}

__attribute__((target("avx512f"))) static void rows_f32_avx512_2(const Slice *s) {
  rows_f32_avx512_m(s, 2);
}
__attribute__((target("avx512f"))) static void rows_f32_avx512_3(const Slice *s) {
  rows_f32_avx512_m(s, 3);
}
__attribute__((target("avx512f"))) static void rows_f32_avx512_4(const Slice *s) {
  rows_f32_avx512_m(s, 4);
}

/* One row at a time (a sequential stream), four accumulators of 32 bf16
   pairs each; the K tail masked. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
rows_bf16_dot(const Slice *s) {
  const uint16_t *x = (const uint16_t *)s->x;
  const int64_t K = s->K, K32 = K & ~(int64_t)31;
  const __mmask32 tail = (__mmask32)((1ull << (K - K32)) - 1ull);
#define FLEX_LOAD(p) ((__m512bh)_mm512_loadu_si512((const void *)(p)))
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const uint16_t *r = (const uint16_t *)s->w + n * s->ldw;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 128 <= K; k += 128) {
      a0 = _mm512_dpbf16_ps(a0, FLEX_LOAD(r + k), FLEX_LOAD(x + k));
      a1 = _mm512_dpbf16_ps(a1, FLEX_LOAD(r + k + 32), FLEX_LOAD(x + k + 32));
      a2 = _mm512_dpbf16_ps(a2, FLEX_LOAD(r + k + 64), FLEX_LOAD(x + k + 64));
      a3 = _mm512_dpbf16_ps(a3, FLEX_LOAD(r + k + 96), FLEX_LOAD(x + k + 96));
    }
    for (; k < K32; k += 32)
      a0 = _mm512_dpbf16_ps(a0, FLEX_LOAD(r + k), FLEX_LOAD(x + k));
    if (tail)
      a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_maskz_loadu_epi16(tail, r + K32),
                            (__m512bh)_mm512_maskz_loadu_epi16(tail, x + K32));
    store(s, 0, n, _mm512_reduce_add_ps(
                    _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))));
  }
}

/* M (2..FLEX_GEMV_MAX_ROWS) rows of x against one weight row at a time:
   each 64 weights loaded once, two accumulators a row; the K tail masked. */
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
rows_bf16_dot_m(const Slice *s, const int M) {
  const uint16_t *x = (const uint16_t *)s->x;
  const int64_t K = s->K, K32 = K & ~(int64_t)31;
  const __mmask32 tail = (__mmask32)((1ull << (K - K32)) - 1ull);
  for (int64_t n = s->n0; n < s->n1; ++n) {
    const uint16_t *r = (const uint16_t *)s->w + n * s->ldw;
    __m512 a[FLEX_GEMV_MAX_ROWS], b[FLEX_GEMV_MAX_ROWS];
    for (int m = 0; m < M; ++m)
      a[m] = b[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
      __m512bh w0 = FLEX_LOAD(r + k), w1 = FLEX_LOAD(r + k + 32);
      for (int m = 0; m < M; ++m) {
        a[m] = _mm512_dpbf16_ps(a[m], w0, FLEX_LOAD(x + m * s->xm + k));
        b[m] = _mm512_dpbf16_ps(b[m], w1, FLEX_LOAD(x + m * s->xm + k + 32));
      }
    }
    for (; k < K32; k += 32) {
      __m512bh w0 = FLEX_LOAD(r + k);
      for (int m = 0; m < M; ++m)
        a[m] = _mm512_dpbf16_ps(a[m], w0, FLEX_LOAD(x + m * s->xm + k));
    }
    if (tail) {
      __m512bh w0 = (__m512bh)_mm512_maskz_loadu_epi16(tail, r + K32);
      for (int m = 0; m < M; ++m)
        b[m] = _mm512_dpbf16_ps(
            b[m], w0, (__m512bh)_mm512_maskz_loadu_epi16(tail, x + m * s->xm + K32));
    }
    for (int m = 0; m < M; ++m)
      store(s, m, n, _mm512_reduce_add_ps(_mm512_add_ps(a[m], b[m])));
  }
}
#undef FLEX_LOAD

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
rows_bf16_dot_2(const Slice *s) {
  rows_bf16_dot_m(s, 2);
}
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
rows_bf16_dot_3(const Slice *s) {
  rows_bf16_dot_m(s, 3);
}
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
rows_bf16_dot_4(const Slice *s) {
  rows_bf16_dot_m(s, 4);
}
#endif

static int has_avx512(void) {
#ifdef FLEX_HAVE_AVX512_PATH
  static int cached = -1;
  if (cached < 0)
    cached = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return cached;
#else
  return 0;
#endif
}

static int has_bf16_dot(void) {
#ifdef FLEX_HAVE_AVX512_PATH
  static int cached = -1;
  if (cached < 0)
    cached = __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512bf16");
  return cached;
#else
  return 0;
#endif
}

static void *run_slice(void *arg) {
  const Slice *s = (const Slice *)arg;
  s->rows(s);
  return NULL;
}

static int num_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
  }
  return 1;
}

static int64_t g_products; /* run here, for tests */

int64_t flex_runtime_gemv_products(void) {
  return __atomic_load_n(&g_products, __ATOMIC_RELAXED);
}

static int enabled(void) {
  static int cached = -1;
  if (cached < 0) {
    const char *v = getenv("FLEX_GEMV");
    cached = !(v && strcmp(v, "0") == 0);
  }
  return cached;
}

/* libgomp, when the process has it (torch's): its workers run the slices.
   They are the ones that torch's ops and our compiled regions use
   (FlexKmpc.c), so they are awake after those, and pthreads of our own
   started beside them competed with their spinning for the CPUs. */
typedef struct {
  void (*parallel)(void (*)(void *), void *, unsigned, unsigned);
  int (*thread_num)(void), (*num_threads)(void), (*max_threads)(void);
} Gomp;

static const Gomp *gomp(void) {
  static Gomp g;
  static int state; /* 0: not looked up, 1: found, 2: missing */
  if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 0) {
    Gomp f;
    *(void **)&f.parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    *(void **)&f.thread_num = dlsym(RTLD_DEFAULT, "omp_get_thread_num");
    *(void **)&f.num_threads = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
    *(void **)&f.max_threads = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    int found = f.parallel && f.thread_num && f.num_threads && f.max_threads;
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
  /* A smaller team than asked (nested region, thread limit): each member
     takes every num_threads-th slice. */
  for (int t = g->thread_num(); t < team->count; t += g->num_threads())
    run_slice(&team->slices[t]);
}

/* Splits rows [0, N) of `proto` between threads (groups of `group` rows)
   and runs them: on libgomp's workers (as many as torch's thread count),
   else on pthreads started here. */
static void split_and_run(const Slice *proto, int64_t N, int64_t K,
                          int64_t group) {
  const Gomp *g = gomp();
  int threads = 1;
  if (N * K >= MIN_PARALLEL) {
    threads = num_cpus();
    if (g && g->max_threads() < threads)
      threads = g->max_threads() > 0 ? g->max_threads() : 1;
  }
  if (threads > N / group)
    threads = N / group > 0 ? (int)(N / group) : 1;
  Slice slices[MAX_THREADS];
  int64_t groups = (N + group - 1) / group, per = groups / threads,
          extra = groups % threads;
  int64_t n = 0;
  for (int t = 0; t < threads; ++t) {
    int64_t count = (per + (t < extra)) * group;
    slices[t] = *proto;
    slices[t].n0 = n;
    slices[t].n1 = n + count < N ? n + count : N;
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
      started[t] = pthread_create(&ids[t], NULL, run_slice, &slices[t]) == 0;
    run_slice(&slices[0]);
    for (int t = 1; t < threads; ++t) {
      if (started[t])
        pthread_join(ids[t], NULL);
      else
        run_slice(&slices[t]); /* no thread: this one does it */
    }
  }
  __atomic_add_fetch(&g_products, 1, __ATOMIC_RELAXED);
}

/* The M rows of x (element (m, k) at m * sxm + k * sxk), each contiguous:
   x itself (rows *xm = sxm apart), or a malloc'ed M x K copy in *copy
   (NULL when out of memory). */
static const void *contiguous_rows(const void *x, int64_t M, int64_t sxm,
                                   int64_t sxk, int64_t K, size_t es,
                                   void **copy, int64_t *xm) {
  *copy = NULL;
  *xm = sxm;
  if (sxk == 1 || K == 1)
    return x;
  char *packed = malloc((size_t)(M * K) * es);
  if (packed)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)
        memcpy(packed + (m * K + k) * es,
               (const char *)x + (m * sxm + k * sxk) * (int64_t)es, es);
  *copy = packed;
  *xm = K;
  return packed;
}

int flex_gemv_f32(int64_t M, int64_t N, int64_t K, const float *x,
                  int64_t sxm, int64_t sxk, const float *w, int64_t ldw,
                  float *y, int64_t sym, int64_t syn, int accumulate) {
  if (M <= 0 || M > FLEX_GEMV_MAX_ROWS || N <= 0 || K <= 0 || !enabled())
    return 0;
  void *copy;
  int64_t xm;
  const void *rows_x = contiguous_rows(x, M, sxm, sxk, K, sizeof(float), &copy, &xm);
  if (!rows_x)
    return 0;
  void (*rows)(const Slice *) = rows_f32;
#ifdef FLEX_HAVE_AVX512_PATH
  static void (*const by_rows[])(const Slice *) = {
      rows_f32_avx512, rows_f32_avx512_2, rows_f32_avx512_3, rows_f32_avx512_4};
  if (has_avx512())
    rows = by_rows[M - 1];
#endif
  Slice proto = {0, 0, K, ldw, M, xm, rows_x, w, y, sym, syn, accumulate, 0, rows};
  split_and_run(&proto, N, K, 4);
  free(copy);
  return 1;
}

int flex_gemv_bf16(int64_t M, int64_t N, int64_t K, const uint16_t *x,
                   int64_t sxm, int64_t sxk, const uint16_t *w, int64_t ldw,
                   void *y, int64_t sym, int64_t syn, int out_bf16,
                   int accumulate) {
#ifdef FLEX_HAVE_AVX512_PATH
  if (M <= 0 || M > FLEX_GEMV_MAX_ROWS || N <= 0 || K <= 0 || !enabled() ||
      !has_bf16_dot())
    return 0;
  void *copy;
  int64_t xm;
  const void *rows_x = contiguous_rows(x, M, sxm, sxk, K, sizeof(uint16_t), &copy, &xm);
  if (!rows_x)
    return 0;
  static void (*const by_rows[])(const Slice *) = {
      rows_bf16_dot, rows_bf16_dot_2, rows_bf16_dot_3, rows_bf16_dot_4};
  Slice proto = {0, 0, K, ldw, M, xm, rows_x, w, y, sym, syn, accumulate, out_bf16,
                 by_rows[M - 1]};
  split_and_run(&proto, N, K, 1);
  free(copy);
  return 1;
#else
  (void)M, (void)N, (void)K, (void)x, (void)sxm, (void)sxk, (void)w, (void)ldw,
      (void)y, (void)sym, (void)syn, (void)out_bf16, (void)accumulate;
  return 0;
#endif
}
