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

#endif
