/*===- FlexThreads.c - the runtime's products split between threads -------===*
 *
 * flex_threads_for / flex_threads_run (FlexThreads.h), the threads of the
 * few-row products (Gemv/) and of the quantized-weight products (Quant/).
 * The shares run on libgomp's workers when the process has libgomp
 * (torch's): they are the ones that torch's ops and our compiled regions
 * use (FlexKmpc.c), so they are awake after those, and pthreads of our own
 * started beside them competed with their spinning for the CPUs. Without
 * libgomp, pthreads started per call run them.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* cpu_set_t */
#include "FlexThreads.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

/* Split from 64 Ki weight elements: with 1 Mi, a Qwen2-0.5B's q/o (896 x
   896) and k/v (128 x 896) few-row products ran on one thread while the
   other waited (9% of an f32 decode step's bytes; perf: the idle worker 7%
   of the samples); 64 Ki: f32 decode 82.6/79.3/72.0 -> 77.7/72.2/56.7
   ms/token in alternating processes, bf16 unchanged (38.7/40.7 ->
   38.7/39.1). */
enum { MIN_PARALLEL = 1 << 16 };

static int num_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > FLEX_THREADS_MAX ? FLEX_THREADS_MAX : n;
  }
  return 1;
}

/* libgomp's entry points, when the process has it. */
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

int flex_threads_for(int64_t weight_elements) {
  if (weight_elements < MIN_PARALLEL)
    return 1;
  const Gomp *g = gomp();
  int threads = num_cpus();
  if (g && g->max_threads() < threads)
    threads = g->max_threads() > 0 ? g->max_threads() : 1;
  return threads;
}

/* One thread's share. */
typedef struct {
  FlexThreadsWork work;
  const void *ctx;
  int64_t n0, n1;
} Share;

static void run_share(const Share *s) { s->work(s->ctx, s->n0, s->n1); }

static void *run_pthread(void *arg) {
  run_share((const Share *)arg);
  return NULL;
}

typedef struct {
  const Share *shares;
  int count;
} Team;

static void run_team_member(void *arg) {
  const Team *team = (const Team *)arg;
  const Gomp *g = gomp();
  /* A smaller team than asked (nested region, thread limit): each member
     takes every num_threads-th share. */
  for (int t = g->thread_num(); t < team->count; t += g->num_threads())
    run_share(&team->shares[t]);
}

void flex_threads_run(FlexThreadsWork work, const void *ctx, int64_t units,
                      int64_t group, int threads) {
  const int64_t groups = (units + group - 1) / group;
  if (threads > groups)
    threads = groups > 0 ? (int)groups : 1;
  if (threads > FLEX_THREADS_MAX)
    threads = FLEX_THREADS_MAX;
  if (threads < 1)
    threads = 1;
  Share shares[FLEX_THREADS_MAX];
  const int64_t per = groups / threads, extra = groups % threads;
  int64_t n = 0;
  for (int t = 0; t < threads; ++t) {
    const int64_t count = (per + (t < extra)) * group;
    shares[t].work = work;
    shares[t].ctx = ctx;
    shares[t].n0 = n;
    shares[t].n1 = n + count < units ? n + count : units;
    n = shares[t].n1;
  }
  const Gomp *g = threads > 1 ? gomp() : NULL;
  if (threads == 1) {
    run_share(&shares[0]);
  } else if (g) {
    Team team = {shares, threads};
    g->parallel(run_team_member, &team, (unsigned)threads, 0);
  } else {
    pthread_t ids[FLEX_THREADS_MAX];
    int started[FLEX_THREADS_MAX] = {0};
    for (int t = 1; t < threads; ++t)
      started[t] = pthread_create(&ids[t], NULL, run_pthread, &shares[t]) == 0;
    run_share(&shares[0]);
    for (int t = 1; t < threads; ++t) {
      if (started[t])
        pthread_join(ids[t], NULL);
      else
        run_share(&shares[t]); /* no thread: this one does it */
    }
  }
}
