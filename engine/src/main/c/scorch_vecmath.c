/*
 * VecMath's per-element kernels of prefill in C with AVX-512, through JNI (NativeVecMath): the log-sum-exp of a row of
 * logits and SwiGLU's silu(g) * u. The same operations in the same order as the Java code on 16-lane vectors, so the
 * same bits; and no Vector API objects, which JDK 17's compiler leaves on the heap (hundreds of bytes a token there).
 */
#include <immintrin.h>
#include <jni.h>
#include <math.h>

#include "scorch_exp.h"
#include "scorch_jni.h"

/*
 * VecMath.logSumExp's max and sum over x[0 .. n): the max of all (exact in any order), then e^(x - max) summed lane-wise
 * in double (each vector's lanes 0-7 into s0, 8-15 into s1, a partial last vector's missing lanes 0), the lanes then
 * added in index order, s0's before s1's. Returns 0 where the max is NaN or infinite (the Java side then takes the
 * reference loop), else 1 with out[0] = max, out[1] = sum.
 */
__attribute__((target("avx512f")))
static int log_sum_exp(const float* x, int n, double* out) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  int k = 0;
  for (; k + 16 <= n; k += 16) {
    __m512 v = _mm512_loadu_ps(x + k);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    mv = _mm512_max_ps(mv, v);
  }
  float max = _mm512_reduce_max_ps(mv);
  for (; k < n; k++) {
    nan |= x[k] != x[k];
    max = x[k] > max ? x[k] : max;
  }
  if (nan || isinf(max)) {
    return 0;
  }
  __m512 vm = _mm512_set1_ps(max);
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (k = 0; k + 16 <= n; k += 16) {
    __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + k), vm));
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  if (k < n) {
    __mmask16 m = (__mmask16)((1u << (n - k)) - 1);
    __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), vm)));
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  double l0[8] __attribute__((aligned(64))), l1[8] __attribute__((aligned(64)));
  _mm512_store_pd(l0, s0);
  _mm512_store_pd(l1, s1);
  double sum = 0;
  for (int i = 0; i < 8; i++) sum += l0[i];
  for (int i = 0; i < 8; i++) sum += l1[i];
  out[0] = max;
  out[1] = sum;
  return 1;
}

/* VecMath.siluMul's lanes: z = e^-|g|, sigmoid = (g < 0 ? z : 1) / (1 + z), g * sigmoid * u. */
__attribute__((target("avx512f"), always_inline))
static inline __m512 silu_mul16(__m512 g, __m512 u) {
  __m512 z = exp512(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(g), _mm512_set1_epi32((int)0x80000000)))); /* -|g| */
  __m512 onePlusZ = _mm512_add_ps(z, _mm512_set1_ps(1.0f));
  __m512 s = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_ps(1.0f), z);
  return _mm512_mul_ps(_mm512_mul_ps(g, _mm512_div_ps(s, onePlusZ)), u);
}

__attribute__((target("avx512f")))
static void silu_mul(float* g, const float* u, int n) {
  int k = 0;
  for (; k + 16 <= n; k += 16) {
    _mm512_storeu_ps(g + k, silu_mul16(_mm512_loadu_ps(g + k), _mm512_loadu_ps(u + k)));
  }
  if (k < n) {
    __mmask16 m = (__mmask16)((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(g + k, m, silu_mul16(_mm512_maskz_loadu_ps(m, g + k), _mm512_maskz_loadu_ps(m, u + k)));
  }
}

/* NativeVecMath.logSumExp0: bounds checked by the Java side. */
JNIEXPORT jint JNICALL Java_dev_scorch_engine_kernels_NativeVecMath_logSumExp0(
    JNIEnv* env, jclass cls, jfloatArray x, jint off, jint n, jdoubleArray out) {
  (void)cls;
  double r[2];
  float* px = (*env)->GetPrimitiveArrayCritical(env, x, NULL);
  if (!px) {
    scorch_unpinned(env, "cannot pin x");
    return 0;
  }
  int ok = log_sum_exp(px + off, n, r);
  (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
  if (ok) (*env)->SetDoubleArrayRegion(env, out, 0, 2, r);
  return ok;
}

/* NativeVecMath.siluMul0: bounds checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeVecMath_siluMul0(
    JNIEnv* env, jclass cls, jfloatArray g, jfloatArray u, jint off, jint n) {
  (void)cls;
  float* pg = (*env)->GetPrimitiveArrayCritical(env, g, NULL);
  float* pu = pg ? (*env)->GetPrimitiveArrayCritical(env, u, NULL) : NULL;
  if (pu) {
    silu_mul(pg + off, pu + off, n);
    (*env)->ReleasePrimitiveArrayCritical(env, u, pu, JNI_ABORT);
  }
  if (pg) (*env)->ReleasePrimitiveArrayCritical(env, g, pg, 0);
  if (!pu) {
    scorch_unpinned(env, pg ? "cannot pin u" : "cannot pin g");
  }
}
