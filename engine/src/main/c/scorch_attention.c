/*
 * Causal attention of one head over one sequence in C with AVX-512: CpuOps.VecMath.attendHead's twin, through JNI
 * (NativeAttention). The same arithmetic in the same order, so the same bits as the Java path on 16-lane vectors:
 *  - each raw score q_i . k_j is one FMA chain over d = 0 .. q_head - 1, from 0;
 *  - softmax per query row in fp32: scores times the scale, keys past the row masked to -inf, the max (exact in any
 *    order; NaN if any score is NaN, as Java's max), e^(s - max) by the same polynomial as VecMath.exp, summed lane-wise
 *    with the lanes then added in index order, each e times 1 / sum;
 *  - each output element is one FMA chain p_j . v_j over j = 0 .. i, from 0.
 * Where Java waits on C2's code (bounds checks, the per-row reductions, an FMA latency chain per accumulator), the C
 * compiler keeps the tiles in registers: 8 query rows x 32 keys for the scores, 4 query rows x 64 value dims for p . v.
 * Built with -ffp-contract=off beside scorch_cpu.c: no multiply and add are fused that Java keeps apart.
 */
#include <immintrin.h>
#include <jni.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "scorch_exp.h"
#include "scorch_jni.h"

#define L 16        /* lanes */
#define KBLOCK 32   /* keys per block of kT: two vectors */
#define QTILE 8     /* query rows per score tile */
#define VROWS 4     /* query rows per p . v tile */

/*
 * Raw scores of QTILE query rows (q + qo[r]) against keys [0, jEnd) of kT [blocks][q_head][KBLOCK] into
 * scores[r * stride + j].
 */
__attribute__((target("avx512f")))
static void score_tile(const float* kT, int qHead, const float* q, const size_t* qo, int jEnd, float* scores, int stride) {
  for (int jb = 0; jb < jEnd; jb += KBLOCK) {
    const float* kb = kT + (size_t)jb * qHead;
    __m512 a[QTILE][2];
#pragma GCC unroll 8
    for (int r = 0; r < QTILE; r++) {
      a[r][0] = _mm512_setzero_ps();
      a[r][1] = _mm512_setzero_ps();
    }
    for (int d = 0; d < qHead; d++) {
      __m512 k0 = _mm512_load_ps(kb + (size_t)d * KBLOCK);
      __m512 k1 = _mm512_load_ps(kb + (size_t)d * KBLOCK + L);
#pragma GCC unroll 8
      for (int r = 0; r < QTILE; r++) {
        __m512 v = _mm512_set1_ps(q[qo[r] + d]);
        a[r][0] = _mm512_fmadd_ps(k0, v, a[r][0]);
        a[r][1] = _mm512_fmadd_ps(k1, v, a[r][1]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QTILE; r++) {
      _mm512_store_ps(scores + (size_t)r * stride + jb, a[r][0]);
      _mm512_store_ps(scores + (size_t)r * stride + jb + L, a[r][1]);
    }
  }
}

/*
 * The probabilities of a tile's rows in place: row r (query i0 + r, keys 0 .. i0 + r) at sc + r * stride holds its raw
 * scores in whole vectors. Each row is VecMath's softmax; the rows go through each step together, so that the steps'
 * latency chains (the max's reduction, the in-order sum of a row's 16 lane sums, the division) overlap across rows.
 */
__attribute__((target("avx512f")))
static void softmax_tile(float* sc, int stride, int i0, int rows, float scale) {
  __m512 vscale = _mm512_set1_ps(scale);
  float lanes[QTILE][L] __attribute__((aligned(64))); /* row r's lane sums */
  float inv[QTILE];
  for (int r = 0; r < rows; r++) {
    float* s = sc + (size_t)r * stride;
    int n = i0 + r + 1;
    int nPad = (n + L - 1) / L * L;
    /* Scale; the keys past the row (other rows' keys, padding) masked to -inf; the max, NaN if any score is NaN. */
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (int jb = 0; jb < nPad; jb += L) {
      __m512 v = _mm512_mul_ps(_mm512_load_ps(s + jb), vscale);
      if (jb + L > n) {
        v = _mm512_mask_blend_ps((__mmask16)((1u << (n - jb)) - 1), _mm512_set1_ps(-INFINITY), v);
      }
      _mm512_store_ps(s + jb, v);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      vmax = _mm512_max_ps(vmax, v);
    }
    __m512 vm = _mm512_set1_ps(nan ? NAN : _mm512_reduce_max_ps(vmax));
    /* e^(s - max), summed lane-wise. */
    __m512 vsum = _mm512_setzero_ps();
    for (int jb = 0; jb < nPad; jb += L) {
      __m512 e = exp512(_mm512_sub_ps(_mm512_load_ps(s + jb), vm));
      _mm512_store_ps(s + jb, e);
      vsum = _mm512_add_ps(vsum, e);
    }
    _mm512_store_ps(lanes[r], vsum);
  }
  /* Each row's lanes added in index order from 0, the rows side by side. */
  for (int r = 0; r < rows; r++) {
    inv[r] = 0;
  }
  for (int l = 0; l < L; l++) {
    for (int r = 0; r < rows; r++) {
      inv[r] += lanes[r][l];
    }
  }
  for (int r = 0; r < rows; r++) {
    inv[r] = 1.0f / inv[r];
  }
  /* Each probability e * (1 / sum), keys 0 .. i only: past the row the e are e^-87, whose products would be subnormal
   * (a microcode assist each) and are never read. */
  for (int r = 0; r < rows; r++) {
    float* s = sc + (size_t)r * stride;
    int n = i0 + r + 1;
    __m512 vi = _mm512_set1_ps(inv[r]);
    int jb = 0;
    for (; jb + L <= n; jb += L) {
      _mm512_store_ps(s + jb, _mm512_mul_ps(_mm512_load_ps(s + jb), vi));
    }
    if (jb < n) {
      __mmask16 m = (__mmask16)((1u << (n - jb)) - 1);
      _mm512_mask_store_ps(s + jb, m, _mm512_maskz_mul_ps(m, _mm512_load_ps(s + jb), vi));
    }
  }
}

/*
 * out rows (out + oo[r], NV vectors from dim d0) = sum over j <= i0 + r of p_r[j] v_j for the VROWS rows of a group, v_j
 * at vH + j * vDim. The keys every row sees go through all VROWS x NV accumulators, then each row's chain goes on alone
 * with its own keys past i0.
 */
#define PV_GROUP(NV)                                                                                             \
  __attribute__((target("avx512f"))) static void pv_group_##NV(const float* vH, int vDim, int d0, const float* p,   \
                                                                int pStride, int i0, float* out, const size_t* oo) { \
    __m512 a[VROWS][NV];                                                                                         \
    _Pragma("GCC unroll 4") for (int r = 0; r < VROWS; r++) {                                                    \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) a[r][v] = _mm512_setzero_ps();                         \
    }                                                                                                            \
    const float* vj = vH + d0;                                                                                   \
    for (int j = 0; j <= i0; j++, vj += vDim) {                                                                  \
      __m512 x[NV];                                                                                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) x[v] = _mm512_loadu_ps(vj + v * L);                   \
      _Pragma("GCC unroll 4") for (int r = 0; r < VROWS; r++) {                                                  \
        __m512 w = _mm512_set1_ps(p[(size_t)r * pStride + j]);                                                   \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) a[r][v] = _mm512_fmadd_ps(x[v], w, a[r][v]);         \
      }                                                                                                          \
    }                                                                                                            \
    _Pragma("GCC unroll 4") for (int r = 0; r < VROWS; r++) {                                                    \
      for (int j = i0 + 1; j <= i0 + r; j++) {                                                                   \
        __m512 w = _mm512_set1_ps(p[(size_t)r * pStride + j]);                                                   \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) a[r][v] =                                           \
            _mm512_fmadd_ps(_mm512_loadu_ps(vH + (size_t)j * vDim + d0 + v * L), w, a[r][v]);                    \
      }                                                                                                          \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) _mm512_storeu_ps(out + oo[r] + d0 + v * L, a[r][v]);   \
    }                                                                                                            \
  }
PV_GROUP(4)
PV_GROUP(3)
PV_GROUP(2)
PV_GROUP(1)

/* One row alone (the last rows of a sequence that fill no group): its FMA chains over j = 0 .. i, a vector at a time. */
__attribute__((target("avx512f")))
static void pv_row(const float* vH, int vDim, const float* p, int i, float* out) {
  for (int d0 = 0; d0 < vDim; d0 += L) {
    __m512 a = _mm512_setzero_ps();
    for (int j = 0; j <= i; j++) {
      a = _mm512_fmadd_ps(_mm512_loadu_ps(vH + (size_t)j * vDim + d0), _mm512_set1_ps(p[j]), a);
    }
    _mm512_storeu_ps(out + d0, a);
  }
}

/*
 * Head h of the sequence whose rows are base .. base + len - 1 (see NativeAttention.attendHead): q [T, heads, q_head],
 * kv [rows from kvRow0, heads, qk_nope + v_head], kPe [T, qk_rope], out [T, heads, v_head]. scratch (64-byte aligned)
 * holds kT [lenPad / KBLOCK][q_head][KBLOCK], vH [len][v_head] and the scores [QTILE][lenPad].
 */
__attribute__((target("avx512f")))
static void attend_head(const float* q, const float* kv, const float* kPe, int heads, int qkNope, int qkRope, int vDim,
                        int base, int len, int kvRow0, float scale, int h, float* out, float* scratch) {
  int qHead = qkNope + qkRope;
  int kvHead = qkNope + vDim;
  int lenPad = (len + KBLOCK - 1) / KBLOCK * KBLOCK;
  float* kT = scratch;
  float* vH = kT + (size_t)qHead * lenPad;
  float* scores = vH + ((size_t)len * vDim + L - 1) / L * L;
  /* Keys transposed block by block, padding keys 0; values contiguous. */
  memset(kT + (size_t)(len / KBLOCK) * qHead * KBLOCK, 0, sizeof(float) * (size_t)(lenPad - len / KBLOCK * KBLOCK) * qHead);
  for (int j = 0; j < len; j++) {
    const float* k = kv + ((size_t)(base + j - kvRow0) * heads + h) * kvHead;
    const float* pe = kPe + (size_t)(base + j) * qkRope;
    float* t = kT + (size_t)(j / KBLOCK) * qHead * KBLOCK + j % KBLOCK;
    for (int d = 0; d < qkNope; d++) t[(size_t)d * KBLOCK] = k[d];
    for (int d = 0; d < qkRope; d++) t[(size_t)(qkNope + d) * KBLOCK] = pe[d];
    memcpy(vH + (size_t)j * vDim, k + qkNope, sizeof(float) * vDim);
  }
  size_t qStride = (size_t)heads * qHead;
  for (int i0 = 0; i0 < len; i0 += QTILE) {
    int rows = len - i0 < QTILE ? len - i0 : QTILE;
    size_t qo[QTILE];
    for (int r = 0; r < QTILE; r++) {
      /* A partial tile repeats its last row (scored, never used). */
      qo[r] = ((size_t)(base + i0) * heads + h) * qHead + (size_t)(r < rows ? r : rows - 1) * qStride;
    }
    int jEnd = (i0 + rows + KBLOCK - 1) / KBLOCK * KBLOCK;
    score_tile(kT, qHead, q, qo, jEnd, scores, lenPad);
    softmax_tile(scores, lenPad, i0, rows, scale);
    int r = 0;
    for (; r + VROWS <= rows; r += VROWS) {
      size_t oo[VROWS];
      for (int g = 0; g < VROWS; g++) {
        oo[g] = ((size_t)(base + i0 + r + g) * heads + h) * vDim;
      }
      const float* p = scores + (size_t)r * lenPad;
      int d0 = 0;
      for (; d0 + 4 * L <= vDim; d0 += 4 * L) pv_group_4(vH, vDim, d0, p, lenPad, i0 + r, out, oo);
      switch ((vDim - d0) / L) {
        case 3: pv_group_3(vH, vDim, d0, p, lenPad, i0 + r, out, oo); break;
        case 2: pv_group_2(vH, vDim, d0, p, lenPad, i0 + r, out, oo); break;
        case 1: pv_group_1(vH, vDim, d0, p, lenPad, i0 + r, out, oo); break;
        default: break;
      }
    }
    for (; r < rows; r++) {
      pv_row(vH, vDim, scores + (size_t)r * lenPad, i0 + r, out + ((size_t)(base + i0 + r) * heads + h) * vDim);
    }
  }
}

/* NativeAttention.attendHead0: bounds and shapes checked by the Java side (v_head a multiple of 16, scratch large enough). */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeAttention_attendHead0(
    JNIEnv* env, jclass cls, jfloatArray q, jfloatArray kv, jfloatArray kPe, jint heads, jint qkNope, jint qkRope,
    jint vHead, jint base, jint len, jint kvRow0, jfloat scale, jint h, jfloatArray out, jobject scratch) {
  (void)cls;
  float* ps = scorch_address(env, scratch, "scratch is not a direct buffer");
  if (!ps) {
    return;
  }
  float* pq = (*env)->GetPrimitiveArrayCritical(env, q, NULL);
  float* pkv = pq ? (*env)->GetPrimitiveArrayCritical(env, kv, NULL) : NULL;
  float* ppe = pkv ? (*env)->GetPrimitiveArrayCritical(env, kPe, NULL) : NULL;
  float* po = ppe ? (*env)->GetPrimitiveArrayCritical(env, out, NULL) : NULL;
  if (po) {
    attend_head(pq, pkv, ppe, heads, qkNope, qkRope, vHead, base, len, kvRow0, scale, h, po, ps);
    (*env)->ReleasePrimitiveArrayCritical(env, out, po, 0);
  }
  if (ppe) (*env)->ReleasePrimitiveArrayCritical(env, kPe, ppe, JNI_ABORT);
  if (pkv) (*env)->ReleasePrimitiveArrayCritical(env, kv, pkv, JNI_ABORT);
  if (pq) (*env)->ReleasePrimitiveArrayCritical(env, q, pq, JNI_ABORT);
  if (!po) {
    scorch_unpinned(env, !pq ? "cannot pin q" : !pkv ? "cannot pin kv" : !ppe ? "cannot pin k_pe" : "cannot pin out");
  }
}
