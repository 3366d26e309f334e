/*
 * Scorch's CPU micro-kernel in C, for PackedGemm through JNI: the same 2 x 6 register tile as the Java kernel
 * (16 rows of x in two 8-float vectors, times 6 broadcast weight rows, 12 accumulators), the same fused
 * multiply-add chain per output over k in order, so its bits are the Java kernel's. The C compiler schedules the
 * loop without the spills and the scalar address work C2 leaves in it. Built by build.sh (engine's
 * generate-resources phase) for x86-64 Linux; the kernel is compiled for AVX2 + FMA and runs only where
 * scorch_cpu_supported says the CPU has both.
 */
#include <immintrin.h>
#include <jni.h>
#include <stddef.h>

/* Rows of x per tile (two 8-lane vectors) and weight rows per tile, as PackedGemm's MR and NR. */
#define MR 16
#define NR 6

/*
 * One K block of one row task: for every tile t of x^T (xt: tile t at t * kDim * MR, input k at k * MR) and every
 * group g of NR decoded weight rows (wb: row j at j * kc), c[j * mPad + t * MR + i] (+)= sum over k0 <= k < k0 + kc of
 * xt[t, k, i] * wb[j, k - k0]; first starts the sums from 0.
 */
__attribute__((target("avx2,fma")))
static void kernel_block(const float* xt, int tiles, int kDim, int k0, int kc, const float* wb, int groups, float* c,
                         int mPad, int first) {
  for (int t = 0; t < tiles; t++) {
    const float* x = xt + (size_t)t * kDim * MR + (size_t)k0 * MR;
    for (int g = 0; g < groups; g++) {
      const float* w0 = wb + (size_t)g * NR * kc;
      const float *w1 = w0 + kc, *w2 = w1 + kc, *w3 = w2 + kc, *w4 = w3 + kc, *w5 = w4 + kc;
      float* c0 = c + (size_t)g * NR * mPad + (size_t)t * MR;
      float *c1 = c0 + mPad, *c2 = c1 + mPad, *c3 = c2 + mPad, *c4 = c3 + mPad, *c5 = c4 + mPad;
      __m256 a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51;
      if (first) {
        a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = _mm256_setzero_ps();
      } else {
        a00 = _mm256_loadu_ps(c0); a01 = _mm256_loadu_ps(c0 + 8);
        a10 = _mm256_loadu_ps(c1); a11 = _mm256_loadu_ps(c1 + 8);
        a20 = _mm256_loadu_ps(c2); a21 = _mm256_loadu_ps(c2 + 8);
        a30 = _mm256_loadu_ps(c3); a31 = _mm256_loadu_ps(c3 + 8);
        a40 = _mm256_loadu_ps(c4); a41 = _mm256_loadu_ps(c4 + 8);
        a50 = _mm256_loadu_ps(c5); a51 = _mm256_loadu_ps(c5 + 8);
      }
      for (int k = 0; k < kc; k++) {
        __m256 x0 = _mm256_loadu_ps(x + (size_t)k * MR);
        __m256 x1 = _mm256_loadu_ps(x + (size_t)k * MR + 8);
        __m256 v = _mm256_broadcast_ss(w0 + k);
        a00 = _mm256_fmadd_ps(x0, v, a00); a01 = _mm256_fmadd_ps(x1, v, a01);
        v = _mm256_broadcast_ss(w1 + k);
        a10 = _mm256_fmadd_ps(x0, v, a10); a11 = _mm256_fmadd_ps(x1, v, a11);
        v = _mm256_broadcast_ss(w2 + k);
        a20 = _mm256_fmadd_ps(x0, v, a20); a21 = _mm256_fmadd_ps(x1, v, a21);
        v = _mm256_broadcast_ss(w3 + k);
        a30 = _mm256_fmadd_ps(x0, v, a30); a31 = _mm256_fmadd_ps(x1, v, a31);
        v = _mm256_broadcast_ss(w4 + k);
        a40 = _mm256_fmadd_ps(x0, v, a40); a41 = _mm256_fmadd_ps(x1, v, a41);
        v = _mm256_broadcast_ss(w5 + k);
        a50 = _mm256_fmadd_ps(x0, v, a50); a51 = _mm256_fmadd_ps(x1, v, a51);
      }
      _mm256_storeu_ps(c0, a00); _mm256_storeu_ps(c0 + 8, a01);
      _mm256_storeu_ps(c1, a10); _mm256_storeu_ps(c1 + 8, a11);
      _mm256_storeu_ps(c2, a20); _mm256_storeu_ps(c2 + 8, a21);
      _mm256_storeu_ps(c3, a30); _mm256_storeu_ps(c3 + 8, a31);
      _mm256_storeu_ps(c4, a40); _mm256_storeu_ps(c4 + 8, a41);
      _mm256_storeu_ps(c5, a50); _mm256_storeu_ps(c5 + 8, a51);
    }
  }
}

/* Whether this CPU runs kernel_block (compiled without AVX2 itself, so it is safe to call anywhere). */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_supported(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? JNI_TRUE : JNI_FALSE;
}

/* NativeCpu.kernelBlock0: the arrays' bounds are checked by the Java side before the call. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_kernelBlock0(
    JNIEnv* env, jclass cls, jfloatArray xt, jint xtOff, jint tiles, jint kDim, jint k0, jint kc, jfloatArray wb,
    jint groups, jfloatArray c, jint mPad, jboolean first) {
  (void)cls;
  float* pxt = (*env)->GetPrimitiveArrayCritical(env, xt, NULL);
  float* pwb = pxt ? (*env)->GetPrimitiveArrayCritical(env, wb, NULL) : NULL;
  float* pc = pwb ? (*env)->GetPrimitiveArrayCritical(env, c, NULL) : NULL;
  if (pc) {
    kernel_block(pxt + xtOff, tiles, kDim, k0, kc, pwb, groups, pc, mPad, first);
  }
  /* c is written (mode 0 copies back where the VM gave a copy); xt and wb are only read. */
  if (pc) (*env)->ReleasePrimitiveArrayCritical(env, c, pc, 0);
  if (pwb) (*env)->ReleasePrimitiveArrayCritical(env, wb, pwb, JNI_ABORT);
  if (pxt) (*env)->ReleasePrimitiveArrayCritical(env, xt, pxt, JNI_ABORT);
}
