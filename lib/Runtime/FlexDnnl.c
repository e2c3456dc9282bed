/*===- FlexDnnl.c - bf16 and f32 products on oneDNN's matmul primitive ---===*
 *
 * oneDNN (the `onednn-cpu-gomp` wheel, loaded by backend/blas.py) runs bf16
 * products with AVX512-BF16 or AMX instructions, where MKL's
 * cblas_gemm_bf16bf16f32 reached 0.2-0.6 of that rate, and f32 products
 * with AVX-512 where torch's MKL picks its AVX2 kernel on AMD hosts
 * (docs/dense-ops.md). Each dtype is enabled on its own
 * (flex_runtime_dnnl_use), as backend/blas.py chooses per host.
 * Only its C API is used, through function pointers handed over by
 * flex_runtime_set_dnnl in the order of `Fn` below; the few types and
 * constants of that API are declared here.
 *
 * A matmul primitive is created once per (input type, shape, strides,
 * output type, accumulation) and kept in a small table; each call wraps
 * the caller's pointers in memory objects and executes it on a stream of
 * its thread.
 * Accumulation (C += A B) is oneDNN's "sum" post-op; a bf16 C is rounded
 * once, from the f32 accumulator, by the primitive itself.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexDnnl.h"

#include <pthread.h>
#include <string.h>

typedef void *Handle; /* engine, stream, memory desc, attr, pd, primitive */
typedef int64_t Dims[12]; /* dnnl_dims_t */
typedef struct {
  int arg;
  Handle memory;
} ExecArg; /* dnnl_exec_arg_t */

enum { DNNL_SUCCESS = 0, DNNL_CPU = 1, DNNL_STREAM_IN_ORDER = 1 };
enum { DT_UNDEF = 0, DT_BF16 = 2, DT_F32 = 3 };
enum { ARG_SRC = 1, ARG_DST = 17, ARG_WEIGHTS = 33 };
enum { QUERY_IMPL_INFO_STR = 8 };

/* The functions handed over, in this order. */
typedef enum {
  ENGINE_CREATE,
  STREAM_CREATE,
  MD_CREATE_WITH_STRIDES,
  MD_DESTROY,
  ATTR_CREATE,
  ATTR_DESTROY,
  POST_OPS_CREATE,
  POST_OPS_DESTROY,
  POST_OPS_APPEND_SUM,
  ATTR_SET_POST_OPS,
  MATMUL_PD_CREATE,
  PD_QUERY,
  PD_DESTROY,
  PRIMITIVE_CREATE,
  MEMORY_CREATE,
  MEMORY_DESTROY,
  PRIMITIVE_EXECUTE,
  STREAM_WAIT,
  NUM_FNS
} Fn;

static struct {
  int (*engine_create)(Handle *, int, size_t);
  int (*stream_create)(Handle *, Handle, unsigned);
  int (*md_create_with_strides)(Handle *, int, const int64_t *, int,
                                const int64_t *);
  int (*md_destroy)(Handle);
  int (*attr_create)(Handle *);
  int (*attr_destroy)(Handle);
  int (*post_ops_create)(Handle *);
  int (*post_ops_destroy)(Handle);
  int (*post_ops_append_sum)(Handle, float, int32_t, int);
  int (*attr_set_post_ops)(Handle, Handle);
  int (*matmul_pd_create)(Handle *, Handle, Handle, Handle, Handle, Handle,
                          Handle);
  int (*pd_query)(Handle, int, int, void *);
  int (*pd_destroy)(Handle);
  int (*primitive_create)(Handle *, Handle);
  int (*memory_create)(Handle *, Handle, Handle, void *);
  int (*memory_destroy)(Handle);
  int (*primitive_execute)(Handle, Handle, int, const ExecArg *);
  int (*stream_wait)(Handle);
} api;

static Handle g_engine;
static int g_ready;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread Handle t_stream;
/* Products run on oneDNN, by input type (0: f32, 1: bf16), for tests. */
static int64_t g_products[2];
/* Whether oneDNN runs the products of each input type (0: f32, 1: bf16). */
static int g_use[2];

int64_t flex_runtime_dnnl_products(void) {
  return __atomic_load_n(&g_products[0], __ATOMIC_RELAXED) +
         __atomic_load_n(&g_products[1], __ATOMIC_RELAXED);
}

int64_t flex_runtime_dnnl_products_of(int in_bf16) {
  return __atomic_load_n(&g_products[in_bf16 != 0], __ATOMIC_RELAXED);
}

/* Which input types oneDNN runs from now on (once handed over); the
 * others go to the BLAS. None until the first call. */
void flex_runtime_dnnl_use(int f32, int bf16) {
  __atomic_store_n(&g_use[0], f32 != 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_use[1], bf16 != 0, __ATOMIC_RELAXED);
}

int flex_runtime_dnnl_uses(int in_bf16) {
  return g_ready && __atomic_load_n(&g_use[in_bf16 != 0], __ATOMIC_RELAXED);
}

/* Returns 1 when every function is there and a CPU engine was created. */
int flex_runtime_set_dnnl(void *const *fns, int n) {
  if (n != NUM_FNS)
    return 0;
  for (int i = 0; i < n; ++i)
    if (!fns[i])
      return 0;
  memcpy(&api, fns, sizeof(api));
  if (!g_engine && api.engine_create(&g_engine, DNNL_CPU, 0) != DNNL_SUCCESS)
    return 0;
  g_ready = 1;
  return 1;
}

/* One cached primitive: the key is the product's description. A NULL
 * primitive records that oneDNN declined it (the BLAS runs it). */
enum { KEY_LEN = 16, CACHE_SIZE = 512 };
typedef struct {
  int64_t key[KEY_LEN];
  Handle primitive, md[3];
} Entry;
static Entry g_cache[CACHE_SIZE];
static int g_entries;

/* A [batch, R, S] operand: dims and strides for oneDNN, with the strides of
 * unit dims set to the operand's extent and a zero batch stride (one matrix
 * for every batch) as a batch dim of 1. Returns 0 when oneDNN's plain
 * layouts cannot describe it: no unit stride in the matrix, or an overlap. */
static int layout(int64_t batch, int64_t R, int64_t S, int64_t sb,
                  int64_t s0, int64_t s1, int64_t *dims, int64_t *strides) {
  int64_t d[3] = {sb == 0 ? 1 : batch, R, S}, st[3] = {sb, s0, s1};
  int64_t extent = 1;
  for (int i = 0; i < 3; ++i) {
    if (d[i] == 1)
      continue;
    if (st[i] <= 0)
      return 0;
    if (d[i] * st[i] > extent)
      extent = d[i] * st[i];
  }
  for (int i = 0; i < 3; ++i)
    if (d[i] == 1)
      st[i] = extent;
  if (st[1] != 1 && st[2] != 1)
    return 0;
  memcpy(dims, d, sizeof(d));
  memcpy(strides, st, sizeof(st));
  return 1;
}

static Handle create(const int64_t *key, Handle *md) {
  Dims dims[3], strides[3];
  memset(dims, 0, sizeof(dims));
  memset(strides, 0, sizeof(strides));
  int64_t batch = key[0], M = key[1], N = key[2], K = key[3];
  if (!layout(batch, M, K, key[4], key[5], key[6], dims[0], strides[0]) ||
      !layout(batch, K, N, key[7], key[8], key[9], dims[1], strides[1]) ||
      !layout(batch, M, N, key[10], key[11], key[12], dims[2], strides[2]) ||
      dims[2][0] != batch)
    return NULL;
  int in = key[15] ? DT_BF16 : DT_F32;
  int types[3] = {in, in, key[13] ? DT_BF16 : DT_F32};
  for (int i = 0; i < 3; ++i)
    if (api.md_create_with_strides(&md[i], 3, dims[i], types[i],
                                   strides[i]) != DNNL_SUCCESS)
      return NULL;
  Handle attr = NULL, post_ops = NULL, pd = NULL, primitive = NULL;
  if (key[14]) {
    if (api.attr_create(&attr) != DNNL_SUCCESS)
      return NULL;
    if (api.post_ops_create(&post_ops) == DNNL_SUCCESS &&
        api.post_ops_append_sum(post_ops, 1.0f, 0, DT_UNDEF) == DNNL_SUCCESS)
      api.attr_set_post_ops(attr, post_ops);
  }
  if (api.matmul_pd_create(&pd, g_engine, md[0], md[1], NULL, md[2], attr) ==
      DNNL_SUCCESS) {
    /* The reference implementation runs scalar loops: the BLAS is faster. */
    const char *impl = NULL;
    if (api.pd_query(pd, QUERY_IMPL_INFO_STR, 0, &impl) == DNNL_SUCCESS &&
        impl && strncmp(impl, "ref", 3) != 0)
      api.primitive_create(&primitive, pd);
    api.pd_destroy(pd);
  }
  if (post_ops)
    api.post_ops_destroy(post_ops);
  if (attr)
    api.attr_destroy(attr);
  return primitive;
}

/* The cached primitive of `key` (created on first use), or NULL. */
static Entry *lookup(const int64_t *key) {
  pthread_mutex_lock(&g_lock);
  Entry *e = NULL;
  for (int i = 0; i < g_entries && !e; ++i)
    if (!memcmp(g_cache[i].key, key, sizeof(g_cache[i].key)))
      e = &g_cache[i];
  if (!e && g_entries < CACHE_SIZE) {
    e = &g_cache[g_entries];
    memset(e, 0, sizeof(*e));
    memcpy(e->key, key, sizeof(e->key));
    e->primitive = create(key, e->md);
    ++g_entries;
  }
  pthread_mutex_unlock(&g_lock);
  return e;
}

int flex_dnnl_product(int in_bf16, int64_t batch, int64_t M, int64_t N,
                      int64_t K, const void *a, int64_t sab, int64_t sam,
                      int64_t sak, const void *b, int64_t sbb, int64_t sbk,
                      int64_t sbn, void *c, int64_t scb, int64_t scm,
                      int64_t scn, int out_bf16, int accumulate) {
  in_bf16 = in_bf16 != 0;
  if (!flex_runtime_dnnl_uses(in_bf16) || batch <= 0 || M <= 0 || N <= 0 ||
      K <= 0 || (!in_bf16 && out_bf16))
    return 0;
  int64_t key[KEY_LEN] = {batch, M,   N,   K,   sab, sam,      sak,
                          sbb,   sbk, sbn, scb, scm, scn, out_bf16 != 0,
                          accumulate != 0, in_bf16};
  Entry *e = lookup(key);
  if (!e || !e->primitive)
    return 0;
  if (!t_stream &&
      api.stream_create(&t_stream, g_engine, DNNL_STREAM_IN_ORDER) !=
          DNNL_SUCCESS)
    return 0;
  Handle mem[3] = {NULL, NULL, NULL};
  void *ptrs[3] = {(void *)a, (void *)b, c};
  int ok = 1;
  for (int i = 0; i < 3 && ok; ++i)
    ok = api.memory_create(&mem[i], e->md[i], g_engine, ptrs[i]) ==
         DNNL_SUCCESS;
  if (ok) {
    ExecArg args[3] = {
        {ARG_SRC, mem[0]}, {ARG_WEIGHTS, mem[1]}, {ARG_DST, mem[2]}};
    ok = api.primitive_execute(e->primitive, t_stream, 3, args) ==
             DNNL_SUCCESS &&
         api.stream_wait(t_stream) == DNNL_SUCCESS;
  }
  for (int i = 0; i < 3; ++i)
    if (mem[i])
      api.memory_destroy(mem[i]);
  if (ok)
    __atomic_fetch_add(&g_products[in_bf16], 1, __ATOMIC_RELAXED);
  return ok;
}
