/*
 * VecMath.exp in AVX-512, shared by scorch_attention.c and scorch_vecmath.c: the same operations in the same order as
 * the Java vector code, so the same bits.
 */
#ifndef SCORCH_EXP_H
#define SCORCH_EXP_H
#include <immintrin.h>

/* VecMath.exp, op for op: e^x for x <= 0 within about 1e-7 relative, x below -87 taken as -87; NaN stays NaN. */
__attribute__((target("avx512f"), always_inline))
static inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x); /* max(-87, x) returns x where x is NaN, as Java's max */
  __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(12582912.0f));
  __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(12582912.0f));
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  /* 2^n: bits(t) - bits(1.5 * 2^23) + 127 into the exponent field (the Java code multiplies by 2^23: the same bits). */
  __m512i bits = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000 - 127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

/* The same on 8 lanes (AVX2): decode's absorbed attention in scorch_cpu.c. */
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 exp256(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
  __m256 t = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _mm256_set1_ps(12582912.0f));
  __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(12582912.0f));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i bits = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000 - 127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

#endif
