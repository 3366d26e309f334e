/*
 * VecMath.exp in AVX-512, shared by scorch_attention.c and scorch_vecmath.c: the same operations in the same order as
 * the Java vector code, so the same bits.
 */
#ifndef SCORCH_EXP_H
#define SCORCH_EXP_H
#include <immintrin.h>

/*
 * VecMath.exp, op for op: e^x for x <= 0 within about 1e-7 relative, x below -87 taken as -87; NaN stays NaN. One body
 * for both widths: P is the intrinsics' prefix (_mm512, _mm256), V the float vector type, I the integer one.
 * max(-87, x) returns x where x is NaN, as Java's max. 2^n: bits(t) - bits(1.5 * 2^23) + 127 into the exponent field
 * (the Java code multiplies by 2^23: the same bits).
 */
#define SCORCH_EXP(name, target_isa, P, V, I, I_SUFFIX)                                                             \
  __attribute__((target(target_isa), always_inline)) static inline V name(V x) {                                  \
    x = P##_max_ps(P##_set1_ps(-87.0f), x);                                                                      \
    V t = P##_add_ps(P##_mul_ps(x, P##_set1_ps(1.44269504088896341f)), P##_set1_ps(12582912.0f));                \
    V n = P##_sub_ps(t, P##_set1_ps(12582912.0f));                                                               \
    V r = P##_fmadd_ps(n, P##_set1_ps(-0.693359375f), x);                                                        \
    r = P##_fmadd_ps(n, P##_set1_ps(2.12194440e-4f), r);                                                         \
    V p = P##_set1_ps(1.0f / 720);                                                                               \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.0f / 120));                                                             \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.0f / 24));                                                              \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.0f / 6));                                                               \
    p = P##_fmadd_ps(p, r, P##_set1_ps(0.5f));                                                                   \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.0f));                                                                   \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.0f));                                                                   \
    I bits = P##_slli_epi32(P##_sub_epi32(P##_castps_##I_SUFFIX(t), P##_set1_epi32(0x4B400000 - 127)), 23);      \
    return P##_mul_ps(p, P##_cast##I_SUFFIX##_ps(bits));                                                         \
  }

SCORCH_EXP(exp512, "avx512f", _mm512, __m512, __m512i, si512)

/* The same on 8 lanes (AVX2): decode's absorbed attention in scorch_cpu.c. */
SCORCH_EXP(exp256, "avx2,fma", _mm256, __m256, __m256i, si256)

#endif
