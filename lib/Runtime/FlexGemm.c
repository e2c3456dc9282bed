/*===- FlexGemm.c - the BLAS runtime of flex-matmul-to-blas --------------===*
 *
 * flex_gemm_f32 / flex_gemm_bf16: C[b] (+)= A[b] * B[b] for b < batch, each
 * operand given as (aligned pointer as an integer, element offset, batch
 * stride, row stride, column stride) in elements, as the pass passes them.
 * The products run on a BLAS whose functions the Python side hands over once
 * (flex_runtime_set_blas, backend/blas.py):
 *   sgemm:                  Fortran/column-major f32 GEMM (LP64 ints);
 *   cblas_gemm_bf16bf16f32: bf16 x bf16 -> f32 GEMM (CBLAS, LP64 ints).
 * Each matrix is described to the column-major BLAS as an R x S operand
 * with element (r, s) at r * s0 + s * s1: 'N' when s0 == 1, 'T' when
 * s1 == 1, else it is first copied into a packed buffer. A row-major C
 * (column stride 1) is computed as C^T = B^T A^T. A bf16 C is computed in a
 * f32 buffer and rounded (to nearest even) into place. Where oneDNN was
 * handed over and enabled for the input type (FlexDnnl.c: bf16 on a CPU
 * with AVX512-BF16 or AMX, f32 on one with AVX-512), the products run on
 * it and only those it declines reach the BLAS. Products of up to
 * FLEX_GEMV_MAX_ROWS rows by a matrix with contiguous rows run on
 * Gemv/FlexGemv.c (f32 and bf16, on the kernels of the CPU's ISA), and so
 * do products of up to SKINNY_MAX_ROWS rows by a weight too large for the
 * cache, a few rows at a time.
 *
 *===----------------------------------------------------------------------===*/
#include "FlexBf16.h"
#include "FlexDnnl.h"
#include "Gemv/FlexGemv.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *,
                         const int *, const float *, const float *, const int *,
                         const float *, const int *, const float *, float *,
                         const int *);
typedef void (*bf16_gemm_fn)(int, int, int, int, int, int, float,
                             const uint16_t *, int, const uint16_t *, int,
                             float, float *, int);

static sgemm_fn g_sgemm;
static bf16_gemm_fn g_bf16_gemm;

enum { ACCUMULATE = 1, OUTPUT_BF16 = 2 };
/* C through an f32 buffer: in column panels of about this many elements. */
enum { PANEL_ELEMENTS = 1 << 20, PANEL_MIN_COLUMNS = 64 };
enum { CBLAS_COL_MAJOR = 102, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* Status: 0 ok; set when a product was asked for without a BLAS. */
static volatile int g_missing_blas;

void flex_runtime_set_blas(void *sgemm, void *bf16_gemm) {
  g_sgemm = (sgemm_fn)sgemm;
  g_bf16_gemm = (bf16_gemm_fn)bf16_gemm;
}

int flex_runtime_missing_blas(void) { return g_missing_blas; }

/* An R x S operand of a column-major BLAS call. */
typedef struct {
  const void *data;
  int trans; /* 0: 'N', 1: 'T' */
  int ld;
  void *packed; /* owned copy, when the strides fit neither form */
} Operand;

/* Describes the R x S matrix at `p` (element size `es`) with strides
 * (s0, s1); packs it (column-major, ld = R) when neither form fits. */
static Operand describe(const char *p, int64_t R, int64_t S, int64_t s0,
                        int64_t s1, size_t es) {
  Operand o = {p, 0, 1, NULL};
  int64_t minR = R > 1 ? R : 1, minS = S > 1 ? S : 1;
  /* 'N': element (r, s) at r + s * ld. The stride of a unit dim is free. */
  if ((R == 1 || s0 == 1) && (S == 1 || s1 >= minR)) {
    o.ld = (int)(S == 1 ? minR : s1);
    return o;
  }
  /* 'T': the S x R matrix X, X(s, r) at s + r * ld, transposed. */
  if ((S == 1 || s1 == 1) && (R == 1 || s0 >= minS)) {
    o.trans = 1;
    o.ld = (int)(R == 1 ? minS : s0);
    return o;
  }
  char *q = malloc((size_t)(R * S) * es + 1);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t r = 0; r < R; ++r)
      memcpy(q + (size_t)(r + s * R) * es, p + (size_t)(r * s0 + s * s1) * es,
             es);
  o.data = q;
  o.packed = q;
  o.ld = (int)minR;
  return o;
}

/* One product in column-major terms: Cc (M x N, ld ldc) = op(P) (M x K) *
 * op(Q) (K x N) (+ Cc). */
static void gemm(int bf16, int64_t M, int64_t N, int64_t K, Operand P,
                 Operand Q, float *Cc, int ldc, int accumulate) {
  int m = (int)M, n = (int)N, k = (int)K;
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  if (bf16) {
    g_bf16_gemm(CBLAS_COL_MAJOR, P.trans ? CBLAS_TRANS : CBLAS_NO_TRANS,
                Q.trans ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n, k, alpha,
                P.data, P.ld, Q.data, Q.ld, beta, Cc, ldc);
  } else {
    const char *ta = P.trans ? "T" : "N", *tb = Q.trans ? "T" : "N";
    g_sgemm(ta, tb, &m, &n, &k, &alpha, P.data, &P.ld, Q.data, &Q.ld, &beta,
            Cc, &ldc);
  }
}

/* f32 -> bf16 of n contiguous elements (written for the auto-vectorizer). */
static void round_row(uint16_t *restrict out, const float *restrict in,
                      int64_t n) {
  for (int64_t x = 0; x < n; ++x) {
    uint32_t u;
    memcpy(&u, &in[x], 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x40u;
    out[x] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

/* Copies between C (M x N at c, strides (scm, scn), f32 or bf16) and the
 * f32 buffer tmp: column-major M x N, or row-major when `rowMajor`. */
static void convert(char *c, int64_t scm, int64_t scn, int out_bf16,
                    float *tmp, int64_t M, int64_t N, int rowMajor, int toC) {
  size_t esc = out_bf16 ? 2 : 4;
  int64_t outer = rowMajor ? M : N, inner = rowMajor ? N : M;
  if (toC && out_bf16 && (rowMajor ? scn : scm) == 1) { /* contiguous rows */
    for (int64_t o = 0; o < outer; ++o)
      round_row((uint16_t *)(c + (size_t)(o * (rowMajor ? scm : scn)) * esc),
                tmp + o * inner, inner);
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t x = 0; x < inner; ++x) {
      int64_t i = rowMajor ? o : x, j = rowMajor ? x : o;
      char *elt = c + (size_t)(i * scm + j * scn) * esc;
      float *t = tmp + o * inner + x;
      if (toC) {
        if (out_bf16)
          *(uint16_t *)elt = flex_f32_to_bf16(*t);
        else
          *(float *)elt = *t;
      } else {
        *t = out_bf16 ? flex_bf16_to_f32(*(const uint16_t *)elt) : *(const float *)elt;
      }
    }
}

/* C (M x N at c, strides (scm, scn), f32 or bf16) (+)= A (M x K) * B (K x N).
 */
static void product(int bf16, int64_t M, int64_t N, int64_t K, const char *a,
                    int64_t sam, int64_t sak, const char *b, int64_t sbk,
                    int64_t sbn, char *c, int64_t scm, int64_t scn,
                    int flags) {
  size_t es = bf16 ? 2 : 4;
  int accumulate = flags & ACCUMULATE;
  int out_bf16 = flags & OUTPUT_BF16;
  if (M <= 0 || N <= 0)
    return;
  /* The f32 matrix the BLAS writes: C itself when it is f32 with a unit
   * stride, else a buffer (below). */
  float *Cc = NULL;
  int ldc = 0, transposed = 0;
  float *tmp = NULL;
  int64_t minM = M > 1 ? M : 1, minN = N > 1 ? N : 1;
  if (!out_bf16 && (M == 1 || scm == 1) && (N == 1 || scn >= minM)) {
    Cc = (float *)c, ldc = (int)(N == 1 ? minM : scn);
  } else if (!out_bf16 && (N == 1 || scn == 1) && (M == 1 || scm >= minN)) {
    Cc = (float *)c, ldc = (int)(M == 1 ? minN : scm);
    transposed = 1;
  } else if (M * N > PANEL_ELEMENTS && N > PANEL_MIN_COLUMNS) {
    /* Through an f32 buffer: column panels of C, so that the buffer stays
     * a few MiB (in cache, and reused from the heap instead of a fresh
     * mmap to fault in at every call: Qwen2's bf16 logits at S=1024 took
     * a 622 MB buffer). Each panel reads all of A and its columns of B. */
    int64_t nb = PANEL_ELEMENTS / M;
    if (nb < PANEL_MIN_COLUMNS)
      nb = PANEL_MIN_COLUMNS;
    size_t esc = out_bf16 ? 2 : 4;
    for (int64_t j = 0; j < N; j += nb)
      product(bf16, M, N - j < nb ? N - j : nb, K, a, sam, sak,
              b + (size_t)(j * sbn) * es, sbk, sbn,
              c + (size_t)(j * scn) * esc, scm, scn, flags);
    return;
  } else {
    /* A bf16 (or strided) C: an f32 buffer laid out along C's contiguous
     * dimension, so that filling and converting it walk both in order (a
     * row-major bf16 C of 128 x 151936 was written column by column). */
    tmp = malloc((size_t)(M * N) * sizeof(float));
    transposed = scn == 1 && scm != 1;
    Cc = tmp, ldc = (int)(transposed ? N : M);
    if (accumulate)
      convert(c, scm, scn, out_bf16, tmp, M, N, transposed, /*toC=*/0);
  }
  if (K <= 0) {
    if (!accumulate) {
      if (transposed) {
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j)
            Cc[j + i * (int64_t)ldc] = 0.0f;
      } else {
        for (int64_t j = 0; j < N; ++j)
          for (int64_t i = 0; i < M; ++i)
            Cc[i + j * (int64_t)ldc] = 0.0f;
      }
    }
  } else if (transposed) { /* C^T (N x M) = B^T (N x K) * A^T (K x M) */
    Operand P = describe(b, N, K, sbn, sbk, es);
    Operand Q = describe(a, K, M, sak, sam, es);
    gemm(bf16, N, M, K, P, Q, Cc, ldc, accumulate);
    free(P.packed), free(Q.packed);
  } else {
    Operand P = describe(a, M, K, sam, sak, es);
    Operand Q = describe(b, K, N, sbk, sbn, es);
    gemm(bf16, M, N, K, P, Q, Cc, ldc, accumulate);
    free(P.packed), free(Q.packed);
  }
  if (tmp) {
    convert(c, scm, scn, out_bf16, tmp, M, N, transposed, /*toC=*/1);
    free(tmp);
  }
}

/* Products of up to SKINNY_MAX_ROWS rows by a weight of at least
 * SKINNY_MIN_WEIGHT_BYTES run on the few-row kernels too, FLEX_GEMV_MAX_ROWS
 * rows at a time: the weight is read ceil(M / 4) times from memory, which
 * is still far less than the BLAS takes for such a skinny product (it packs
 * the whole weight at every call: Qwen2's 896 x 151936 f32 LM head over 8
 * rows of a continuous-batching step took as long as 16 of its weight's
 * passes). Weights that stay in cache go to the BLAS. */
enum { SKINNY_MAX_ROWS = 16 };
static const int64_t SKINNY_MIN_WEIGHT_BYTES = 8 << 20;

/* One batch entry on the few-row kernels, in chunks of FLEX_GEMV_MAX_ROWS
 * rows. Returns 0 when the kernel declined the first chunk (nothing
 * written); a later chunk it declines runs on the BLAS. */
static int few_rows_entry(int bf16, int64_t M, int64_t N, int64_t K,
                          const char *a, int64_t sam, int64_t sak,
                          const char *b, int64_t sbk, int64_t sbn, char *c,
                          int64_t scm, int64_t scn, int64_t flags) {
  size_t es = bf16 ? 2 : 4, esc = (flags & OUTPUT_BF16) ? 2 : 4;
  for (int64_t m0 = 0; m0 < M; m0 += FLEX_GEMV_MAX_ROWS) {
    int64_t rows = M - m0 < FLEX_GEMV_MAX_ROWS ? M - m0 : FLEX_GEMV_MAX_ROWS;
    const char *am = a + (size_t)(m0 * sam) * es;
    char *cm = c + (size_t)(m0 * scm) * esc;
    int ran = bf16 ? flex_gemv_bf16(rows, N, K, (const uint16_t *)am, sam,
                                    sak, (const uint16_t *)b, sbn, cm, scm,
                                    scn, (flags & OUTPUT_BF16) != 0,
                                    flags & ACCUMULATE)
                   : flex_gemv_f32(rows, N, K, (const float *)am, sam, sak,
                                   (const float *)b, sbn, (float *)cm, scm,
                                   scn, flags & ACCUMULATE);
    if (!ran) {
      if (m0 == 0)
        return 0;
      product(bf16, M - m0, N, K, am, sam, sak, b, sbk, sbn, cm, scm, scn,
              (int)flags);
      return 1;
    }
  }
  return 1;
}

static void batched(int bf16, int64_t batch, int64_t M, int64_t N, int64_t K,
                    int64_t pa, int64_t oa, int64_t sab, int64_t sam,
                    int64_t sak, int64_t pb, int64_t ob, int64_t sbb,
                    int64_t sbk, int64_t sbn, int64_t pc, int64_t oc,
                    int64_t scb, int64_t scm, int64_t scn, int64_t flags) {
  size_t es = bf16 ? 2 : 4, esc = (flags & OUTPUT_BF16) ? 2 : 4;
  /* A few rows times a weight with contiguous rows (a token, or one per
   * sequence of a decode batch, through a linear layer) run on
   * Gemv/FlexGemv.c, f32 and bf16 on every CPU (never on the BLAS's
   * one-thread GEMV). oneDNN (where enabled for the input type: bf16 with
   * bf16 dot products, f32 with AVX-512) or the BLAS runs the others, and a
   * batch entry the kernel declines (so that no entry is computed, or
   * accumulated into C, twice). */
  int skinny = M <= SKINNY_MAX_ROWS &&
               N * K * (int64_t)es >= SKINNY_MIN_WEIGHT_BYTES;
  int few_rows = (M <= FLEX_GEMV_MAX_ROWS || skinny) && sbk == 1 &&
                 (bf16 || !(flags & OUTPUT_BF16));
  /* Batch entry i's operands: a + i * sa, b + i * sb, c + i * sc (bytes). */
  const char *a = (const char *)pa + (size_t)oa * es;
  const char *b = (const char *)pb + (size_t)ob * es;
  char *c = (char *)pc + (size_t)oc * esc;
  size_t sa = (size_t)sab * es, sb = (size_t)sbb * es, sc = (size_t)scb * esc;
  int64_t done = 0;
  for (; few_rows && done < batch; ++done, a += sa, b += sb, c += sc)
    if (!few_rows_entry(bf16, M, N, K, a, sam, sak, b, sbk, sbn, c, scm, scn,
                        flags))
      break;
  batch -= done;
  if (batch == 0)
    return;
  if (flex_dnnl_product(bf16, batch, M, N, K, a, sab, sam, sak, b, sbb, sbk,
                        sbn, c, scb, scm, scn, (flags & OUTPUT_BF16) != 0,
                        flags & ACCUMULATE))
    return;
  if (bf16 ? !g_bf16_gemm : !g_sgemm) {
    g_missing_blas = 1;
    return;
  }
  for (int64_t i = 0; i < batch; ++i, a += sa, b += sb, c += sc)
    product(bf16, M, N, K, a, sam, sak, b, sbk, sbn, c, scm, scn, (int)flags);
}

void flex_gemm_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t pa,
                   int64_t oa, int64_t sab, int64_t sam, int64_t sak,
                   int64_t pb, int64_t ob, int64_t sbb, int64_t sbk,
                   int64_t sbn, int64_t pc, int64_t oc, int64_t scb,
                   int64_t scm, int64_t scn, int64_t flags) {
  batched(0, batch, M, N, K, pa, oa, sab, sam, sak, pb, ob, sbb, sbk, sbn, pc,
          oc, scb, scm, scn, flags);
}

void flex_gemm_bf16(int64_t batch, int64_t M, int64_t N, int64_t K,
                    int64_t pa, int64_t oa, int64_t sab, int64_t sam,
                    int64_t sak, int64_t pb, int64_t ob, int64_t sbb,
                    int64_t sbk, int64_t sbn, int64_t pc, int64_t oc,
                    int64_t scb, int64_t scm, int64_t scn, int64_t flags) {
  batched(1, batch, M, N, K, pa, oa, sab, sam, sak, pb, ob, sbb, sbk, sbn, pc,
          oc, scb, scm, scn, flags);
}
