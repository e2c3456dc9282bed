/*===- FlexGuard.c - a compiled call that survives a failed allocation ----===*
 *
 * The compiled code does not test what memref.alloc returns: a NULL from
 * the heap (FlexAlloc.c) would be written through and the process would die
 * of SIGSEGV. The Python side therefore calls a compiled function through
 * flex_guarded_call, which marks the calling thread: when an allocation of
 * that thread fails, the heap jumps back here (longjmp) and the call
 * returns the size it could not get; the caller raises a MemoryError
 * (backend/jit.py: FlexMemoryError) and the process goes on.
 *
 * A jump is taken only from the thread that made the call and only outside
 * a parallel region (omp_in_parallel() false): a region's other threads
 * would be left inside it. An allocation failing inside a region, or on a
 * worker thread, still returns NULL after naming its size on stderr. The
 * blocks the call had allocated before the failure are not freed (the
 * compiled code's own frames are gone): a failure leaks them once.
 * Around each call it tells the heap which function runs, and when the
 * call is over (FlexAlloc.c: which calls its kept blocks serve).
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdint.h>

#include "FlexInternal.h"

typedef struct {
  jmp_buf env;
  uint64_t failed_bytes;
} Guard;

static __thread Guard *t_guard;

/* Runs the packed wrapper `fn(args)` of a compiled function. Returns 0, or
 * the size of the allocation that failed (then `fn` did not finish). */
int64_t flex_guarded_call(void (*fn)(void *), void *args) {
  Guard guard;
  Guard *outer = t_guard;
  guard.failed_bytes = 0;
  flex_heap_call_begins((const void *)fn);
  t_guard = &guard;
  if (setjmp(guard.env) == 0)
    fn(args);
  t_guard = outer;
  flex_heap_call_ended();
  return guard.failed_bytes ? (int64_t)guard.failed_bytes : 0;
}

static int in_parallel_region(void) {
  static int (*omp_in_parallel)(void);
  static int looked;
  if (!looked) {
    omp_in_parallel = (int (*)(void))dlsym(RTLD_DEFAULT, "omp_in_parallel");
    looked = 1;
  }
  return omp_in_parallel ? omp_in_parallel() : 0;
}

/* Called by the heap when an allocation of `bytes` failed: returns only when
 * the failure cannot be turned into an error of the call. */
FLEX_RUNTIME_INTERNAL void flex_guard_allocation_failed(uint64_t bytes) {
  Guard *guard = t_guard;
  if (!guard || in_parallel_region())
    return;
  guard->failed_bytes = bytes ? bytes : 1;
  t_guard = 0;
  longjmp(guard->env, 1);
}
