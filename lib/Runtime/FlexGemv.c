/*===- FlexGemv.c - f32 products of one row on every CPU -----------------===*
 *
 * flex_gemv_f32: y[n] (+)= sum_k x[k] * W[n][k] for n < N, where the rows
 * of W are contiguous (a linear layer's weight: the product of one token).
 * Such a product reads the whole weight once and does one FMA per element,
 * so it is bound by memory bandwidth; the BLAS inside torch runs it on one
 * thread (on a 2-core AMD Zen 4: 14.8 GB/s for the 151936 x 896 lm_head of
 * a Qwen2-0.5B decode step, where two threads read 31 GB/s). Here the
 * output features are split between threads (pthreads, started per call:
 * only products of at least MIN_PARALLEL weight elements are split), each
 * running an AVX-512 loop of four rows at a time where the CPU has it.
 * FLEX_GEMV=0 (read once) leaves every product to the BLAS.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* cpu_set_t */
#include "FlexGemv.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FLEX_HAVE_AVX512_PATH 1
#endif

enum { MIN_PARALLEL = 1 << 20, MAX_THREADS = 16 };

typedef struct {
  int64_t n0, n1, K, ldw;
  const float *x, *w;
  float *y;
  int64_t sy;
  int accumulate;
} Slice;

static void store(const Slice *s, int64_t n, float v) {
  float *out = s->y + n * s->sy;
  *out = s->accumulate ? *out + v : v;
}

static void rows_generic(const Slice *s, int64_t n0) {
  for (int64_t n = n0; n < s->n1; ++n) {
    const float *row = s->w + n * s->ldw;
    float acc = 0.0f;
    for (int64_t k = 0; k < s->K; ++k)
      acc += s->x[k] * row[k];
    store(s, n, acc);
  }
}

#ifdef FLEX_HAVE_AVX512_PATH
__attribute__((target("avx512f"))) static void rows_avx512(const Slice *s) {
  const int64_t K = s->K, K16 = K & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
  int64_t n = s->n0;
  for (; n + 4 <= s->n1; n += 4) {
    const float *r0 = s->w + n * s->ldw, *r1 = r0 + s->ldw,
                *r2 = r1 + s->ldw, *r3 = r2 + s->ldw;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < K16; k += 16) {
      __m512 xv = _mm512_loadu_ps(s->x + k);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r0 + k), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r1 + k), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r2 + k), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r3 + k), xv, a3);
    }
    if (tail) {
      __m512 xv = _mm512_maskz_loadu_ps(tail, s->x + K16);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r0 + K16), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r1 + K16), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r2 + K16), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r3 + K16), xv, a3);
    }
    store(s, n, _mm512_reduce_add_ps(a0));
    store(s, n + 1, _mm512_reduce_add_ps(a1));
    store(s, n + 2, _mm512_reduce_add_ps(a2));
    store(s, n + 3, _mm512_reduce_add_ps(a3));
  }
  rows_generic(s, n);
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

static void *run_slice(void *arg) {
  const Slice *s = (const Slice *)arg;
#ifdef FLEX_HAVE_AVX512_PATH
  if (has_avx512()) {
    rows_avx512(s);
    return NULL;
  }
#endif
  rows_generic(s, s->n0);
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

int flex_gemv_f32(int64_t N, int64_t K, const float *x, int64_t sx,
                  const float *w, int64_t ldw, float *y, int64_t sy,
                  int accumulate) {
  if (N <= 0 || K <= 0 || !enabled())
    return 0;
  float *packed = NULL;
  if (sx != 1) { /* x strided: one contiguous copy (K floats) */
    packed = malloc((size_t)K * sizeof(float));
    if (!packed)
      return 0;
    for (int64_t k = 0; k < K; ++k)
      packed[k] = x[k * sx];
    x = packed;
  }
  int threads = N * K >= MIN_PARALLEL ? num_cpus() : 1;
  if (threads > N / 4)
    threads = N / 4 > 0 ? (int)(N / 4) : 1;
  Slice slices[MAX_THREADS];
  pthread_t ids[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  /* Slices of whole groups of four rows. */
  int64_t groups = (N + 3) / 4, per = groups / threads, extra = groups % threads;
  int64_t n = 0;
  for (int t = 0; t < threads; ++t) {
    int64_t count = (per + (t < extra)) * 4;
    Slice s = {n, n + count < N ? n + count : N, K, ldw, x, w, y, sy, accumulate};
    slices[t] = s;
    n = slices[t].n1;
  }
  for (int t = 1; t < threads; ++t)
    started[t] = pthread_create(&ids[t], NULL, run_slice, &slices[t]) == 0;
  run_slice(&slices[0]);
  for (int t = 1; t < threads; ++t) {
    if (started[t])
      pthread_join(ids[t], NULL);
    else
      run_slice(&slices[t]); /* no thread: this one does it */
  }
  free(packed);
  __atomic_add_fetch(&g_products, 1, __ATOMIC_RELAXED);
  return 1;
}
