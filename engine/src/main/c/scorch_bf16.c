/*
 * PackedGemm's K blocks on AVX512-BF16 (VDPBF16PS): each instruction multiplies 16 pairs of bf16 values and adds both
 * products to 16 fp32 sums. A bf16 weight (a BF16 checkpoint's, or a decoded FP8/INT4 value that bf16 holds exactly)
 * times an fp32 input split into bf16 parts, x = x1 + x2 + x3 (each the bf16 rounding of what the parts before it
 * left), gives x * w as three exact products: accumulated in fp32, a GEMM as accurate as the fp32 kernel's
 * ("bf16x3"). Two parts carry 16 of x's 24 bits (bf16x2), one part 8 (bf16: the fast mode, with its error).
 *
 * Layout. x is split once per GEMM input, tile by tile, into xs: for tile t (32 rows) and pair p of inputs (2p, 2p + 1),
 * part q, xs[t * kp * P * 32 + (p * P + q) * 32 + i] holds row i's two bf16 values (2p in the low half), kp = pairs per
 * row (an odd K padded with a zero input). The weights stay fp32-decoded as for the fp32 kernel (wb: row j at j * kc),
 * and each kernel call packs its K block's rows into bf16 pairs, broadcast as one 32-bit value. The tile is the fp32
 * kernel's: 32 rows (two vectors) times 12 weight rows, 24 accumulators.
 *
 * A group of 12 weight rows whose K block is not exact in bf16 (an FP8 or INT4 value times a scale with more bits than
 * bf16 holds) runs that block as fp32 FMAs on the fp32 weights and x rebuilt from its parts (x1 + x2 + x3 is x: with
 * three parts, the fp32 kernel's bits for that block). Which groups those are depends only on the weights: the groups
 * start at multiples of 12 rows and the blocks at multiples of KC inputs whatever the thread count, so a row's bits
 * never depend on the threads or its batch mates.
 *
 * Built with the others by build.sh; runs only where bf16_units (below) says the CPU and the OS have AVX512-BF16.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <jni.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scorch_cpu.h"
#include "scorch_jni.h"

/* VDPBF16PS needs a compiler that knows it: GCC 10, clang 9. */
#if (defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10)
#define SCORCH_BF16 1
#else
#define SCORCH_BF16 0
#endif

#define MR 32
#define NR 12
/* The largest K block (PackedGemm.KC) and weight rows of a task (PackedGemm.NB), which size the packed weights. */
#define KC_MAX 256
#define NB_MAX 96

/*
 * What the CPU has, from CPUID: bit 0, AVX512-BF16 usable (AVX-512 F state enabled by the OS, and this build has the
 * kernel); bit 1, AMX-BF16; bit 2, AMX-TILE (reported only: no AMX kernel yet).
 */
static int cpu_units(void) {
  unsigned a, b, c, d;
  int units = 0;
  __builtin_cpu_init();
  if (SCORCH_BF16 && __builtin_cpu_supports("avx512f") && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) {
    units |= 1;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    units |= (d & (1u << 22)) ? 2 : 0;
    units |= (d & (1u << 24)) ? 4 : 0;
  }
  return units;
}

JNIEXPORT jint JNICALL Java_dev_scorch_engine_kernels_NativeCpu_units0(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return cpu_units();
}

#if SCORCH_BF16
/*
 * The bf16 rounding (to nearest, ties to even) of 16 floats, as floats (low halves zero): the same as
 * Bf16Split.round in Java. NaNs stay NaN (quiet); a finite value that would round to infinity is cut instead (bf16's
 * largest finite value is below fp32's).
 */
__attribute__((target("avx512f")))
static inline __m512i bf16_round(__m512i b) {
  const __m512i high = _mm512_set1_epi32((int)0xffff0000u), inf = _mm512_set1_epi32(0x7f800000);
  __m512i mag = _mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff));
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb), high);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, inf);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_and_si512(_mm512_or_si512(b, _mm512_set1_epi32(0x00400000)), high));
  __mmask16 over = _mm512_cmplt_epu32_mask(mag, inf) & _mm512_cmpeq_epi32_mask(_mm512_and_si512(r, inf), inf);
  return _mm512_mask_mov_epi32(r, over, _mm512_and_si512(b, high));
}

/*
 * The parts of 16 floats: part[q] for q < parts (as floats with zero low halves). Past a non-finite x the remainders
 * are 0, so an infinity stays one product.
 */
__attribute__((target("avx512f")))
static inline void bf16_parts(__m512 x, int parts, __m512i* part) {
  __m512i h = bf16_round(_mm512_castps_si512(x));
  part[0] = h;
  __mmask16 finite = _mm512_cmplt_epu32_mask(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)),
                                             _mm512_set1_epi32(0x7f800000));
  __m512 rest = _mm512_maskz_sub_ps(finite, x, _mm512_castsi512_ps(h));
  for (int q = 1; q < parts; q++) {
    h = bf16_round(_mm512_castps_si512(rest));
    part[q] = h;
    rest = _mm512_sub_ps(rest, _mm512_castsi512_ps(h));
  }
}

/* 16 pairs: the low half of each 32-bit lane from even's bf16, the high half from odd's. */
__attribute__((target("avx512f")))
static inline __m512i bf16_pairs(__m512i even, __m512i odd) {
  return _mm512_or_si512(_mm512_srli_epi32(even, 16), _mm512_and_si512(odd, _mm512_set1_epi32((int)0xffff0000u)));
}

/*
 * One tile of xs from rows rows of x (row i at x + i * kDim; rows past rows are zero): 16 inputs at a time transposed
 * through L1, then each pair of inputs split into its parts.
 */
__attribute__((target("avx512f,avx2,fma")))
static void split_tile(const float* x, int rows, int kDim, int parts, int32_t* xs) {
  float xt[16 * MR] __attribute__((aligned(64)));
  for (int k0 = 0; k0 < kDim; k0 += 16) {
    int kn = kDim - k0 < 16 ? kDim - k0 : 16;
    scorch_transpose_tile(x + k0, rows, kDim, kn, MR, xt);
    if (kn & 1) {
      memset(xt + (size_t)kn * MR, 0, MR * sizeof(float));
    }
    for (int p = 0; p < (kn + 1) / 2; p++) {
      int32_t* d = xs + ((size_t)(k0 / 2 + p) * parts) * MR;
      for (int h = 0; h < MR; h += 16) {
        __m512i e[3], o[3];
        bf16_parts(_mm512_load_ps(xt + (size_t)(2 * p) * MR + h), parts, e);
        bf16_parts(_mm512_load_ps(xt + (size_t)(2 * p + 1) * MR + h), parts, o);
        for (int q = 0; q < parts; q++) {
          _mm512_storeu_si512(d + (size_t)q * MR + h, bf16_pairs(e[q], o[q]));
        }
      }
    }
  }
}

/*
 * Rows nn of wb (row j at j * kc, fp32) into bf16 pairs wp (row j at j * pc, pc = (kc + 1) / 2, an odd kc's last pair
 * padded with 0). exact[g] (g a group of NR rows) is 1 where every live row of group g (j < live) is exact in bf16.
 */
__attribute__((target("avx512f")))
static void pack_weights(const float* wb, int rows, int live, int kc, uint32_t* wp, unsigned char* exact) {
  int pc = (kc + 1) / 2;
  const __m512i low = _mm512_set1_epi32(0xffff);
  for (int g = 0; g * NR < rows; g++) {
    exact[g] = 1;
  }
  for (int j = 0; j < rows; j++) {
    const float* w = wb + (size_t)j * kc;
    uint32_t* d = wp + (size_t)j * pc;
    __mmask16 inexact = 0;
    int k = 0;
    for (; k + 32 <= kc; k += 32) {
      __m512i a = _mm512_loadu_si512(w + k), b = _mm512_loadu_si512(w + k + 16);
      inexact |= _mm512_test_epi32_mask(a, low) | _mm512_test_epi32_mask(b, low);
      /* Lane pairs (2i, 2i + 1) of a and b: even halves shifted down, odd halves kept, then 16 lanes to 16 halves. */
      __m512i ha = _mm512_srli_epi32(a, 16), hb = _mm512_srli_epi32(b, 16);
      _mm256_storeu_si256((__m256i*)(d + k / 2), _mm512_cvtepi32_epi16(ha));
      _mm256_storeu_si256((__m256i*)(d + k / 2 + 8), _mm512_cvtepi32_epi16(hb));
    }
    uint32_t bits = 0;
    for (; k < kc; k++) {
      uint32_t v;
      memcpy(&v, w + k, 4);
      bits |= v & 0xffff;
      if (k & 1) {
        d[k / 2] |= v & 0xffff0000u;
      } else {
        d[k / 2] = v >> 16;
      }
    }
    if (j < live && (inexact || bits)) {
      exact[j / NR] = 0;
    }
  }
}

/* The finished sums of one tile and group into y (rows rows, cols weight rows), as tile_to_y in scorch_cpu.c. */
__attribute__((target("avx512f")))
static void sums_to_y(__m512 a[NR][2], int rows, int cols, float* y, size_t rowBase, int nDim, int n0) {
  float tile[NR * MR] __attribute__((aligned(64)));
  for (int r = 0; r < NR; r++) {
    _mm512_store_ps(tile + r * MR, a[r][0]);
    _mm512_store_ps(tile + r * MR + 16, a[r][1]);
  }
  for (int i = 0; i < rows; i++) {
    float* yr = y + (rowBase + i) * nDim + n0;
    for (int r = 0; r < cols; r++) {
      yr[r] = tile[r * MR + i];
    }
  }
}

/*
 * One group of NR packed weight rows (w: row r at r * pc) against one tile's pairs x (pair p, part q at (p * P + q) *
 * MR), P parts, a K block of pc pairs: a[r][h] += the products of each pair, part by part, in order. P is a constant in
 * each of the three copies the compiler makes, so the loops unroll.
 */
__attribute__((target("avx512f,avx512bf16"), always_inline))
static inline void group_bf16(const int32_t* x, int P, const uint32_t* w, int pc, __m512 a[NR][2]) {
  for (int p = 0; p < pc; p++) {
    const int32_t* xp = x + (size_t)p * P * MR;
    for (int q = 0; q < P; q++) {
      __m512bh x0 = (__m512bh)_mm512_loadu_si512(xp + q * MR);
      __m512bh x1 = (__m512bh)_mm512_loadu_si512(xp + q * MR + 16);
#pragma GCC unroll 12
      for (int r = 0; r < NR; r++) {
        __m512bh v = (__m512bh)_mm512_set1_epi32((int)w[(size_t)r * pc + p]);
        a[r][0] = _mm512_dpbf16_ps(a[r][0], x0, v);
        a[r][1] = _mm512_dpbf16_ps(a[r][1], x1, v);
      }
    }
  }
}

/*
 * The same group with fp32 FMAs: x rebuilt from its parts (x1 + x2, + x3), one FMA per input in order against the fp32
 * weights (wb: row r at r * kc), as the fp32 kernel does; an odd kc's padded input is skipped.
 */
__attribute__((target("avx512f")))
static void group_fp32(const int32_t* x, int P, const float* wb, int kc, __m512 a[NR][2]) {
  const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
  for (int k = 0; k < kc; k += 2) {
    const int32_t* xp = x + (size_t)(k / 2) * P * MR;
    __m512 e[2], o[2];
    for (int h = 0; h < 2; h++) {
      __m512i d = _mm512_loadu_si512(xp + 16 * h);
      e[h] = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16));
      o[h] = _mm512_castsi512_ps(_mm512_and_si512(d, high));
      for (int q = 1; q < P; q++) {
        d = _mm512_loadu_si512(xp + q * MR + 16 * h);
        e[h] = _mm512_add_ps(e[h], _mm512_castsi512_ps(_mm512_slli_epi32(d, 16)));
        o[h] = _mm512_add_ps(o[h], _mm512_castsi512_ps(_mm512_and_si512(d, high)));
      }
    }
#pragma GCC unroll 12
    for (int r = 0; r < NR; r++) {
      __m512 v = _mm512_set1_ps(wb[(size_t)r * kc + k]);
      a[r][0] = _mm512_fmadd_ps(e[0], v, a[r][0]);
      a[r][1] = _mm512_fmadd_ps(e[1], v, a[r][1]);
    }
    if (k + 1 < kc) {
#pragma GCC unroll 12
      for (int r = 0; r < NR; r++) {
        __m512 v = _mm512_set1_ps(wb[(size_t)r * kc + k + 1]);
        a[r][0] = _mm512_fmadd_ps(o[0], v, a[r][0]);
        a[r][1] = _mm512_fmadd_ps(o[1], v, a[r][1]);
      }
    }
  }
}

/*
 * One K block of one row task, as kernel_block_512 in scorch_cpu.c (the same c, y and tile arguments) but on xs, P
 * parts a pair: for every tile t and every group g of NR weight rows of wb, the sums of inputs k0 .. k0 + kc.
 */
__attribute__((target("avx512f,avx512bf16")))
static void kernel_block_bf16(int P, const int32_t* xs, int tiles, int kDim, int k0, int kc, const float* wb, int groups,
                              float* c, int mPad, int first, float* y, int rowBase, int mb, int nDim, int n0, int nn) {
  uint32_t wp[NB_MAX * KC_MAX / 2] __attribute__((aligned(64))); /* 48 KiB of the thread's stack */
  unsigned char exact[NB_MAX / NR];
  int kp = (kDim + 1) / 2, pc = (kc + 1) / 2;
  pack_weights(wb, groups * NR, nn, kc, wp, exact);
  for (int t = 0; t < tiles; t++) {
    const int32_t* x = xs + (size_t)t * kp * P * MR + (size_t)(k0 / 2) * P * MR;
    for (int g = 0; g < groups; g++) {
      float* cg = c + (size_t)g * NR * mPad + (size_t)t * MR;
      __m512 a[NR][2];
#pragma GCC unroll 12
      for (int r = 0; r < NR; r++) {
        a[r][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(cg + (size_t)r * mPad);
        a[r][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(cg + (size_t)r * mPad + 16);
      }
      if (!exact[g]) {
        group_fp32(x, P, wb + (size_t)g * NR * kc, kc, a);
      } else if (P == 3) {
        group_bf16(x, 3, wp + (size_t)g * NR * pc, pc, a);
      } else if (P == 2) {
        group_bf16(x, 2, wp + (size_t)g * NR * pc, pc, a);
      } else {
        group_bf16(x, 1, wp + (size_t)g * NR * pc, pc, a);
      }
      if (y) {
        sums_to_y(a, mb - t * MR < MR ? mb - t * MR : MR, nn - g * NR < NR ? nn - g * NR : NR, y,
                  (size_t)rowBase + (size_t)t * MR, nDim, n0 + g * NR);
      } else {
#pragma GCC unroll 12
        for (int r = 0; r < NR; r++) {
          _mm512_storeu_ps(cg + (size_t)r * mPad, a[r][0]);
          _mm512_storeu_ps(cg + (size_t)r * mPad + 16, a[r][1]);
        }
      }
    }
  }
}

/*
 * Decode in a bf16 precision (RowDotGemm with CpuPrecision parts > 0): x split once per call by scorch_split_pairs, then
 * each BF16 weight row (read in place: its pairs are VDPBF16PS's operand as stored) against each part by VDPBF16PS.
 *
 * Layout: part q of x row i at xp + (i * P + q) * hp, hp = K / 2 rounded up to 16 pairs (the pad zero); pair t holds
 * the part of x[2t] in its low half and of x[2t + 1] in its high half, as the weights' pair t holds w[2t], w[2t + 1].
 */
__attribute__((target("avx512f,avx512bw")))
void scorch_split_pairs(const float* x, int m, int kDim, int P, int32_t* xp) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int hp = (kDim / 2 + 15) / 16 * 16;
  for (int i = 0; i < m; i++) {
    const float* xr = x + (size_t)i * kDim;
    for (int t = 0; t < hp; t += 16) {
      int left = kDim - 2 * t; /* inputs of the row from 2t on: the loads past its end are masked to zero */
      __mmask16 lo = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
      __mmask16 hi = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
      __m512 a = _mm512_maskz_loadu_ps(lo, xr + 2 * (size_t)t), b = _mm512_maskz_loadu_ps(hi, xr + 2 * (size_t)t + 16);
      __m512i pe[3], po[3];
      bf16_parts(_mm512_permutex2var_ps(a, evens, b), P, pe);
      bf16_parts(_mm512_permutex2var_ps(a, odds, b), P, po);
      for (int q = 0; q < P; q++) {
        _mm512_storeu_si512(xp + ((size_t)i * P + q) * hp + t, bf16_pairs(pe[q], po[q]));
      }
    }
  }
}

#define PAIRS_AHEAD 8192 /* as the fp32 row-dots' ROWDOT_AHEAD */
#define DP(acc, xq, wv) acc = _mm512_dpbf16_ps(acc, (__m512bh)(xq), (__m512bh)(wv))

/*
 * The row-dot of one P: per output one accumulator, 16 pairs a step, part 0 then 1 then 2 into it (the last step's
 * pairs past K / 2 masked to zero); its lanes by rowdot_fold16. Four weight rows against two rows of x, the x row left over
 * against the four alone, a last block of fewer weight rows one output at a time: blocks change no output's operations.
 */
__attribute__((target("avx512f,avx512bf16"), always_inline))
static inline void rowdot_pairs(const unsigned char* w, int kDim, int rows, const int32_t* xp, int P, int m, float* y,
                                int nDim) {
  int half = kDim / 2, hp = (half + 15) / 16 * 16;
  size_t rowBytes = 2 * (size_t)kDim;
  __mmask16 tail = (__mmask16)((1u << (half & 15)) - 1); /* the last step's pairs where half is not a multiple of 16 */
#define WP(row, t) \
  ((t) + 16 <= half ? _mm512_loadu_si512(w + (size_t)(row) * rowBytes + 4 * (size_t)(t)) \
                    : _mm512_maskz_loadu_epi32(tail, w + (size_t)(row) * rowBytes + 4 * (size_t)(t)))
  int r = 0;
  for (; r + 4 <= rows; r += 4, w += 4 * rowBytes, y += 4) {
    int i = 0;
    for (; i + 2 <= m; i += 2) {
      const int32_t* x0 = xp + (size_t)i * P * hp;
      const int32_t* x1 = x0 + (size_t)P * hp;
      __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
      for (int t = 0; t < hp; t += 16) {
        if (i == 0) {
          for (int h = 0; h < 4; h++) {
            _mm_prefetch((const char*)w + h * rowBytes + 4 * (size_t)t + PAIRS_AHEAD, _MM_HINT_T0);
          }
        }
        __m512i w0 = WP(0, t), w1 = WP(1, t), w2 = WP(2, t), w3 = WP(3, t);
        for (int q = 0; q < P; q++) {
          __m512i e = _mm512_loadu_si512(x0 + (size_t)q * hp + t), f = _mm512_loadu_si512(x1 + (size_t)q * hp + t);
          DP(a00, e, w0);
          DP(a01, f, w0);
          DP(a10, e, w1);
          DP(a11, f, w1);
          DP(a20, e, w2);
          DP(a21, f, w2);
          DP(a30, e, w3);
          DP(a31, f, w3);
        }
      }
      float* yr = y + (size_t)i * nDim;
      yr[0] = rowdot_fold16(a00);
      yr[1] = rowdot_fold16(a10);
      yr[2] = rowdot_fold16(a20);
      yr[3] = rowdot_fold16(a30);
      yr[nDim] = rowdot_fold16(a01);
      yr[nDim + 1] = rowdot_fold16(a11);
      yr[nDim + 2] = rowdot_fold16(a21);
      yr[nDim + 3] = rowdot_fold16(a31);
    }
    for (; i < m; i++) {
      const int32_t* x0 = xp + (size_t)i * P * hp;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int t = 0; t < hp; t += 16) {
        for (int h = 0; h < 4; h++) {
          _mm_prefetch((const char*)w + h * rowBytes + 4 * (size_t)t + PAIRS_AHEAD, _MM_HINT_T0);
        }
        __m512i w0 = WP(0, t), w1 = WP(1, t), w2 = WP(2, t), w3 = WP(3, t);
        for (int q = 0; q < P; q++) {
          __m512i e = _mm512_loadu_si512(x0 + (size_t)q * hp + t);
          DP(a0, e, w0);
          DP(a1, e, w1);
          DP(a2, e, w2);
          DP(a3, e, w3);
        }
      }
      float* yr = y + (size_t)i * nDim;
      yr[0] = rowdot_fold16(a0);
      yr[1] = rowdot_fold16(a1);
      yr[2] = rowdot_fold16(a2);
      yr[3] = rowdot_fold16(a3);
    }
  }
  for (; r < rows; r++, w += rowBytes, y++) {
    for (int i = 0; i < m; i++) {
      const int32_t* x0 = xp + (size_t)i * P * hp;
      __m512 a = _mm512_setzero_ps();
      for (int t = 0; t < hp; t += 16) {
        __m512i w0 = WP(0, t);
        for (int q = 0; q < P; q++) {
          DP(a, _mm512_loadu_si512(x0 + (size_t)q * hp + t), w0);
        }
      }
      y[(size_t)i * nDim] = rowdot_fold16(a);
    }
  }
#undef WP
}
#undef DP

/* rowdot_pairs with P a constant in each of its three copies, so the part loops unroll. */
__attribute__((target("avx512f,avx512bf16")))
void scorch_rowdot_bf16_pairs(const unsigned char* w, int kDim, int rows, const int32_t* xp, int P, int m, float* y,
                              int nDim) {
  if (P == 3) {
    rowdot_pairs(w, kDim, rows, xp, 3, m, y, nDim);
  } else if (P == 2) {
    rowdot_pairs(w, kDim, rows, xp, 2, m, y, nDim);
  } else {
    rowdot_pairs(w, kDim, rows, xp, 1, m, y, nDim);
  }
}
#else
/* Without a compiler that knows VDPBF16PS: never called (bf16_units reports no units), defined for the JNI side. */
void scorch_split_pairs(const float* x, int m, int kDim, int P, int32_t* xp) {
  (void)x, (void)m, (void)kDim, (void)P, (void)xp;
}

void scorch_rowdot_bf16_pairs(const unsigned char* w, int kDim, int rows, const int32_t* xp, int P, int m, float* y,
                              int nDim) {
  (void)w, (void)kDim, (void)rows, (void)xp, (void)P, (void)m, (void)y, (void)nDim;
}
#endif

/* NativeCpu.splitPairs0: x's m rows split into P parts of pairs (scorch_split_pairs); bounds checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_splitPairs0(JNIEnv* env, jclass cls, jfloatArray x,
                                                                            jint m, jint kDim, jint parts,
                                                                            jintArray xp) {
  (void)cls;
  float* px = (*env)->GetPrimitiveArrayCritical(env, x, NULL);
  int32_t* pxp = px ? (*env)->GetPrimitiveArrayCritical(env, xp, NULL) : NULL;
  if (pxp) {
    scorch_split_pairs(px, m, kDim, parts, pxp);
    (*env)->ReleasePrimitiveArrayCritical(env, xp, pxp, 0);
  }
  if (px) (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
  if (!pxp) {
    scorch_unpinned(env, px ? "cannot pin xp" : "cannot pin x");
  }
}

/* NativeCpu.splitTile0, into the direct buffer xs: bounds and parts checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_splitTile0(
    JNIEnv* env, jclass cls, jint parts, jfloatArray x, jint xOff, jint rows, jint kDim, jobject xs, jint xsOff) {
  (void)cls;
  int32_t* pxs = scorch_address(env, xs, "xs is not a direct buffer");
  if (!pxs) {
    return;
  }
  float* px = (*env)->GetPrimitiveArrayCritical(env, x, NULL);
  if (!px) {
    scorch_unpinned(env, "cannot pin x");
    return;
  }
#if SCORCH_BF16
  split_tile(px + xOff, rows, kDim, parts, pxs + xsOff);
#endif
  (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
}

/* NativeCpu.bf16KernelBlock0: bounds, parts and the units checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_bf16KernelBlock0(
    JNIEnv* env, jclass cls, jint parts, jobject xs, jint xsOff, jint tiles, jint kDim, jint k0, jint kc, jfloatArray wb,
    jint groups, jobject c, jint mPad, jboolean first, jfloatArray y, jint rowBase, jint mb, jint nDim, jint n0, jint nn) {
  (void)cls;
  int32_t* pxs = scorch_address(env, xs, "xs is not a direct buffer");
  float* pc = pxs ? scorch_address(env, c, "c is not a direct buffer") : NULL;
  if (!pc) {
    return;
  }
  float* pwb = (*env)->GetPrimitiveArrayCritical(env, wb, NULL);
  float* py = pwb && y ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  int pinned = pwb && (py || !y);
#if SCORCH_BF16
  if (pinned) {
    kernel_block_bf16(parts, pxs + xsOff, tiles, kDim, k0, kc, pwb, groups, pc, mPad, first, py, rowBase, mb, nDim, n0,
                      nn);
  }
#endif
  if (py) (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  if (pwb) (*env)->ReleasePrimitiveArrayCritical(env, wb, pwb, JNI_ABORT);
  if (!pinned) {
    scorch_unpinned(env, pwb ? "cannot pin y" : "cannot pin wb");
  }
}
