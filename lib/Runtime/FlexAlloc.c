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
 * call); the least recently kept go first when the bound is reached. The
 * bound is $FLEX_ALLOC_CACHE_MB (default 1024; 0 keeps nothing), read once.
 * Such blocks are mapped and unmapped here (mmap), not taken from glibc: a
 * block freed past the bound goes back to the kernel at once, where glibc,
 * whose mmap threshold rises (up to 32 MiB) with each large block it
 * unmaps, kept blocks below it in its heap, resident and unused while a
 * later allocation holds the heap's top (test_runtime_heap_bound.py).
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
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "FlexInternal.h"

enum { HEADER = 64, KEEP_MIN_BYTES = 1 << 18, SLOTS = 64 };
static const uint64_t MAGIC = 0x666c6578616c6c63ull; /* "flexallc" */

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

/* A kept block of exactly `bytes`, removed from the list, or NULL. */
static void *take(uint64_t bytes) {
  void *p = NULL;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nkept; ++i)
    if (g_kept[i].bytes == bytes) {
      p = g_kept[i].base;
      g_kept_bytes -= bytes;
      g_kept[i] = g_kept[--g_nkept];
      break;
    }
  pthread_mutex_unlock(&g_lock);
  return p;
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

static void *allocate(uint64_t size, uint64_t alignment) {
  if (alignment < HEADER)
    alignment = HEADER;
  uint64_t bytes = size + alignment + HEADER;
  if (bytes >= KEEP_MIN_BYTES) /* page multiples: more sizes match */
    bytes = (bytes + 4095) & ~(uint64_t)4095;
  int wrapped = bytes <= size; /* a size near 2^64 (garbage) */
  int mapped = bytes >= KEEP_MIN_BYTES;
  void *base = !wrapped && mapped ? take(bytes) : NULL;
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
  Header h = {base, bytes, MAGIC};
  memcpy((char *)p - sizeof(Header), &h, sizeof(Header));
  count_live((int64_t)bytes);
  return (void *)p;
}

void *_mlir_memref_to_llvm_alloc(uint64_t size) { return allocate(size, 0); }

void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  /* alignment is a power of two (memref.alloc's attribute) */
  return allocate(size, alignment);
}

void _mlir_memref_to_llvm_free(void *p) {
  if (!p)
    return;
  Header h;
  memcpy(&h, (char *)p - sizeof(Header), sizeof(Header));
  if (h.magic != MAGIC) { /* not one of ours: malloc's, then */
    free(p);
    return;
  }
  memset((char *)p - sizeof(Header), 0, sizeof(Header));
  count_live(-(int64_t)h.bytes);
  if (h.bytes >= KEEP_MIN_BYTES) /* kept, or unmapped when over the bound */
    keep(h.base, h.bytes);
  else
    free(h.base);
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
