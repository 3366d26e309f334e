/* What scorch_cpu.c shares with scorch_bf16.c. */
#ifndef SCORCH_CPU_H
#define SCORCH_CPU_H
#include <immintrin.h>
#include <stdint.h>

/* x^T of one tile of mr rows (see scorch_cpu.c): xt[k * mr + r] = x[r * stride + k] for k < kDim, r < rows; 0 past rows. */
void scorch_transpose_tile(const float* x, int rows, int stride, int kDim, int mr, float* xt);

/* Decode's bf16-parts row-dot (scorch_bf16.c): x split into P parts of pairs, then BF16 weight rows by VDPBF16PS. */
void scorch_split_pairs(const float* x, int m, int kDim, int P, int32_t* xp);
void scorch_rowdot_bf16_pairs(const unsigned char* w, int kDim, int rows, const int32_t* xp, int P, int m, float* y,
                              int nDim);

/* Eight lanes as Lanes.foldTree adds them. */
__attribute__((target("avx2,fma")))
static inline float rowdot_fold8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)); /* lanes i + 4 onto i */
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                         /* i + 2 onto i */
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));                                     /* 1 onto 0 */
  return _mm_cvtss_f32(s);
}

/* Sixteen lanes as Lanes.foldTree adds them: i + 8 onto i, then rowdot_fold8. */
__attribute__((target("avx512f,avx2,fma")))
static inline float rowdot_fold16(__m512 a) {
  __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
  return rowdot_fold8(_mm256_add_ps(_mm512_castps512_ps256(a), high));
}
#endif
