/*===- FlexThreads.h - the runtime's products split between threads -------===*
 *
 * What the few-row products (Gemv/FlexGemv.c) and the quantized-weight
 * products (Quant/FlexQuant.c) share to run on several threads: how many
 * threads a product gets, and the split of its output units (weight rows,
 * packed column blocks) between them, run on libgomp's workers (torch's)
 * where the process has libgomp, else on pthreads started per call
 * (FlexThreads.c). Internal to the library (hidden visibility).
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_FLEXTHREADS_H
#define FLEX_RUNTIME_FLEXTHREADS_H

#include "FlexInternal.h"

#include <stdint.h>

/* The most threads a product runs on. */
enum { FLEX_THREADS_MAX = 16 };

/* The work of one thread: units [n0, n1) of the product `ctx`. */
typedef void (*FlexThreadsWork)(const void *ctx, int64_t n0, int64_t n1);

/* How many threads a product reading `weight_elements` weight elements
 * runs on: 1 below FlexThreads.c's MIN_PARALLEL, else this process's CPUs
 * (at most FLEX_THREADS_MAX), no more than libgomp's omp_get_max_threads()
 * (torch's thread count) where the process has libgomp. */
FLEX_RUNTIME_INTERNAL int flex_threads_for(int64_t weight_elements);

/* Splits units [0, units) in groups of `group` (a thread's first unit is a
 * multiple of `group`; the last thread's share may end inside a group)
 * between at most `threads` threads (no more than there are groups) as
 * evenly as whole groups go, and runs `work` on each share; returns when
 * all are done. */
FLEX_RUNTIME_INTERNAL void flex_threads_run(FlexThreadsWork work, const void *ctx,
                                            int64_t units, int64_t group, int threads);

#endif
