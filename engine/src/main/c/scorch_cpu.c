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
 * xt[t, k, i] * wb[j, k - k0]; first starts the sums from 0. With y (the last K block), the finished sums of the task's
 * mb rows and nn weight rows go to y[(rowBase + t * MR + i) * nDim + n0 + j] instead of c.
 */
__attribute__((target("avx2,fma")))
static void kernel_block(const float* xt, int tiles, int kDim, int k0, int kc, const float* wb, int groups, float* c,
                         int mPad, int first, float* y, int rowBase, int mb, int nDim, int n0, int nn) {
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
      // The last block goes through a tile in L1 into y, row by row: weight row r's sum for x row i at tile[r * MR + i].
      float tile[NR * MR];
      if (y) {
        c0 = tile, c1 = c0 + MR, c2 = c1 + MR, c3 = c2 + MR, c4 = c3 + MR, c5 = c4 + MR;
      }
      _mm256_storeu_ps(c0, a00); _mm256_storeu_ps(c0 + 8, a01);
      _mm256_storeu_ps(c1, a10); _mm256_storeu_ps(c1 + 8, a11);
      _mm256_storeu_ps(c2, a20); _mm256_storeu_ps(c2 + 8, a21);
      _mm256_storeu_ps(c3, a30); _mm256_storeu_ps(c3 + 8, a31);
      _mm256_storeu_ps(c4, a40); _mm256_storeu_ps(c4 + 8, a41);
      _mm256_storeu_ps(c5, a50); _mm256_storeu_ps(c5 + 8, a51);
      if (y) {
        int rows = mb - t * MR < MR ? mb - t * MR : MR;
        int cols = nn - g * NR < NR ? nn - g * NR : NR;
        for (int i = 0; i < rows; i++) {
          float* yr = y + (size_t)(rowBase + t * MR + i) * nDim + n0 + g * NR;
          for (int r = 0; r < cols; r++) {
            yr[r] = c0[r * MR + i];
          }
        }
      }
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
    jint groups, jfloatArray c, jint mPad, jboolean first, jfloatArray y, jint rowBase, jint mb, jint nDim, jint n0, jint nn) {
  (void)cls;
  float* pxt = (*env)->GetPrimitiveArrayCritical(env, xt, NULL);
  float* pwb = pxt ? (*env)->GetPrimitiveArrayCritical(env, wb, NULL) : NULL;
  float* pc = pwb ? (*env)->GetPrimitiveArrayCritical(env, c, NULL) : NULL;
  float* py = pc && y ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  if (pc && (py || !y)) {
    kernel_block(pxt + xtOff, tiles, kDim, k0, kc, pwb, groups, pc, mPad, first, py, rowBase, mb, nDim, n0, nn);
  }
  /* c and y are written (mode 0 copies back where the VM gave a copy); xt and wb are only read. */
  if (py) (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  if (pc) (*env)->ReleasePrimitiveArrayCritical(env, c, pc, 0);
  if (pwb) (*env)->ReleasePrimitiveArrayCritical(env, wb, pwb, JNI_ABORT);
  if (pxt) (*env)->ReleasePrimitiveArrayCritical(env, xt, pxt, JNI_ABORT);
}
