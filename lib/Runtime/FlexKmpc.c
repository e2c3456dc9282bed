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
 * This library implements the __kmpc_* subset that the lowering emits on
 * top of the libgomp already in the process (found with dlsym when the
 * library is loaded), so the compiled code, torch and the BLAS share one
 * pool of workers:
 *   - __kmpc_fork_call / _fork_call_if / _push_num_threads -> GOMP_parallel
 *     (the thread count follows torch.set_num_threads, as torch's ops do);
 *   - __kmpc_dispatch_init / _next (dynamic, guided, static, runtime
 *     schedules) -> libgomp's work-sharing loops, over the iteration index
 *     0 .. trip count so that every sign and width maps on one unsigned form;
 *   - __kmpc_for_static_init / _fini: the block (or chunk) of this thread,
 *     computed here;
 *   - __kmpc_barrier -> GOMP_barrier; __kmpc_global_thread_num ->
 *     omp_get_thread_num (the compiled code only passes it back);
 *   - omp_get_wtime (flex-omp-if-awake's clock), defined here so that a
 *     cached library links against this one alone.
 * flex_kmpc_ready() says whether libgomp was found (backend/pipelines.py
 * loads this library only then).
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
static int (*omp_num_threads)(void);

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
  *(void **)&omp_num_threads = find("omp_get_num_threads");
}

int flex_kmpc_ready(void) {
  for (int k = 0; k < 4; ++k)
    if (!gomp_next[k] || (k != RUNTIME && !gomp_start[k]))
      return 0;
  return gomp_runtime_start && gomp_parallel && gomp_barrier &&
         gomp_loop_end_nowait && omp_thread_num && omp_num_threads;
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

/* Iterations lb, lb + st, ... up to ub (inclusive): how many. Values are
   the loop's own type widened (signed or not) to 64 bits. */
static uint64_t trip_count(int64_t lb, int64_t ub, int64_t st, int is_signed) {
  if (st == 0)
    return 0;
  if (st > 0) {
    if (is_signed ? lb > ub : (uint64_t)lb > (uint64_t)ub)
      return 0;
    return ((uint64_t)ub - (uint64_t)lb) / (uint64_t)st + 1;
  }
  if (is_signed ? lb < ub : (uint64_t)lb < (uint64_t)ub)
    return 0;
  return ((uint64_t)lb - (uint64_t)ub) / (uint64_t)(-st) + 1;
}

typedef struct {
  int64_t lb, st;
  uint64_t trip, chunk;
  int kind, started;
} Dispatch;

static __thread Dispatch dispatch;

static void dispatch_init(int32_t sched, int64_t lb, int64_t ub, int64_t st,
                          int64_t chunk, int is_signed) {
  int kind;
  switch (sched & ~SCH_MODIFIERS) {
  case SCH_STATIC:
  case SCH_STATIC_CHUNKED: kind = STATIC; break;
  case SCH_GUIDED: kind = GUIDED; break;
  case SCH_RUNTIME: kind = RUNTIME; break;
  default: kind = DYNAMIC; break;
  }
  dispatch.lb = lb;
  dispatch.st = st;
  dispatch.trip = trip_count(lb, ub, st, is_signed);
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

#define FLEX_DISPATCH(SUFFIX, T, IS_SIGNED)                                    \
  void __kmpc_dispatch_init_##SUFFIX(void *loc, int32_t gtid, int32_t sched,   \
                                     T lb, T ub, int64_t st, int64_t chunk) {  \
    (void)loc, (void)gtid;                                                     \
    dispatch_init(sched, (int64_t)lb, (int64_t)ub, st, chunk, IS_SIGNED);      \
  }                                                                            \
  int32_t __kmpc_dispatch_next_##SUFFIX(void *loc, int32_t gtid,               \
                                        int32_t *p_last, T *p_lb, T *p_ub,     \
                                        int64_t *p_st) {                       \
    (void)loc, (void)gtid;                                                     \
    int64_t lb, ub, st;                                                        \
    if (!dispatch_next(p_last, &lb, &ub, &st))                                 \
      return 0;                                                                \
    *p_lb = (T)lb, *p_ub = (T)ub;                                              \
    if (p_st)                                                                  \
      *p_st = st;                                                              \
    return 1;                                                                  \
  }

/* The 4-byte variants take a 32-bit stride and chunk; the widening above
   is done by the C calling convention for those through these wrappers. */
FLEX_DISPATCH(8, int64_t, 1)
FLEX_DISPATCH(8u, uint64_t, 0)

void __kmpc_dispatch_init_4(void *loc, int32_t gtid, int32_t sched, int32_t lb,
                            int32_t ub, int32_t st, int32_t chunk) {
  (void)loc, (void)gtid;
  dispatch_init(sched, lb, ub, st, chunk, 1);
}
void __kmpc_dispatch_init_4u(void *loc, int32_t gtid, int32_t sched,
                             uint32_t lb, uint32_t ub, int32_t st,
                             int32_t chunk) {
  (void)loc, (void)gtid;
  dispatch_init(sched, lb, ub, st, chunk, 0);
}
#define FLEX_DISPATCH_NEXT4(SUFFIX, T)                                         \
  int32_t __kmpc_dispatch_next_##SUFFIX(void *loc, int32_t gtid,               \
                                        int32_t *p_last, T *p_lb, T *p_ub,     \
                                        int32_t *p_st) {                       \
    (void)loc, (void)gtid;                                                     \
    int64_t lb, ub, st;                                                        \
    if (!dispatch_next(p_last, &lb, &ub, &st))                                 \
      return 0;                                                                \
    *p_lb = (T)lb, *p_ub = (T)ub;                                              \
    if (p_st)                                                                  \
      *p_st = (int32_t)st;                                                     \
    return 1;                                                                  \
  }
FLEX_DISPATCH_NEXT4(4, int32_t)
FLEX_DISPATCH_NEXT4(4u, uint32_t)

void __kmpc_dispatch_fini_4(void *loc, int32_t gtid) { (void)loc, (void)gtid; }
void __kmpc_dispatch_fini_4u(void *loc, int32_t gtid) { (void)loc, (void)gtid; }
void __kmpc_dispatch_fini_8(void *loc, int32_t gtid) { (void)loc, (void)gtid; }
void __kmpc_dispatch_fini_8u(void *loc, int32_t gtid) { (void)loc, (void)gtid; }

/* Static schedules: this thread's block [*p_lb, *p_ub] (kmp_sch_static:
   the trip count split evenly, the first `trip % threads` threads one
   more) or its first chunk and the stride to its next (static_chunked). */
static void static_init(int32_t sched, int32_t *p_last, int64_t *p_lb,
                        int64_t *p_ub, int64_t *p_stride, int64_t st,
                        int64_t chunk, int is_signed) {
  uint64_t trip = trip_count(*p_lb, *p_ub, st, is_signed);
  uint64_t tid = (uint64_t)omp_thread_num(), nth = (uint64_t)omp_num_threads();
  int64_t lb = *p_lb;
  if (p_last)
    *p_last = 0;
  if (trip == 0) {
    *p_stride = st;
    return; /* the caller's bounds already describe no iteration */
  }
  if ((sched & ~SCH_MODIFIERS) == SCH_STATIC_CHUNKED && chunk > 0) {
    uint64_t c = (uint64_t)chunk;
    *p_lb = lb + (int64_t)(tid * c * (uint64_t)st);
    *p_ub = *p_lb + (int64_t)((c - 1) * (uint64_t)st);
    *p_stride = (int64_t)(c * nth * (uint64_t)st);
    if (p_last)
      *p_last = ((trip - 1) / c) % nth == tid;
    return;
  }
  uint64_t small = trip / nth, extra = trip % nth;
  uint64_t first = tid * small + (tid < extra ? tid : extra);
  uint64_t count = small + (tid < extra ? 1 : 0);
  if (count == 0) { /* an empty block: first past last */
    *p_lb = lb + (int64_t)(trip * (uint64_t)st);
    *p_ub = *p_lb - st;
  } else {
    *p_lb = lb + (int64_t)(first * (uint64_t)st);
    *p_ub = *p_lb + (int64_t)((count - 1) * (uint64_t)st);
  }
  *p_stride = (int64_t)(trip * (uint64_t)st);
  if (p_last)
    *p_last = count != 0 && first + count == trip;
}

#define FLEX_STATIC_INIT(SUFFIX, T, ST, IS_SIGNED)                             \
  void __kmpc_for_static_init_##SUFFIX(void *loc, int32_t gtid, int32_t sched, \
                                       int32_t *p_last, T *p_lb, T *p_ub,      \
                                       ST *p_stride, ST incr, ST chunk) {      \
    (void)loc, (void)gtid;                                                     \
    int64_t lb = (int64_t)*p_lb, ub = (int64_t)*p_ub, stride;                  \
    static_init(sched, p_last, &lb, &ub, &stride, incr, chunk, IS_SIGNED);     \
    *p_lb = (T)lb, *p_ub = (T)ub, *p_stride = (ST)stride;                      \
  }
FLEX_STATIC_INIT(4, int32_t, int32_t, 1)
FLEX_STATIC_INIT(4u, uint32_t, int32_t, 0)
FLEX_STATIC_INIT(8, int64_t, int64_t, 1)
FLEX_STATIC_INIT(8u, uint64_t, int64_t, 0)

void __kmpc_for_static_fini(void *loc, int32_t gtid) { (void)loc, (void)gtid; }
