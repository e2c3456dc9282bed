/*===- FlexAlloc.c - the compiled code's heap, with large blocks kept -----===*
 *
 * The tiled pipelines lower memref.alloc / dealloc to calls of these
 * functions (finalize-memref-to-llvm's use-generic-functions). A model's
 * temporaries are large (an MLP activation of 2048 x 4096 floats is 32 MiB)
 * and glibc maps and unmaps such blocks on every call, so each call paid
 * for faulting in and zeroing their pages again (14% of a bf16 block's
 * forward was the kernel's page-fault path). Blocks of at least
 * KEEP_MIN_BYTES are kept on free, up to a bound, and handed out again to
 * an allocation of the same size (a model allocates the same sizes every
 * call), or of another size when none of that size is kept (take: grown
 * or cut to it); the least recently kept go first when the bound is
 * reached (at most SLOTS blocks are kept). The
 * bound is $FLEX_ALLOC_CACHE_MB (default 1024; 0 keeps nothing), read once.
 * Such blocks are mapped and unmapped here (mmap), not taken from glibc: a
 * block freed past the bound goes back to the kernel at once, where glibc,
 * whose mmap threshold rises (up to 32 MiB) with each large block it
 * unmaps, kept blocks below it in its heap, resident and unused while a
 * later allocation holds the heap's top (test_runtime_heap_bound.py).
 *
 * Which calls a kept block serves ($FLEX_ALLOC_CACHE_SCOPE, read once;
 * flex_runtime_set_heap_scope): "process" (default): any call. "function":
 * the next call of the compiled function that freed it (the function whose
 * call ran, or ran last, at the free: flex_guarded_call tells the heap,
 * FlexGuard.c); a call of another function first gives the kept blocks
 * back to the kernel. "call": nothing is kept past the call that freed it
 * (a call's own later allocations reuse its blocks). The narrower scopes
 * hold less between calls and fault more: on the 4-layer Llama's training
 * step (forward and backward in turn), "function" peaked 180 MiB lower
 * than "process" with exact sizes only, but its step took 40% more CPU
 * time (125k page faults per step, each about 2 us on the Zen 5 host);
 * reusing blocks across sizes (take) got lower at the default's speed.
 *
 * Every block carries a header before the pointer returned, so free knows
 * its size; pointers are aligned to at least 64 bytes.
 *
 * The compiled code does not test what it gets: a failed allocation would
 * be a write through NULL. When malloc fails, the kept blocks are given back
 * and it is tried once more; failing again, the call is abandoned if it can
 * be (FlexGuard.c: the caller raises a MemoryError), else the size is
 * written to stderr before NULL is returned (the process then dies of
 * SIGSEGV, but says why).
 * Temporaries larger than the process can have are refused before the call
 * (python/torch_mlir_flex/backend/shapes.py): a FlexMemoryError naming
 * their shape.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* mremap */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "FlexInternal.h"

enum { HEADER = 64, KEEP_MIN_BYTES = 1 << 18, SPLIT_MIN_BYTES = 1 << 16, SLOTS = 256 };
static const uint64_t MAGIC = 0x666c6578616c6c63ull; /* "flexallc" */
/* A result's block (flex_runtime_result_alloc): not the compiled code's
 * temporary, not counted in its live bytes. */
static const uint64_t MAGIC_RESULT = 0x666c657872736c74ull; /* "flexrslt" */

typedef struct {
  void *base;     /* what malloc returned */
  uint64_t bytes; /* what was asked of malloc */
  uint64_t magic;
} Header;

typedef struct {
  void *base;
  uint64_t bytes;
  uint64_t stamp; /* when it was kept: the smallest goes first */
} Kept;

/* Blocks of KEEP_MIN_BYTES and more (page multiples) are mappings of
 * their own; smaller ones are malloc's. */
static void *map_block(uint64_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void unmap_block(void *base, uint64_t bytes) {
  if (bytes >= KEEP_MIN_BYTES)
    munmap(base, bytes);
  else
    free(base);
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Kept g_kept[SLOTS];
static int g_nkept;
static uint64_t g_kept_bytes, g_stamp;
static int64_t g_bound = -1; /* bytes; -1: not read yet */
/* FLEX_HEAP_SCOPE_*; -1: not read yet. The compiled function whose call
 * runs or ran last (its packed wrapper's address). */
static int g_scope = -1;
static const void *g_current;
/* Bytes of the blocks handed out and not freed yet, and their peak since
 * the last reset (tests: what a call holds at once). */
static int64_t g_live, g_live_peak;

static void count_live(int64_t delta) {
  int64_t now = __atomic_add_fetch(&g_live, delta, __ATOMIC_RELAXED);
  int64_t peak = __atomic_load_n(&g_live_peak, __ATOMIC_RELAXED);
  while (now > peak &&
         !__atomic_compare_exchange_n(&g_live_peak, &peak, now, 1,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

static int64_t bound(void) {
  if (g_bound < 0) {
    const char *env = getenv("FLEX_ALLOC_CACHE_MB");
    long mb = env && *env ? atol(env) : 1024;
    g_bound = (mb > 0 ? (int64_t)mb : 0) << 20;
  }
  return g_bound;
}

static int scope(void) {
  int sc = __atomic_load_n(&g_scope, __ATOMIC_RELAXED);
  if (sc < 0) {
    const char *env = getenv("FLEX_ALLOC_CACHE_SCOPE");
    sc = FLEX_HEAP_SCOPE_PROCESS;
    if (env && !strcmp(env, "call"))
      sc = FLEX_HEAP_SCOPE_CALL;
    else if (env && !strcmp(env, "function"))
      sc = FLEX_HEAP_SCOPE_FUNCTION;
    __atomic_store_n(&g_scope, sc, __ATOMIC_RELAXED);
  }
  return sc;
}

/* A kept block for an allocation of `*bytes` (a page multiple), removed
 * from the list, or NULL when none is kept. One of exactly that size
 * first; else the largest smaller one, grown to `*bytes` (mremap: its
 * pages move along, only the new ones are faulted in); else the smallest
 * larger one, its pages past `*bytes` given back to the kernel (munmap of
 * the tail; kept whole when the tail is under SPLIT_MIN_BYTES, and
 * `*bytes` becomes its size). A block of another size is thus reused
 * instead of lying unused beside a new mapping, as glibc's heap serves any
 * size from what was freed: a training step's forward and backward
 * allocate different sizes, and the backward peaked with 113-126 MiB of
 * the forward's blocks kept unused beside it (issue #42). Growing a
 * smaller block before cutting a larger one: cut blocks were grown again
 * in the next call, 120k page faults per step of the 4-layer Llama against
 * 60k (docs/runtime.md, "The compiled code's heap"). */
static void keep(void *base, uint64_t bytes);

static void *take(uint64_t *bytes) {
  uint64_t want = *bytes;
  int exact = -1, larger = -1, smaller = -1;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nkept && exact < 0; ++i) {
    uint64_t b = g_kept[i].bytes;
    if (b == want)
      exact = i;
    else if (b > want && (larger < 0 || b < g_kept[larger].bytes))
      larger = i;
    else if (b < want && (smaller < 0 || b > g_kept[smaller].bytes))
      smaller = i;
  }
  int pick = exact >= 0 ? exact : smaller >= 0 ? smaller : larger;
  if (pick < 0) {
    pthread_mutex_unlock(&g_lock);
    return NULL;
  }
  Kept k = g_kept[pick];
  g_kept_bytes -= k.bytes;
  g_kept[pick] = g_kept[--g_nkept];
  pthread_mutex_unlock(&g_lock);
  if (k.bytes > want) {
    uint64_t tail = k.bytes - want;
    if (tail >= SPLIT_MIN_BYTES)
      munmap((char *)k.base + want, tail);
    else
      *bytes = k.bytes;
    return k.base;
  }
  if (k.bytes < want) {
    void *p = mremap(k.base, k.bytes, want, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) {
      munmap(k.base, k.bytes);
      return NULL;
    }
    return p;
  }
  return k.base;
}

/* Keeps `base` (of `bytes`) or frees it; frees the oldest kept blocks to
 * stay within the bound. */
static void keep(void *base, uint64_t bytes) {
  Kept evicted[SLOTS + 1];
  int nev = 0;
  pthread_mutex_lock(&g_lock);
  int64_t limit = bound();
  if ((int64_t)bytes > limit) {
    evicted[nev++] = (Kept){base, bytes, 0};
  } else {
    while (g_nkept > 0 &&
           (g_nkept == SLOTS || (int64_t)(g_kept_bytes + bytes) > limit)) {
      int oldest = 0;
      for (int i = 1; i < g_nkept; ++i)
        if (g_kept[i].stamp < g_kept[oldest].stamp)
          oldest = i;
      evicted[nev++] = g_kept[oldest];
      g_kept_bytes -= g_kept[oldest].bytes;
      g_kept[oldest] = g_kept[--g_nkept];
    }
    g_kept[g_nkept++] = (Kept){base, bytes, ++g_stamp};
    g_kept_bytes += bytes;
  }
  pthread_mutex_unlock(&g_lock);
  for (int i = 0; i < nev; ++i)
    unmap_block(evicted[i].base, evicted[i].bytes);
}

void flex_runtime_release_memory(void);

static void *allocate(uint64_t size, uint64_t alignment, uint64_t magic) {
  if (alignment < HEADER)
    alignment = HEADER;
  uint64_t bytes = size + alignment + HEADER;
  if (bytes >= KEEP_MIN_BYTES) /* page multiples: more sizes match */
    bytes = (bytes + 4095) & ~(uint64_t)4095;
  int wrapped = bytes <= size; /* a size near 2^64 (garbage) */
  int mapped = bytes >= KEEP_MIN_BYTES;
  void *base = !wrapped && mapped ? take(&bytes) : NULL;
  if (!base && !wrapped)
    base = mapped ? map_block(bytes) : malloc(bytes);
  if (!base && !wrapped) {
    flex_runtime_release_memory();
    base = mapped ? map_block(bytes) : malloc(bytes);
  }
  if (!base) {
    flex_guard_allocation_failed(size);
    fprintf(stderr,
            "torch_mlir_flex runtime: cannot allocate %" PRIu64
            " bytes (%.1f GB)\n",
            size, (double)size / 1e9);
    return NULL;
  }
  uintptr_t p = ((uintptr_t)base + HEADER + alignment - 1) & ~(uintptr_t)(alignment - 1);
  Header h = {base, bytes, magic};
  memcpy((char *)p - sizeof(Header), &h, sizeof(Header));
  if (magic == MAGIC)
    count_live((int64_t)bytes);
  return (void *)p;
}

void *_mlir_memref_to_llvm_alloc(uint64_t size) { return allocate(size, 0, MAGIC); }

void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  /* alignment is a power of two (memref.alloc's attribute) */
  return allocate(size, alignment, MAGIC);
}

/* A block for a call's result (backend/out_heap.py), freed with
 * _mlir_memref_to_llvm_free: the same kept blocks as the compiled code's. */
void *flex_runtime_result_alloc(uint64_t alignment, uint64_t size) {
  return allocate(size, alignment, MAGIC_RESULT);
}

void _mlir_memref_to_llvm_free(void *p) {
  if (!p)
    return;
  Header h;
  memcpy(&h, (char *)p - sizeof(Header), sizeof(Header));
  if (h.magic != MAGIC && h.magic != MAGIC_RESULT) { /* not one of ours: malloc's, then */
    free(p);
    return;
  }
  memset((char *)p - sizeof(Header), 0, sizeof(Header));
  if (h.magic == MAGIC)
    count_live(-(int64_t)h.bytes);
  if (h.bytes >= KEEP_MIN_BYTES) /* kept, or unmapped when over the bound */
    keep(h.base, h.bytes);
  else
    free(h.base);
}

/* FlexGuard.c, before a compiled call of `fn` runs: with the "function"
 * scope, a call of another function than the last one frees the kept
 * blocks (all of them came from other functions' calls). */
FLEX_RUNTIME_INTERNAL void flex_heap_call_begins(const void *fn) {
  int other = __atomic_exchange_n(&g_current, fn, __ATOMIC_RELAXED) != fn;
  if (other && scope() != FLEX_HEAP_SCOPE_PROCESS)
    flex_runtime_release_memory();
}

/* FlexGuard.c, after a compiled call: with the "call" scope, its kept
 * blocks go back to the kernel. */
FLEX_RUNTIME_INTERNAL void flex_heap_call_ended(void) {
  if (scope() == FLEX_HEAP_SCOPE_CALL)
    flex_runtime_release_memory();
}

/* Sets the scope (a FLEX_HEAP_SCOPE_* value; others: unchanged) and returns
 * the one then in effect (backend/blas.py: heap_scope). Kept blocks are
 * freed on a change. */
int flex_runtime_set_heap_scope(int sc) {
  int old = scope();
  if (sc >= FLEX_HEAP_SCOPE_FUNCTION && sc <= FLEX_HEAP_SCOPE_PROCESS && sc != old) {
    __atomic_store_n(&g_scope, sc, __ATOMIC_RELAXED);
    flex_runtime_release_memory();
    return sc;
  }
  return old;
}

/* Frees every kept block (torch_mlir_flex.backend.blas.release_memory). */
void flex_runtime_release_memory(void) {
  Kept all[SLOTS];
  int n = 0;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nkept; ++i)
    all[n++] = g_kept[i];
  g_nkept = 0;
  g_kept_bytes = 0;
  pthread_mutex_unlock(&g_lock);
  for (int i = 0; i < n; ++i)
    unmap_block(all[i].base, all[i].bytes);
}

/* Bytes held in kept blocks (tests). */
int64_t flex_runtime_kept_bytes(void) {
  pthread_mutex_lock(&g_lock);
  int64_t b = (int64_t)g_kept_bytes;
  pthread_mutex_unlock(&g_lock);
  return b;
}

/* The peak of the bytes held by the compiled code's live allocations since
 * the last reset; `reset` restarts it from what is live now (tests). */
int64_t flex_runtime_live_peak_bytes(int reset) {
  int64_t peak = __atomic_load_n(&g_live_peak, __ATOMIC_RELAXED);
  if (reset)
    __atomic_store_n(&g_live_peak, __atomic_load_n(&g_live, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
  return peak;
}
