/*===- FlexKmpc.c - the compiled code's OpenMP calls on torch's libgomp ---===*
 *
 * LLVM's OpenMP lowering (convert-scf-to-openmp, then the omp dialect's
 * translation to LLVM IR) calls the __kmpc_* entry points of LLVM's / Intel's
 * OpenMP runtime. torch, MKL and oneDNN run their threads on GNU libgomp.
 * With both runtimes in one process each keeps its own workers, and after
 * a product the libgomp workers spin on the cores our next parallel region
 * needs (perf on a 6-layer bf16 forward, 2 cores: 13 % of the samples
 * spin-waiting in the two runtimes, against 3 % for inductor, whose code is
 * all on libgomp).
 *
 * This library implements the __kmpc_* entry points that our pipelines'
 * lowering emits on top of the libgomp already in the process (found with
 * dlsym when the library is loaded), so the compiled code, torch and the
 * BLAS share one pool of workers:
 *   - __kmpc_fork_call / _fork_call_if / _push_num_threads -> GOMP_parallel
 *     (the thread count follows torch.set_num_threads, as torch's ops do);
 *   - __kmpc_dispatch_init_8u / _next_8u (every wsloop gets
 *     schedule(dynamic): flex-omp-dynamic-schedule; guided, static and
 *     runtime are mapped too) -> libgomp's work-sharing loops, over the
 *     iteration index 0 .. trip count;
 *   - __kmpc_barrier -> GOMP_barrier; __kmpc_global_thread_num ->
 *     omp_get_thread_num (the compiled code only passes it back);
 *   - omp_get_wtime (flex-omp-if-awake's clock), defined here so that a
 *     cached library links against this one alone.
 * flex_kmpc_ready() says whether libgomp was found (backend/pipelines.py
 * loads this library only then). A module that calls an entry point not
 * here (static schedules, 32-bit or signed loops) is refused before it
 * runs: jit.py checks every external symbol.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>

typedef void (*Microtask)(int32_t *, int32_t *, ...);

static void (*gomp_parallel)(void (*)(void *), void *, unsigned, unsigned);
static void (*gomp_barrier)(void);
static void (*gomp_loop_end_nowait)(void);
static _Bool (*gomp_start[4])(_Bool, unsigned long long, unsigned long long,
                              unsigned long long, unsigned long long,
                              unsigned long long *, unsigned long long *);
static _Bool (*gomp_next[4])(unsigned long long *, unsigned long long *);
static _Bool (*gomp_runtime_start)(_Bool, unsigned long long, unsigned long long,
                                   unsigned long long, unsigned long long *,
                                   unsigned long long *);
static int (*omp_thread_num)(void);

enum { DYNAMIC, GUIDED, STATIC, RUNTIME };

static void *find(const char *name) { return dlsym(RTLD_DEFAULT, name); }

__attribute__((constructor)) static void find_libgomp(void) {
  *(void **)&gomp_start[DYNAMIC] = find("GOMP_loop_ull_dynamic_start");
  *(void **)&gomp_next[DYNAMIC] = find("GOMP_loop_ull_dynamic_next");
  *(void **)&gomp_start[GUIDED] = find("GOMP_loop_ull_guided_start");
  *(void **)&gomp_next[GUIDED] = find("GOMP_loop_ull_guided_next");
  *(void **)&gomp_start[STATIC] = find("GOMP_loop_ull_static_start");
  *(void **)&gomp_next[STATIC] = find("GOMP_loop_ull_static_next");
  *(void **)&gomp_runtime_start = find("GOMP_loop_ull_runtime_start");
  *(void **)&gomp_next[RUNTIME] = find("GOMP_loop_ull_runtime_next");
  *(void **)&gomp_parallel = find("GOMP_parallel");
  *(void **)&gomp_barrier = find("GOMP_barrier");
  *(void **)&gomp_loop_end_nowait = find("GOMP_loop_end_nowait");
  *(void **)&omp_thread_num = find("omp_get_thread_num");
}

int flex_kmpc_ready(void) {
  for (int k = 0; k < 4; ++k)
    if (!gomp_next[k] || (k != RUNTIME && !gomp_start[k]))
      return 0;
  return gomp_runtime_start && gomp_parallel && gomp_barrier &&
         gomp_loop_end_nowait && omp_thread_num;
}

/*===-- parallel regions ----------------------------------------------===*/

enum { MAX_ARGS = 16 };

typedef struct {
  Microtask fn;
  int32_t argc;
  void *argv[MAX_ARGS];
} Region;

static __thread unsigned pushed_threads; /* 0: libgomp's default */

static void run_microtask(Region *r) {
  int32_t gtid = omp_thread_num(), btid = gtid;
  void **a = r->argv;
  switch (r->argc) {
#define A1 a[0]
#define A2 A1, a[1]
#define A3 A2, a[2]
#define A4 A3, a[3]
#define A5 A4, a[4]
#define A6 A5, a[5]
#define A7 A6, a[6]
#define A8 A7, a[7]
#define A9 A8, a[8]
#define A10 A9, a[9]
#define A11 A10, a[10]
#define A12 A11, a[11]
#define A13 A12, a[12]
#define A14 A13, a[13]
#define A15 A14, a[14]
#define A16 A15, a[15]
  case 0: r->fn(&gtid, &btid); break;
  case 1: r->fn(&gtid, &btid, A1); break;
  case 2: r->fn(&gtid, &btid, A2); break;
  case 3: r->fn(&gtid, &btid, A3); break;
  case 4: r->fn(&gtid, &btid, A4); break;
  case 5: r->fn(&gtid, &btid, A5); break;
  case 6: r->fn(&gtid, &btid, A6); break;
  case 7: r->fn(&gtid, &btid, A7); break;
  case 8: r->fn(&gtid, &btid, A8); break;
  case 9: r->fn(&gtid, &btid, A9); break;
  case 10: r->fn(&gtid, &btid, A10); break;
  case 11: r->fn(&gtid, &btid, A11); break;
  case 12: r->fn(&gtid, &btid, A12); break;
  case 13: r->fn(&gtid, &btid, A13); break;
  case 14: r->fn(&gtid, &btid, A14); break;
  case 15: r->fn(&gtid, &btid, A15); break;
  default: r->fn(&gtid, &btid, A16); break;
  }
}

static void region_body(void *data) { run_microtask((Region *)data); }

static void fork_region(Region *r, int parallel) {
  unsigned n = pushed_threads;
  pushed_threads = 0;
  if (parallel)
    gomp_parallel(region_body, r, n, 0);
  else /* a team of one: the loops below work outside a region too */
    run_microtask(r);
}

void __kmpc_fork_call(void *loc, int32_t argc, Microtask fn, ...) {
  (void)loc;
  Region r = {fn, argc, {0}};
  va_list ap;
  va_start(ap, fn);
  /* More than MAX_ARGS cannot be forwarded; the lowering passes one
     (a pointer to the captured values). Run such a region on one thread. */
  int parallel = argc <= MAX_ARGS;
  if (!parallel)
    r.argc = MAX_ARGS;
  for (int32_t i = 0; i < r.argc; ++i)
    r.argv[i] = va_arg(ap, void *);
  va_end(ap);
  fork_region(&r, parallel);
}

void __kmpc_fork_call_if(void *loc, int32_t argc, Microtask fn, int32_t cond,
                         void *args) {
  (void)loc;
  Region r = {fn, argc > 0 ? 1 : 0, {args}};
  fork_region(&r, cond != 0);
}

void __kmpc_push_num_threads(void *loc, int32_t gtid, int32_t n) {
  (void)loc, (void)gtid;
  pushed_threads = n > 0 ? (unsigned)n : 0;
}

int32_t __kmpc_global_thread_num(void *loc) {
  (void)loc;
  return omp_thread_num();
}

void __kmpc_barrier(void *loc, int32_t gtid) {
  (void)loc, (void)gtid;
  gomp_barrier();
}

double omp_get_wtime(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*===-- work-sharing loops ----------------------------------------------===*/

/* libomp's schedule numbers (kmp.h: kmp_sched_type), modifiers masked. */
enum {
  SCH_STATIC_CHUNKED = 33,
  SCH_STATIC = 34,
  SCH_DYNAMIC = 35,
  SCH_GUIDED = 36,
  SCH_RUNTIME = 37,
  SCH_MODIFIERS = (1 << 29) | (1 << 30)
};

/* Iterations lb, lb + st, ... up to ub (inclusive, unsigned): how many. */
static uint64_t trip_count(uint64_t lb, uint64_t ub, int64_t st) {
  if (st > 0)
    return lb > ub ? 0 : (ub - lb) / (uint64_t)st + 1;
  if (st < 0)
    return lb < ub ? 0 : (lb - ub) / (uint64_t)(-st) + 1;
  return 0;
}

typedef struct {
  int64_t lb, st;
  uint64_t trip, chunk;
  int kind, started;
} Dispatch;

static __thread Dispatch dispatch;

static void dispatch_init(int32_t sched, uint64_t lb, uint64_t ub, int64_t st,
                          int64_t chunk) {
  int kind;
  switch (sched & ~SCH_MODIFIERS) {
  case SCH_STATIC:
  case SCH_STATIC_CHUNKED: kind = STATIC; break;
  case SCH_GUIDED: kind = GUIDED; break;
  case SCH_RUNTIME: kind = RUNTIME; break;
  default: kind = DYNAMIC; break;
  }
  dispatch.lb = (int64_t)lb;
  dispatch.st = st;
  dispatch.trip = trip_count(lb, ub, st);
  /* libgomp: chunk 0 is the even split for static, 1 otherwise. */
  dispatch.chunk = chunk > 0 ? (uint64_t)chunk : (kind == STATIC ? 0 : 1);
  dispatch.kind = kind;
  dispatch.started = 0;
}

/* The next chunk of this thread as first / last iteration values; 0 when
   the loop is done (then this thread has left libgomp's work share). */
static int dispatch_next(int32_t *p_last, int64_t *p_lb, int64_t *p_ub,
                         int64_t *p_st) {
  Dispatch *d = &dispatch;
  unsigned long long is = 0, ie = 0;
  _Bool more;
  if (!d->started) {
    d->started = 1;
    more = d->kind == RUNTIME
               ? gomp_runtime_start(1, 0, d->trip, 1, &is, &ie)
               : gomp_start[d->kind](1, 0, d->trip, 1, d->chunk, &is, &ie);
  } else {
    more = gomp_next[d->kind](&is, &ie);
  }
  if (!more || ie <= is) {
    gomp_loop_end_nowait();
    return 0;
  }
  *p_lb = d->lb + (int64_t)(is * (uint64_t)d->st);
  *p_ub = d->lb + (int64_t)((ie - 1) * (uint64_t)d->st);
  if (p_st)
    *p_st = d->st;
  if (p_last)
    *p_last = ie == d->trip;
  return 1;
}

void __kmpc_dispatch_init_8u(void *loc, int32_t gtid, int32_t sched,
                             uint64_t lb, uint64_t ub, int64_t st,
                             int64_t chunk) {
  (void)loc, (void)gtid;
  dispatch_init(sched, lb, ub, st, chunk);
}

int32_t __kmpc_dispatch_next_8u(void *loc, int32_t gtid, int32_t *p_last,
                                uint64_t *p_lb, uint64_t *p_ub, int64_t *p_st) {
  (void)loc, (void)gtid;
  int64_t lb, ub;
  if (!dispatch_next(p_last, &lb, &ub, p_st))
    return 0;
  *p_lb = (uint64_t)lb, *p_ub = (uint64_t)ub;
  return 1;
}
