/*===- FlexInternal.h - the mark of the runtime's internal functions ------===*
 *
 * Functions one file of the runtime calls in another are hidden: the
 * library exports only what the compiled code and the Python side
 * (backend/blas.py) call.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_FLEXINTERNAL_H
#define FLEX_RUNTIME_FLEXINTERNAL_H

#define FLEX_RUNTIME_INTERNAL __attribute__((visibility("hidden")))

#include <stdint.h>

/* FlexGuard.c: abandons the calling thread's guarded call (longjmp) when it
 * can; returns otherwise. */
FLEX_RUNTIME_INTERNAL void flex_guard_allocation_failed(uint64_t bytes);

/* FlexAlloc.c: which calls the heap's kept blocks serve (its banner), and
 * what FlexGuard.c tells it around each compiled call. */
enum { FLEX_HEAP_SCOPE_FUNCTION = 0, FLEX_HEAP_SCOPE_CALL = 1, FLEX_HEAP_SCOPE_PROCESS = 2 };
FLEX_RUNTIME_INTERNAL void flex_heap_call_begins(const void *fn);
FLEX_RUNTIME_INTERNAL void flex_heap_call_ended(void);

#endif
