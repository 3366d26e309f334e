/*
 * Scorch's CPU micro-kernels in C, for PackedGemm through JNI. Two register tiles, by the vectors the JVM uses:
 *  - AVX2 (8-lane vectors): 16 rows of x in two vectors times 6 broadcast weight rows, 12 accumulators; the same tile
 *    as the Java kernel.
 *  - AVX-512 (16-lane vectors): 32 rows of x in two vectors times 12 broadcast weight rows, 24 of the 32 registers.
 * Each is the same fused multiply-add chain per output over k in order as the Java kernel, so its bits are the Java
 * kernel's. The C compiler schedules the loop without the spills and the scalar address work C2 leaves in it. Beside
 * them, the transpose of x into tiles and the decoders that turn a K block's staged BF16, FP8 or INT4 weight rows into the
 * fp32 rows the kernels broadcast. Built by build.sh (engine's generate-resources phase) for x86-64 Linux; each
 * function is compiled for its instruction set and runs only where NativeCpu.isa (below) says the CPU has it.
 */
#define _GNU_SOURCE /* sigaction, sigsetjmp and ucontext_t beside -std=c11 */
#include <immintrin.h>
#include <jni.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <ucontext.h>

#include "scorch_cpu.h"
#include "scorch_exp.h"
#include "scorch_jni.h"

/* Rows of x per tile (two 8-lane vectors) and weight rows per tile of the AVX2 kernel, as PackedGemm's MR and NR. */
#define MR 16
#define NR 6
/* The same of the AVX-512 kernel (two 16-lane vectors). */
#define MR512 32
#define NR512 12

/*
 * A finished tile into y, row by row: weight row r's sum for x row i is tile[r * mr + i]; rows of x from rowBase, weight
 * rows from column n0 of y (row stride nDim).
 */
static void tile_to_y(const float* tile, int mr, int rows, int cols, float* y, size_t rowBase, int nDim, int n0) {
  for (int i = 0; i < rows; i++) {
    float* yr = y + (rowBase + i) * nDim + n0;
    for (int r = 0; r < cols; r++) {
      yr[r] = tile[r * mr + i];
    }
  }
}

/*
 * One K block of one row task (AVX2): for every tile t of x^T (xt: tile t at t * kDim * MR, input k at k * MR) and
 * every group g of NR decoded weight rows (wb: row j at j * kc), c[j * mPad + t * MR + i] (+)= sum over
 * k0 <= k < k0 + kc of xt[t, k, i] * wb[j, k - k0]; first starts the sums from 0. With y (the last K block), the
 * finished sums of the task's mb rows and nn weight rows go to y[(rowBase + t * MR + i) * nDim + n0 + j] instead of c.
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
      // The last block goes through a tile in L1 into y.
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
        tile_to_y(tile, MR, mb - t * MR < MR ? mb - t * MR : MR, nn - g * NR < NR ? nn - g * NR : NR, y,
                  (size_t)rowBase + (size_t)t * MR, nDim, n0 + g * NR);
      }
    }
  }
}

/*
 * kernel_block for AVX-512: tiles of MR512 rows of x (two 16-lane vectors) times groups of NR512 weight rows, a[r][0]
 * and a[r][1] the sums of weight row r for the tile's rows 0 .. 15 and 16 .. 31. The same layout and arguments
 * otherwise. The loops over r are unrolled whole, so the 24 accumulators live in registers (checked in the
 * disassembly: no stack traffic in the k loop, each broadcast one vbroadcastss from the weights).
 */
__attribute__((target("avx512f")))
static void kernel_block_512(const float* xt, int tiles, int kDim, int k0, int kc, const float* wb, int groups, float* c,
                             int mPad, int first, float* y, int rowBase, int mb, int nDim, int n0, int nn) {
  for (int t = 0; t < tiles; t++) {
    const float* x = xt + (size_t)t * kDim * MR512 + (size_t)k0 * MR512;
    for (int g = 0; g < groups; g++) {
      const float* w = wb + (size_t)g * NR512 * kc;
      float* cg = c + (size_t)g * NR512 * mPad + (size_t)t * MR512;
      __m512 a[NR512][2];
#pragma GCC unroll 12
      for (int r = 0; r < NR512; r++) {
        a[r][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(cg + (size_t)r * mPad);
        a[r][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(cg + (size_t)r * mPad + 16);
      }
      for (int k = 0; k < kc; k++) {
        __m512 x0 = _mm512_loadu_ps(x + (size_t)k * MR512);
        __m512 x1 = _mm512_loadu_ps(x + (size_t)k * MR512 + 16);
#pragma GCC unroll 12
        for (int r = 0; r < NR512; r++) {
          __m512 v = _mm512_set1_ps(w[(size_t)r * kc + k]);
          a[r][0] = _mm512_fmadd_ps(x0, v, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(x1, v, a[r][1]);
        }
      }
      if (y) {
        // The last block goes through a tile in L1 into y.
        float tile[NR512 * MR512];
#pragma GCC unroll 12
        for (int r = 0; r < NR512; r++) {
          _mm512_storeu_ps(tile + r * MR512, a[r][0]);
          _mm512_storeu_ps(tile + r * MR512 + 16, a[r][1]);
        }
        tile_to_y(tile, MR512, mb - t * MR512 < MR512 ? mb - t * MR512 : MR512,
                  nn - g * NR512 < NR512 ? nn - g * NR512 : NR512, y, (size_t)rowBase + (size_t)t * MR512, nDim,
                  n0 + g * NR512);
      } else {
#pragma GCC unroll 12
        for (int r = 0; r < NR512; r++) {
          _mm512_storeu_ps(cg + (size_t)r * mPad, a[r][0]);
          _mm512_storeu_ps(cg + (size_t)r * mPad + 16, a[r][1]);
        }
      }
    }
  }
}

/*
 * x^T of one tile of mr rows (a multiple of 8), as PackedGemm.transposeTile writes it: xt[k * mr + r] = x[r * stride + k]
 * for k < kDim and the tile's rows r < rows (x points at its first row), 0 for r >= rows. 8 x 8 blocks go through
 * registers (8 rows in, 8 inputs out); the inputs past the last multiple of 8 one by one. scorch_bf16.c transposes
 * 16 inputs of its rows at a time with it (stride: the rows' length).
 */
__attribute__((target("avx2,fma")))
void scorch_transpose_tile(const float* x, int rows, int stride, int kDim, int mr, float* xt) {
  int k8 = kDim / 8 * 8;
  for (int half = 0; half < mr; half += 8) {
    const float* src[8];
    int live[8];
    for (int r = 0; r < 8; r++) {
      live[r] = half + r < rows;
      src[r] = x + (size_t)(live[r] ? half + r : 0) * stride;
    }
    __m256 zero = _mm256_setzero_ps();
    for (int k = 0; k < k8; k += 8) {
      __m256 r0 = live[0] ? _mm256_loadu_ps(src[0] + k) : zero, r1 = live[1] ? _mm256_loadu_ps(src[1] + k) : zero;
      __m256 r2 = live[2] ? _mm256_loadu_ps(src[2] + k) : zero, r3 = live[3] ? _mm256_loadu_ps(src[3] + k) : zero;
      __m256 r4 = live[4] ? _mm256_loadu_ps(src[4] + k) : zero, r5 = live[5] ? _mm256_loadu_ps(src[5] + k) : zero;
      __m256 r6 = live[6] ? _mm256_loadu_ps(src[6] + k) : zero, r7 = live[7] ? _mm256_loadu_ps(src[7] + k) : zero;
      // Pairs, then quads, then 128-bit halves: the j-th store holds input k + j of the 8 rows.
      __m256 a0 = _mm256_unpacklo_ps(r0, r1), a1 = _mm256_unpackhi_ps(r0, r1);
      __m256 a2 = _mm256_unpacklo_ps(r2, r3), a3 = _mm256_unpackhi_ps(r2, r3);
      __m256 a4 = _mm256_unpacklo_ps(r4, r5), a5 = _mm256_unpackhi_ps(r4, r5);
      __m256 a6 = _mm256_unpacklo_ps(r6, r7), a7 = _mm256_unpackhi_ps(r6, r7);
      __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xee);
      __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xee);
      __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xee);
      __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xee);
      float* d = xt + (size_t)k * mr + half;
      _mm256_storeu_ps(d + 0 * mr, _mm256_permute2f128_ps(b0, b4, 0x20));
      _mm256_storeu_ps(d + 1 * mr, _mm256_permute2f128_ps(b1, b5, 0x20));
      _mm256_storeu_ps(d + 2 * mr, _mm256_permute2f128_ps(b2, b6, 0x20));
      _mm256_storeu_ps(d + 3 * mr, _mm256_permute2f128_ps(b3, b7, 0x20));
      _mm256_storeu_ps(d + 4 * mr, _mm256_permute2f128_ps(b0, b4, 0x31));
      _mm256_storeu_ps(d + 5 * mr, _mm256_permute2f128_ps(b1, b5, 0x31));
      _mm256_storeu_ps(d + 6 * mr, _mm256_permute2f128_ps(b2, b6, 0x31));
      _mm256_storeu_ps(d + 7 * mr, _mm256_permute2f128_ps(b3, b7, 0x31));
    }
    for (int k = k8; k < kDim; k++) {
      for (int r = 0; r < 8; r++) {
        xt[(size_t)k * mr + half + r] = live[r] ? src[r][k] : 0.0f;
      }
    }
  }
}

/*
 * Weight rows decoded to fp32 for the kernels, as RowDecoder's Java vectors decode them (the same bits): rows of n raw
 * values at src + j * srcStride into dst + j * n. Each decoder has an AVX2 build and an AVX-512 build, which takes 16
 * inputs a step and leaves the rest of a row to the AVX2 steps.
 *
 * BF16: each half is a float's high 16 bits. bf16_from decodes one row's inputs k .. n 8 at a time, then one by one.
 */
__attribute__((target("avx2,fma")))
static inline void bf16_from(const unsigned short* s, float* d, int k, int n) {
  for (; k + 8 <= n; k += 8) {
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(s + k)));
    _mm256_storeu_ps(d + k, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  for (; k < n; k++) {
    unsigned int bits = (unsigned int)s[k] << 16;
    __builtin_memcpy(d + k, &bits, 4);
  }
}

__attribute__((target("avx2,fma")))
static void decode_bf16(const unsigned short* src, int srcStride, int rows, int n, float* dst) {
  for (int j = 0; j < rows; j++) {
    bf16_from(src + (size_t)j * srcStride, dst + (size_t)j * n, 0, n);
  }
}

__attribute__((target("avx512f,avx2,fma")))
static void decode_bf16_512(const unsigned short* src, int srcStride, int rows, int n, float* dst) {
  for (int j = 0; j < rows; j++) {
    const unsigned short* s = src + (size_t)j * srcStride;
    float* d = dst + (size_t)j * n;
    int k = 0;
    for (; k + 16 <= n; k += 16) {
      __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(s + k)));
      _mm512_storeu_ps(d + k, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
    }
    bf16_from(s, d, k, n);
  }
}

/*
 * FP8 E4M3 times its block's scale: sign to bit 31, exponent and mantissa to bits 26..20, so the float is the code's
 * value times 2^-120 exactly (subnormals included), then one product with the scale pre-multiplied by 2^120; codes
 * 0x7f and 0xff are NaN. Row j's element k has scale scales[j * blocksPerRow + (lead + k) / bc]: lead is the first
 * element's place in its block; lead and bc are multiples of 8, so no vector straddles two blocks. fp8_from decodes
 * one block's inputs k .. end 8 at a time, then one by one; decode_fp8 and decode_fp8_512 go block by block.
 */
__attribute__((target("avx2,fma")))
static inline void fp8_from(const unsigned char* s, float* d, int k, int end, float scale) {
  const __m256i low7 = _mm256_set1_epi32(0x7f), sign = _mm256_set1_epi32(0x80), nan = _mm256_set1_epi32(0x7fc00000);
  __m256 vscale = _mm256_set1_ps(scale);
  for (; k + 8 <= end; k += 8) {
    __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(s + k)));
    __m256i mag = _mm256_and_si256(c, low7);
    __m256i bits = _mm256_or_si256(_mm256_slli_epi32(mag, 20), _mm256_slli_epi32(_mm256_and_si256(c, sign), 24));
    bits = _mm256_blendv_epi8(bits, nan, _mm256_cmpeq_epi32(mag, low7));
    _mm256_storeu_ps(d + k, _mm256_mul_ps(_mm256_castsi256_ps(bits), vscale));
  }
  for (; k < end; k++) {
    unsigned int c = s[k], mag = c & 0x7f;
    unsigned int bits = mag == 0x7f ? 0x7fc00000u : mag << 20 | (c & 0x80) << 24;
    float v;
    __builtin_memcpy(&v, &bits, 4);
    d[k] = v * scale;
  }
}

__attribute__((target("avx2,fma")))
static void decode_fp8(const unsigned char* src, int srcStride, int rows, int n, const float* scales, int blocksPerRow,
                       int lead, int bc, float* dst) {
  for (int j = 0; j < rows; j++) {
    const unsigned char* s = src + (size_t)j * srcStride;
    const float* sc = scales + (size_t)j * blocksPerRow;
    float* d = dst + (size_t)j * n;
    for (int k = 0, b = 0; k < n; b++) {
      int end = (b + 1) * bc - lead < n ? (b + 1) * bc - lead : n;
      fp8_from(s, d, k, end, sc[b]);
      k = end;
    }
  }
}

__attribute__((target("avx512f,avx2,fma")))
static void decode_fp8_512(const unsigned char* src, int srcStride, int rows, int n, const float* scales,
                           int blocksPerRow, int lead, int bc, float* dst) {
  const __m512i low7 = _mm512_set1_epi32(0x7f), sign = _mm512_set1_epi32(0x80), nan = _mm512_set1_epi32(0x7fc00000);
  for (int j = 0; j < rows; j++) {
    const unsigned char* s = src + (size_t)j * srcStride;
    const float* sc = scales + (size_t)j * blocksPerRow;
    float* d = dst + (size_t)j * n;
    for (int k = 0, b = 0; k < n; b++) {
      int end = (b + 1) * bc - lead < n ? (b + 1) * bc - lead : n;
      __m512 scale = _mm512_set1_ps(sc[b]);
      for (; k + 16 <= end; k += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(s + k)));
        __m512i mag = _mm512_and_si512(c, low7);
        __m512i bits = _mm512_or_si512(_mm512_slli_epi32(mag, 20), _mm512_slli_epi32(_mm512_and_si512(c, sign), 24));
        bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(mag, low7), nan);
        _mm512_storeu_ps(d + k, _mm512_mul_ps(_mm512_castsi512_ps(bits), scale));
      }
      fp8_from(s, d, k, end, sc[b]);
      k = end;
    }
  }
}

/*
 * INT4 (compressed-tensors pack-quantized): element k of a row is nibble k % 8 of the row's little-endian 32-bit word
 * k / 8, stored as q + 8, and is q times its group's scale, scales[j * scalesPerRow + (lead + k) / group] for row j
 * (lead: the first element's place in its group). The word xor 0x88888888 holds each q as a signed nibble, which a left
 * shift to bits 28..31 and an arithmetic shift right by 28 sign-extend; the int converts to fp32 exactly and one product
 * with the scale rounds as Linear.row's q * scale does. Vectors start on a word (k % 8 == 0) and stay inside a group; the
 * rest of a group goes one by one. src is read a word at a time (no alignment needed): row j's words at
 * src + 4 * j * srcStride, the row's (n + 7) / 8 words and no more.
 */
static inline float int4_at(const unsigned char* s, int k) {
  unsigned int w;
  __builtin_memcpy(&w, s + 4 * (size_t)(k >> 3), 4);
  return (float)((int)((w >> (4 * (k & 7))) & 0xf) - 8);
}

__attribute__((target("avx2,fma")))
static inline void int4_from(const unsigned char* s, float* d, int k, int end, float scale) {
  const __m256i shifts = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
  __m256 vscale = _mm256_set1_ps(scale);
  for (; k + 8 <= end && (k & 7) == 0; k += 8) {
    unsigned int w;
    __builtin_memcpy(&w, s + 4 * (size_t)(k >> 3), 4);
    __m256i q = _mm256_srai_epi32(_mm256_sllv_epi32(_mm256_set1_epi32((int)(w ^ 0x88888888u)), shifts), 28);
    _mm256_storeu_ps(d + k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), vscale));
  }
  for (; k < end; k++) {
    d[k] = int4_at(s, k) * scale;
  }
}

/* The end of the group that element k of a row (from place lead in its group) lies in, at most n. */
static inline int int4_group_end(int k, int lead, int group, int n) {
  long long end = ((long long)(lead + (long long)k) / group + 1) * group - lead;
  return end < n ? (int)end : n;
}

__attribute__((target("avx2,fma")))
static void decode_int4(const unsigned char* src, int srcStride, int rows, int n, const float* scales, int scalesPerRow,
                        int lead, int group, float* dst) {
  for (int j = 0; j < rows; j++) {
    const unsigned char* s = src + 4 * (size_t)j * srcStride;
    const float* sc = scales + (size_t)j * scalesPerRow;
    float* d = dst + (size_t)j * n;
    for (int k = 0, b = 0; k < n; b++) {
      int end = int4_group_end(k, lead, group, n);
      int4_from(s, d, k, end, sc[b]);
      k = end;
    }
  }
}

/* 16 inputs a step from two words: lanes 0..7 take the first, 8..15 the second. */
__attribute__((target("avx512f,avx2,fma")))
static void decode_int4_512(const unsigned char* src, int srcStride, int rows, int n, const float* scales, int scalesPerRow,
                            int lead, int group, float* dst) {
  const __m512i words = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i shifts = _mm512_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
  const __m128i offset = _mm_set1_epi32((int)0x88888888u);
  for (int j = 0; j < rows; j++) {
    const unsigned char* s = src + 4 * (size_t)j * srcStride;
    const float* sc = scales + (size_t)j * scalesPerRow;
    float* d = dst + (size_t)j * n;
    for (int k = 0, b = 0; k < n; b++) {
      int end = int4_group_end(k, lead, group, n);
      __m512 scale = _mm512_set1_ps(sc[b]);
      for (; k + 16 <= end && (k & 7) == 0; k += 16) {
        __m128i two = _mm_xor_si128(_mm_loadl_epi64((const __m128i*)(s + 4 * (size_t)(k >> 3))), offset);
        __m512i q = _mm512_permutexvar_epi32(words, _mm512_castsi128_si512(two));
        q = _mm512_srai_epi32(_mm512_sllv_epi32(q, shifts), 28);
        _mm512_storeu_ps(d + k, _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale));
      }
      int4_from(s, d, k, end, sc[b]);
      k = end;
    }
  }
}

/* Whether the decoders take their AVX-512 builds: set by NativeCpu.isa, which Java calls once before anything else. */
static int has_avx512;

/*
 * The kernels this CPU runs: 2 where it has AVX-512 F (kernel_block_512) and AVX2 + FMA (everything else), 1 with AVX2
 * + FMA only, 0 without them. Compiled without either, so it is safe to call anywhere.
 */
JNIEXPORT jint JNICALL Java_dev_scorch_engine_kernels_NativeCpu_isa(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    return 0;
  }
  has_avx512 = __builtin_cpu_supports("avx512f");
  return has_avx512 ? 2 : 1;
}

/*
 * Reads of a checkpoint's mapping in place. A file truncated under its mapping (a copy re-synced while a job runs) turns
 * the next read of a page past its new end into SIGBUS, which in native code the JVM takes for a crash of its own. While
 * a decoder reads a mapping its thread's guard is set, and on_sigbus jumps out of the decoder: the call reports the
 * fault and NativeCpu throws, naming the shard. Every other SIGBUS goes on to the handler installed before, the JVM's
 * (which turns a fault of its own reads of a mapped buffer into an InternalError), as if we were not there.
 */
struct mapped_read_guard {
  sigjmp_buf jump;
  sigset_t mask; /* the thread's signal mask when it faulted, restored after the jump (the handler's adds to it) */
  const void* volatile addr; /* the address that faulted (for a decoder that reads two mappings: which one) */
  int faulted;               /* set by GUARDED_READ */
};

/* Initial-exec: the handler reads it without the lazy allocation a dlopened library's TLS may otherwise take. */
static __thread struct mapped_read_guard* volatile guard __attribute__((tls_model("initial-exec")));

/*
 * Runs the statements READ with the thread's SIGBUS guard set; g.faulted is then 0, or 1 where a page could not be read
 * (g.addr the address). A macro, not a function: sigsetjmp's frame must stay live while READ runs.
 */
#define GUARDED_READ(g, ...)                                                                                          \
  do {                                                                                                                \
    (g).addr = NULL;                                                                                                  \
    if (sigsetjmp((g).jump, 0) == 0) {                                                                                \
      guard = &(g);                                                                                                   \
      __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the guard is set before the first read, cleared after the last */   \
      __VA_ARGS__                                                                                                     \
      __atomic_signal_fence(__ATOMIC_SEQ_CST);                                                                        \
      guard = NULL;                                                                                                   \
      (g).faulted = 0;                                                                                                \
    } else {                                                                                                          \
      pthread_sigmask(SIG_SETMASK, &(g).mask, NULL);                                                                  \
      (g).faulted = 1;                                                                                                \
    }                                                                                                                 \
  } while (0)
static struct sigaction previous_sigbus;
static int sigbus_guarded;

static void on_sigbus(int sig, siginfo_t* info, void* context) {
  struct mapped_read_guard* g = guard;
  if (g) {
    guard = NULL;
    g->mask = ((ucontext_t*)context)->uc_sigmask;
    g->addr = info->si_addr;
    siglongjmp(g->jump, 1);
  }
  if (previous_sigbus.sa_flags & SA_SIGINFO) {
    previous_sigbus.sa_sigaction(sig, info, context);
  } else if (previous_sigbus.sa_handler == SIG_DFL || previous_sigbus.sa_handler == SIG_IGN) {
    /* The default action: back to it, and the faulting read, done again, ends the process as it would have. */
    sigaction(SIGBUS, &previous_sigbus, NULL);
  } else {
    previous_sigbus.sa_handler(sig);
  }
}

/* Installs on_sigbus in front of the JVM's handler, once, as the library loads. */
JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  (void)vm;
  (void)reserved;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  if (sigaction(SIGBUS, NULL, &previous_sigbus) == 0) {
    sa.sa_sigaction = on_sigbus;
    sa.sa_mask = previous_sigbus.sa_mask;
    sa.sa_flags = SA_SIGINFO | (previous_sigbus.sa_flags & (SA_ONSTACK | SA_RESTART));
    sigbus_guarded = sigaction(SIGBUS, &sa, NULL) == 0;
  }
  return JNI_VERSION_1_8;
}

/* Whether the decoders may read mappings in place: 1 where on_sigbus is installed. */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_mappedReadsGuarded0(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return sigbus_guarded ? JNI_TRUE : JNI_FALSE;
}

/* NativeCpu.kernelBlock0, on tiles of mr rows (16: AVX2, 32: AVX-512): the arrays' bounds and mr are checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_kernelBlock0(
    JNIEnv* env, jclass cls, jint mr, jobject xt, jint xtOff, jint tiles, jint kDim, jint k0, jint kc, jfloatArray wb,
    jint groups, jobject c, jint mPad, jboolean first, jfloatArray y, jint rowBase, jint mb, jint nDim, jint n0, jint nn) {
  (void)cls;
  /* xt and c are direct buffers (64-byte aligned, never moved); the arrays are pinned for the call. */
  float* pxt = scorch_address(env, xt, "xt is not a direct buffer");
  float* pc = pxt ? scorch_address(env, c, "c is not a direct buffer") : NULL;
  if (!pc) {
    return;
  }
  float* pwb = (*env)->GetPrimitiveArrayCritical(env, wb, NULL);
  float* py = pwb && y ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  int pinned = pwb && (py || !y);
  if (pinned) {
    if (mr == MR512) {
      kernel_block_512(pxt + xtOff, tiles, kDim, k0, kc, pwb, groups, pc, mPad, first, py, rowBase, mb, nDim, n0, nn);
    } else {
      kernel_block(pxt + xtOff, tiles, kDim, k0, kc, pwb, groups, pc, mPad, first, py, rowBase, mb, nDim, n0, nn);
    }
  }
  /* y is written (mode 0 copies back where the VM gave a copy); wb is only read. */
  if (py) (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  if (pwb) (*env)->ReleasePrimitiveArrayCritical(env, wb, pwb, JNI_ABORT);
  if (!pinned) {
    scorch_unpinned(env, pwb ? "cannot pin y" : "cannot pin wb");
  }
}

/*
 * The staging decoders' JNI side: dst (and the FP8 scales) pinned around one decode of rows from src, a pinned staging
 * array. They return NULL, or what they could not pin: the caller throws once it has released its own pins.
 */
static const char* bf16_rows_into(JNIEnv* env, const unsigned short* src, jint srcStride, jint rows, jint n, jfloatArray dst) {
  float* pd = (*env)->GetPrimitiveArrayCritical(env, dst, NULL);
  if (!pd) {
    return "cannot pin dst";
  }
  (has_avx512 ? decode_bf16_512 : decode_bf16)(src, srcStride, rows, n, pd);
  (*env)->ReleasePrimitiveArrayCritical(env, dst, pd, 0);
  return NULL;
}

static const char* fp8_rows_into(JNIEnv* env, const unsigned char* src, jint srcStride, jint rows, jint n, jfloatArray scales,
                                 jint blocksPerRow, jint lead, jint bc, jfloatArray dst) {
  float* psc = (*env)->GetPrimitiveArrayCritical(env, scales, NULL);
  float* pd = psc ? (*env)->GetPrimitiveArrayCritical(env, dst, NULL) : NULL;
  if (pd) {
    (has_avx512 ? decode_fp8_512 : decode_fp8)(src, srcStride, rows, n, psc, blocksPerRow, lead, bc, pd);
    (*env)->ReleasePrimitiveArrayCritical(env, dst, pd, 0);
  }
  if (psc) (*env)->ReleasePrimitiveArrayCritical(env, scales, psc, JNI_ABORT);
  return pd ? NULL : psc ? "cannot pin dst" : "cannot pin scales";
}

/* NativeCpu.bf16Rows0 and fp8Rows0, from staging arrays: bounds checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_bf16Rows0(
    JNIEnv* env, jclass cls, jshortArray src, jint so, jint srcStride, jint rows, jint n, jfloatArray dst) {
  (void)cls;
  unsigned short* ps = (*env)->GetPrimitiveArrayCritical(env, src, NULL);
  const char* failed = "cannot pin src";
  if (ps) {
    failed = bf16_rows_into(env, ps + so, srcStride, rows, n, dst);
    (*env)->ReleasePrimitiveArrayCritical(env, src, ps, JNI_ABORT);
  }
  if (failed) scorch_unpinned(env, failed);
}

JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_fp8Rows0(
    JNIEnv* env, jclass cls, jbyteArray src, jint so, jint srcStride, jint rows, jint n, jfloatArray scales,
    jint blocksPerRow, jint lead, jint bc, jfloatArray dst) {
  (void)cls;
  unsigned char* ps = (*env)->GetPrimitiveArrayCritical(env, src, NULL);
  const char* failed = "cannot pin src";
  if (ps) {
    failed = fp8_rows_into(env, ps + so, srcStride, rows, n, scales, blocksPerRow, lead, bc, dst);
    (*env)->ReleasePrimitiveArrayCritical(env, src, ps, JNI_ABORT);
  }
  if (failed) scorch_unpinned(env, failed);
}

/*
 * NativeCpu.bf16RowsMapped0 and fp8RowsMapped0: the raw values read in place from a mapping of the checkpoint, under the
 * thread's SIGBUS guard. JNI_TRUE when read; JNI_FALSE where a page of the mapping could not be read (the file shrank),
 * dst then partly written.
 */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_bf16RowsMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint srcStride, jint rows, jint n, jfloatArray dst) {
  (void)cls;
  const char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  if (!pm) {
    return JNI_FALSE;
  }
  float* pd = (*env)->GetPrimitiveArrayCritical(env, dst, NULL);
  if (!pd) {
    scorch_unpinned(env, "cannot pin dst");
    return JNI_FALSE;
  }
  struct mapped_read_guard g;
  GUARDED_READ(g, {
    (has_avx512 ? decode_bf16_512 : decode_bf16)((const unsigned short*)(pm + byteOffset), srcStride, rows, n, pd);
  });
  (*env)->ReleasePrimitiveArrayCritical(env, dst, pd, 0);
  return g.faulted ? JNI_FALSE : JNI_TRUE;
}

JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_fp8RowsMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint srcStride, jint rows, jint n, jfloatArray scales,
    jint blocksPerRow, jint lead, jint bc, jfloatArray dst) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  if (!pm) {
    return JNI_FALSE;
  }
  float* psc = (*env)->GetPrimitiveArrayCritical(env, scales, NULL);
  float* pd = psc ? (*env)->GetPrimitiveArrayCritical(env, dst, NULL) : NULL;
  jboolean read = JNI_FALSE;
  if (pd) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      (has_avx512 ? decode_fp8_512 : decode_fp8)(pm + byteOffset, srcStride, rows, n, psc, blocksPerRow, lead, bc, pd);
    });
    if (!g.faulted) {
      read = JNI_TRUE;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, dst, pd, 0);
  }
  if (psc) (*env)->ReleasePrimitiveArrayCritical(env, scales, psc, JNI_ABORT);
  if (!pd) {
    scorch_unpinned(env, psc ? "cannot pin dst" : "cannot pin scales");
  }
  return read;
}

/*
 * NativeCpu.int4Rows0, from a staging array (bounds checked by the Java side); avx512 picks the AVX-512 build where the CPU
 * has it (false: the AVX2 build, for tests on such CPUs).
 */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_int4Rows0(
    JNIEnv* env, jclass cls, jintArray src, jint so, jint srcStride, jint rows, jint n, jfloatArray scales, jint scaleOff,
    jint scalesPerRow, jint lead, jint group, jfloatArray dst, jboolean avx512) {
  (void)cls;
  unsigned char* ps = (*env)->GetPrimitiveArrayCritical(env, src, NULL);
  float* psc = ps ? (*env)->GetPrimitiveArrayCritical(env, scales, NULL) : NULL;
  float* pd = psc ? (*env)->GetPrimitiveArrayCritical(env, dst, NULL) : NULL;
  if (pd) {
    (avx512 && has_avx512 ? decode_int4_512 : decode_int4)(ps + 4 * (size_t)so, srcStride, rows, n, psc + scaleOff, scalesPerRow,
                                                           lead, group, pd);
    (*env)->ReleasePrimitiveArrayCritical(env, dst, pd, 0);
  }
  if (psc) (*env)->ReleasePrimitiveArrayCritical(env, scales, psc, JNI_ABORT);
  if (ps) (*env)->ReleasePrimitiveArrayCritical(env, src, ps, JNI_ABORT);
  if (!pd) {
    scorch_unpinned(env, !ps ? "cannot pin src" : !psc ? "cannot pin scales" : "cannot pin dst");
  }
}

/*
 * Raw group scales to fp32, as Java's Tensor.toFloat decodes them (the same values; NaNs stay NaN): type 0 F32, 1 BF16,
 * 2 F16. Row j's need scales from s + size * j * stride into out + j * need.
 */
static void scales_from(const unsigned char* s, int type, int stride, int rows, int need, float* out) {
  size_t size = type == 0 ? 4 : 2;
  for (int j = 0; j < rows; j++) {
    const unsigned char* r = s + size * (size_t)j * stride;
    for (int b = 0; b < need; b++) {
      unsigned int bits;
      if (type == 0) {
        __builtin_memcpy(&bits, r + 4 * (size_t)b, 4);
      } else {
        unsigned short h;
        __builtin_memcpy(&h, r + 2 * (size_t)b, 2);
        if (type == 1) {
          bits = (unsigned int)h << 16;
        } else {
          unsigned int sign = (unsigned int)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
          if (exp == 0x1f) {
            bits = sign | 0x7f800000u | man << 13;
          } else if (exp == 0) {
            float v = (float)man * 0x1p-24f; /* subnormal or zero: exact */
            __builtin_memcpy(&bits, &v, 4);
            bits |= sign;
          } else {
            bits = sign | (exp + 112) << 23 | man << 13;
          }
        }
      }
      __builtin_memcpy(out + (size_t)j * need + b, &bits, 4);
    }
  }
}

/*
 * NativeCpu.int4RowsMapped0: the packed words and their group scales both read in place from mappings of the checkpoint,
 * under the thread's SIGBUS guard: the scales decoded into scratch (need a row), then the words against them. 0 when
 * read; where a page could not be read (the file shrank), 1 if it was the words', 2 if the scales' (dst then partly
 * written).
 */
JNIEXPORT jint JNICALL Java_dev_scorch_engine_kernels_NativeCpu_int4RowsMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint srcStride, jint rows, jint n, jobject scaleMap,
    jlong scaleByteOffset, jint scaleType, jint scalesPerRow, jint need, jint lead, jint group, jfloatArray scratch,
    jfloatArray dst) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  const unsigned char* psm = pm ? scorch_address(env, scaleMap, "the scales' mapping is not a direct buffer") : NULL;
  if (!psm) {
    return 0;
  }
  const unsigned char* scales = psm + scaleByteOffset;
  size_t scaleBytes = (scaleType == 0 ? 4 : 2) * ((size_t)(rows > 0 ? rows - 1 : 0) * scalesPerRow + need);
  float* psc = (*env)->GetPrimitiveArrayCritical(env, scratch, NULL);
  float* pd = psc ? (*env)->GetPrimitiveArrayCritical(env, dst, NULL) : NULL;
  jint fault = 0;
  if (pd) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      scales_from(scales, scaleType, scalesPerRow, rows, need, psc);
      (has_avx512 ? decode_int4_512 : decode_int4)(pm + byteOffset, srcStride, rows, n, psc, need, lead, group, pd);
    });
    if (g.faulted) {
      const unsigned char* at = g.addr;
      fault = rows > 0 && at >= scales && at < scales + scaleBytes ? 2 : 1;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, dst, pd, 0);
  }
  if (psc) (*env)->ReleasePrimitiveArrayCritical(env, scratch, psc, 0);
  if (!pd) {
    scorch_unpinned(env, psc ? "cannot pin dst" : "cannot pin scratch");
  }
  return fault;
}

/* NativeCpu.transposeTile0, into the direct buffer xt: bounds checked by the Java side. */
JNIEXPORT void JNICALL Java_dev_scorch_engine_kernels_NativeCpu_transposeTile0(
    JNIEnv* env, jclass cls, jint mr, jfloatArray x, jint xOff, jint rows, jint kDim, jobject xt, jint xtOff) {
  (void)cls;
  float* pxt = scorch_address(env, xt, "xt is not a direct buffer");
  if (!pxt) {
    return;
  }
  float* px = (*env)->GetPrimitiveArrayCritical(env, x, NULL);
  if (!px) {
    scorch_unpinned(env, "cannot pin x");
    return;
  }
  scorch_transpose_tile(px + xOff, rows, kDim, kDim, mr, pxt + xtOff);
  (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
}

/*
 * Software prefetch ROWDOT_AHEAD bytes past where a stream of weights is read, a cache line at a time: decode's
 * matrices are short streams (a row of K = 1024 is 32 lines), which the hardware prefetchers reach full speed on only
 * near their end. A paired microbenchmark on Zen 3 (2 threads, 256 MiB of BF16 cycled) read 12-18 % faster with 8 KiB
 * ahead than with none at K = 256, 1024 and 2816. A prefetch never faults, so reading past a mapping's end is harmless.
 */
#define ROWDOT_AHEAD 8192
#define PREFETCH_AHEAD(p) _mm_prefetch((const char*)(p) + ROWDOT_AHEAD, _MM_HINT_T0)
/*
 * The first ROWDOT_AHEAD bytes of a task's weights, which the loops' PREFETCH_AHEAD never asks for (it runs ROWDOT_AHEAD
 * past each stream): a decode step's tasks are short (tens of rows), so each would otherwise start on cold lines.
 */
static inline void prefetch_head(const unsigned char* w, size_t bytes) {
  size_t n = bytes < ROWDOT_AHEAD ? bytes : ROWDOT_AHEAD;
  for (size_t b = 0; b < n; b += 64) {
    _mm_prefetch((const char*)w + b, _MM_HINT_T0);
  }
}

/*
 * One prefetch step of a loop that reads n weight rows side by side (rowBytes apart, each at byte off): n lines,
 * ROWDOT_AHEAD ahead. Where the n rows together fit in ROWDOT_AHEAD (decode's short rows, K = 256-1024 in BF16) they
 * are one stream in memory, and the lines are asked for in its address order (n * off onward in the first row): asked
 * row by row, the short streams interleave within a page and the prefetchers fall behind. Longer rows are n streams,
 * a line ahead on each.
 */
#define PREFETCH_ROWS(w, off, rowBytes, n)                                          \
  do {                                                                              \
    const unsigned char* w_ = (w);                                                  \
    size_t off_ = (off), rb_ = (rowBytes);                                          \
    if ((n) * rb_ <= ROWDOT_AHEAD) {                                                \
      for (int l_ = 0; l_ < (n); l_++) PREFETCH_AHEAD(w_ + (n) * off_ + 64 * l_);   \
    } else {                                                                        \
      for (int l_ = 0; l_ < (n); l_++) PREFETCH_AHEAD(w_ + l_ * rb_ + off_);        \
    }                                                                               \
  } while (0)

/* The loop of NativeCpu.readStream0 (below). */
__attribute__((target("avx2,fma")))
static int read_stream(const unsigned char* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    PREFETCH_AHEAD(p + i);
    PREFETCH_AHEAD(p + i + 64);
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i*)(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i*)(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i*)(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i*)(p + i + 96)));
  }
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i*)(p + i)));
  }
  __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  int lanes[8];
  _mm256_storeu_si256((__m256i*)lanes, a);
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ lanes[4] ^ lanes[5] ^ lanes[6] ^ lanes[7];
}

/* Eight groups' scales (groups of 32: four words a group) spread over their 32 words at d, a permute a vector. */
__attribute__((target("avx2,fma")))
static inline void int4_spread8(__m256 s8, float* d) {
  const __m256i idx0 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), idx1 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  const __m256i idx2 = _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), idx3 = _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7);
  _mm256_storeu_ps(d, _mm256_permutevar8x32_ps(s8, idx0));
  _mm256_storeu_ps(d + 8, _mm256_permutevar8x32_ps(s8, idx1));
  _mm256_storeu_ps(d + 16, _mm256_permutevar8x32_ps(s8, idx2));
  _mm256_storeu_ps(d + 24, _mm256_permutevar8x32_ps(s8, idx3));
}

/*
 * rowdot_int4's per-word scales for BF16 group scales in groups of 32 (Kimi K2's), the values scales_from gives: eight
 * groups' scales widened to fp32 by one shift and spread by int4_spread8; groups past the last eight one at a time.
 * Row j's wpr words at sw + j * wpr.
 */
__attribute__((target("avx2,fma")))
static void int4_bf16_scales_spread(const unsigned char* scales, size_t scaleRowBytes, int gpr, int nr, int wpr,
                                    float* sw) {
  for (int j = 0; j < nr; j++) {
    const unsigned char* sr = scales + (size_t)j * scaleRowBytes;
    float* d = sw + (size_t)j * wpr;
    int g = 0;
    for (; g + 8 <= gpr && 4 * (g + 8) <= wpr; g += 8, d += 32) {
      __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(sr + 2 * (size_t)g)));
      int4_spread8(_mm256_castsi256_ps(_mm256_slli_epi32(h, 16)), d);
    }
    for (; g < gpr && 4 * g < wpr; g++, d += 4) {
      unsigned short hb;
      memcpy(&hb, sr + 2 * (size_t)g, 2);
      unsigned int bits = (unsigned int)hb << 16;
      float v;
      memcpy(&v, &bits, 4);
      for (int q = 0; q < 4 && 4 * g + q < wpr; q++) {
        d[q] = v;
      }
    }
  }
}

/*
 * rowdot_int4's per-word scales of a block of nr weight rows: row j's wpr words at sw + j * wpr, word v taking group
 * v / wordsPerGroup's scale (decoded as scales_from decodes it; its group scales staged at sw + 4 * wpr).
 */
__attribute__((target("avx2,fma")))
static void int4_word_scales(const unsigned char* scales, int scaleType, size_t scaleRowBytes, int gpr, int wordsPerGroup,
                             int nr, int wpr, float* sw) {
  float* gs = sw + 4 * (size_t)wpr;
  if (scaleType == 1 && wordsPerGroup == 4) { /* BF16 scales of groups of 32 (Kimi K2's): widened 8 at a time */
    int4_bf16_scales_spread(scales, scaleRowBytes, gpr, nr, wpr, sw);
  } else {
    scales_from(scales, scaleType, gpr, nr, gpr, gs);
    for (int j = 0; j < nr; j++) { /* word v takes group v / wordsPerGroup: each group's run filled by vector stores */
      float* d = sw + (size_t)j * wpr;
      const float* g = gs + (size_t)j * gpr;
      int v0 = 0;
      if (wordsPerGroup == 4) { /* groups of 32 in F32 or F16: eight groups' scales over 32 words at a time */
        for (; v0 + 32 <= wpr; v0 += 32, g += 8) {
          int4_spread8(_mm256_loadu_ps(g), d + v0);
        }
      }
      for (; v0 < wpr; v0 += wordsPerGroup, g++) {
        int v1 = v0 + wordsPerGroup < wpr ? v0 + wordsPerGroup : wpr;
        __m256 s8 = _mm256_set1_ps(*g);
        int v = v0;
        for (; v + 8 <= v1; v += 8) {
          _mm256_storeu_ps(d + v, s8);
        }
        for (; v + 4 <= v1; v += 4) {
          _mm_storeu_ps(d + v, _mm256_castps256_ps128(s8));
        }
        for (; v < v1; v++) {
          d[v] = *g;
        }
      }
    }
  }
}

/*
 * Whether codes [0, n) at s hold a NaN (0x7f or 0xff): the largest of the bytes with their sign set, 32 a step. The
 * row-dot runs it once per block of rows, after the first x row's pass, so it reads the rows from the cache.
 */
__attribute__((target("avx2,fma")))
static int fp8_nan_in(const unsigned char* s, int n) {
  const __m256i sign = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi8(-1);
  __m256i most = _mm256_setzero_si256();
  int k = 0;
  for (; k + 32 <= n; k += 32) {
    most = _mm256_max_epu8(most, _mm256_or_si256(_mm256_loadu_si256((const __m256i*)(s + k)), sign));
  }
  if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(most, ones)) != 0) {
    return 1;
  }
  for (; k < n; k++) {
    if ((s[k] & 0x7f) == 0x7f) {
      return 1;
    }
  }
  return 0;
}

/* Eight BF16 values widened to fp32 (exactly). */
__attribute__((target("avx2,fma")))
static inline __m256 bf16x8(const unsigned short* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
}

static inline float bf16_at(const unsigned short* p) {
  unsigned int bits = (unsigned int)*p << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/*
 * dst[c] = sum over r < rows of coef[r] * m[r * stride + c]: LatentAttention.Vec.axpyRows, m fp32 or (bf16) BF16. Each
 * column's sum is one FMA chain over r in order, as there; the rows are taken MLA_AXPY_ROWS at a time, every column
 * strip of the block before the next block, the strips' sums kept in dst between blocks (a store and a load change no
 * bits). So m is read from memory once, each block from L1 by its strips: the cache of a long sequence (its rows far
 * beyond L1 and even L2) no longer streams in once per 32 columns, for every head.
 */
#define MLA_AXPY_ROWS 8
/* dst[0 .. width) = 0, as mla_axpy_block expects before its first block */
__attribute__((target("avx2,fma")))
static void mla_axpy_zero(int width, float* dst) {
  for (int c = 0; c < width; c++) {
    dst[c] = 0;
  }
}

/* Columns [c, c + 8 nv) of mla_axpy_block: nv accumulators held in registers through the rows (nv a constant at each
 * call, so the loops over i unroll) */
__attribute__((target("avx2,fma"), always_inline))
static inline void mla_axpy_strip(const float* coef, int r0, int r1, const void* m, int bf16, size_t stride, int c,
                                  int nv, float* dst) {
  const float* mf = m;
  const unsigned short* mh = m;
  __m256 d[8];
  for (int i = 0; i < nv; i++) {
    d[i] = _mm256_loadu_ps(dst + c + 8 * i);
  }
  size_t o = (size_t)r0 * stride + c;
  for (int r = r0; r < r1; r++, o += stride) {
    __m256 k = _mm256_set1_ps(coef[r]);
    for (int i = 0; i < nv; i++) {
      d[i] = _mm256_fmadd_ps(bf16 ? bf16x8(mh + o + 8 * i) : _mm256_loadu_ps(mf + o + 8 * i), k, d[i]);
    }
  }
  for (int i = 0; i < nv; i++) {
    _mm256_storeu_ps(dst + c + 8 * i, d[i]);
  }
}

/* dst[c] += coef[r] * m[r, c] for rows [r0, r1), r ascending for every c, one FMA each: the rows are read once, each
 * strip of columns held in registers through them, 64 at a time where they fill one (eight independent FMA chains
 * keep both FMA pipes busy through the FMA latency), then 32, then 8 */
__attribute__((target("avx2,fma")))
static void mla_axpy_block(const float* coef, int r0, int r1, const void* m, int bf16, size_t stride, int width,
                           float* dst) {
  int wv = width / 8 * 8;
  int c = 0;
  for (; c + 64 <= wv; c += 64) {
    mla_axpy_strip(coef, r0, r1, m, bf16, stride, c, 8, dst);
  }
  for (; c + 32 <= wv; c += 32) {
    mla_axpy_strip(coef, r0, r1, m, bf16, stride, c, 4, dst);
  }
  for (; c < wv; c += 8) {
    mla_axpy_strip(coef, r0, r1, m, bf16, stride, c, 1, dst);
  }
  const float* mf = m;
  const unsigned short* mh = m;
  for (; c < width; c++) {
    float d = dst[c];
    size_t o = (size_t)r0 * stride + c;
    for (int r = r0; r < r1; r++, o += stride) {
      d = __builtin_fmaf(coef[r], bf16 ? bf16_at(mh + o) : mf[o], d);
    }
    dst[c] = d;
  }
}

/* The whole sum described above: dst zeroed, then the blocks in order. */
__attribute__((target("avx2,fma")))
static void mla_axpy_rows(const float* coef, int rows, const void* m, int bf16, size_t stride, int width, float* dst) {
  mla_axpy_zero(width, dst);
  for (int r0 = 0; r0 < rows; r0 += MLA_AXPY_ROWS) {
    mla_axpy_block(coef, r0, rows - r0 < MLA_AXPY_ROWS ? rows : r0 + MLA_AXPY_ROWS, m, bf16, stride, width, dst);
  }
}

/* Decode's row-dots, once per vector width: 8 lanes (AVX2) and 16 (AVX-512), each the bits of RowDotGemm on that width. */
#define RD_LANES 8
#include "scorch_decode.h"
#define RD_LANES 16
#include "scorch_decode.h"

/*
 * NativeCpu.readStream0: bytes [off, off + n) of a direct buffer read once by 32-byte loads, with the row-dots' prefetch
 * ROWDOT_AHEAD ahead, four lanes of xor so the loads overlap; the words xor-ed together (n rounded down to 32 bytes).
 * No SIGBUS guard: for the probe's own memory, never a checkpoint's mapping.
 */
JNIEXPORT jint JNICALL Java_dev_scorch_engine_kernels_NativeCpu_readStream0(JNIEnv* env, jclass cls, jobject buf,
                                                                            jlong off, jlong n) {
  (void)cls;
  const unsigned char* p = scorch_address(env, buf, "the buffer is not a direct buffer");
  if (!p) {
    return 0;
  }
  return read_stream(p + off, (size_t)n);
}

/*
 * NativeCpu.bf16RowDotMapped0: rowdot_bf16 on lanes (8 or 16, RowDotGemm's width; 16 only where NativeCpu.isa found
 * AVX-512) over weight rows [row0, row0 + rows) read in place at byte byteOffset of map (row row0's first pair), into
 * y[i * nDim + yOff + r], under the thread's SIGBUS guard. JNI_TRUE when read; JNI_FALSE
 * where a page could not be read (the file shrank; y then partly written). Bounds checked by the Java side.
 */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_bf16RowDotMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint kDim, jint rows, jfloatArray xs, jfloatArray x, jint m,
    jfloatArray y, jint yOff, jint nDim, jint lanes) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  if (!pm) {
    return JNI_FALSE;
  }
  float* pxs = (*env)->GetPrimitiveArrayCritical(env, xs, NULL);
  float* px = pxs ? (*env)->GetPrimitiveArrayCritical(env, x, NULL) : NULL;
  float* py = px ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  jboolean read = JNI_FALSE;
  if (py) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      if (lanes == 16) {
        rowdot_bf16_16(pm + byteOffset, kDim, rows, pxs, px, m, py + yOff, nDim);
      } else {
        rowdot_bf16_8(pm + byteOffset, kDim, rows, pxs, px, m, py + yOff, nDim);
      }
    });
    if (!g.faulted) {
      read = JNI_TRUE;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  }
  if (px) (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
  if (pxs) (*env)->ReleasePrimitiveArrayCritical(env, xs, pxs, JNI_ABORT);
  if (!py) {
    scorch_unpinned(env, !pxs ? "cannot pin xs" : !px ? "cannot pin x" : "cannot pin y");
  }
  return read;
}

/*
 * NativeCpu.bf16PairsRowDotMapped0: scorch_rowdot_bf16_pairs over weight rows [row0, row0 + rows) read in place at byte
 * byteOffset of map, x as NativeCpu.splitPairs0 split it into parts, into y[i * nDim + yOff + r], under the thread's
 * SIGBUS guard. JNI_TRUE when read; JNI_FALSE where a page could not be read. Bounds and the units checked by the Java
 * side.
 */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_bf16PairsRowDotMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint kDim, jint rows, jintArray xp, jint parts, jint m,
    jfloatArray y, jint yOff, jint nDim) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  if (!pm) {
    return JNI_FALSE;
  }
  int32_t* pxp = (*env)->GetPrimitiveArrayCritical(env, xp, NULL);
  float* py = pxp ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  jboolean read = JNI_FALSE;
  if (py) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      scorch_rowdot_bf16_pairs(pm + byteOffset, kDim, rows, pxp, parts, m, py + yOff, nDim);
    });
    if (!g.faulted) {
      read = JNI_TRUE;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  }
  if (pxp) (*env)->ReleasePrimitiveArrayCritical(env, xp, pxp, JNI_ABORT);
  if (!py) {
    scorch_unpinned(env, !pxp ? "cannot pin xp" : "cannot pin y");
  }
  return read;
}

/*
 * NativeCpu.int4RowDotMapped0: rowdot_int4 on lanes (as bf16RowDotMapped0) over weight rows [row0, row0 + rows), the
 * words read in place at byte byteOffset of map and the scales at scaleByteOffset of scaleMap, into
 * y[i * nDim + yOff + r], under the thread's SIGBUS guard; scratch holds 4 * (wpr + gpr) floats. 0 when read; where a
 * page could not be read (the file shrank; y then partly written), 1 if it was the words', 2 if the scales'. Bounds
 * checked by the Java side.
 */
JNIEXPORT jint JNICALL Java_dev_scorch_engine_kernels_NativeCpu_int4RowDotMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint wpr, jint kDim, jint rows, jobject scaleMap,
    jlong scaleByteOffset, jint scaleType, jint gpr, jint group, jfloatArray scratch, jfloatArray xs, jfloatArray x,
    jint m, jfloatArray y, jint yOff, jint nDim, jint lanes) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  const unsigned char* psm = pm ? scorch_address(env, scaleMap, "the scales' mapping is not a direct buffer") : NULL;
  if (!psm) {
    return 0;
  }
  const unsigned char* scales = psm + scaleByteOffset;
  size_t scaleBytes = (scaleType == 0 ? 4 : 2) * (size_t)rows * gpr;
  float* psc = (*env)->GetPrimitiveArrayCritical(env, scratch, NULL);
  float* pxs = psc ? (*env)->GetPrimitiveArrayCritical(env, xs, NULL) : NULL;
  float* px = pxs ? (*env)->GetPrimitiveArrayCritical(env, x, NULL) : NULL;
  float* py = px ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  jint fault = 0;
  if (py) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      if (lanes == 16) {
        rowdot_int4_16(pm + byteOffset, wpr, kDim, rows, scales, scaleType, gpr, group, pxs, px, m, py + yOff, nDim, psc);
      } else {
        rowdot_int4_8(pm + byteOffset, wpr, kDim, rows, scales, scaleType, gpr, group, pxs, px, m, py + yOff, nDim, psc);
      }
    });
    if (g.faulted) {
      const unsigned char* at = g.addr;
      fault = rows > 0 && at >= scales && at < scales + scaleBytes ? 2 : 1;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  }
  if (px) (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
  if (pxs) (*env)->ReleasePrimitiveArrayCritical(env, xs, pxs, JNI_ABORT);
  if (psc) (*env)->ReleasePrimitiveArrayCritical(env, scratch, psc, 0);
  if (!py) {
    scorch_unpinned(env, !psc ? "cannot pin scratch" : !pxs ? "cannot pin xs" : !px ? "cannot pin x" : "cannot pin y");
  }
  return fault;
}

/*
 * NativeCpu.fp8RowDotMapped0: rowdot_fp8 on lanes (as bf16RowDotMapped0) over weight rows [row0, row0 + rows) read in
 * place at byte byteOffset of map, into y[i * nDim + yOff + r], under the thread's SIGBUS guard. JNI_TRUE when read;
 * JNI_FALSE where a page could not be read (the file shrank; y then partly written). Bounds checked by the Java side.
 */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_fp8RowDotMapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint kDim, jint rows, jint row0, jfloatArray scaleInv,
    jint scaleCols, jint blockRows, jint bc, jfloatArray x, jint m, jfloatArray y, jint yOff, jint nDim, jint lanes) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  if (!pm) {
    return JNI_FALSE;
  }
  float* psc = (*env)->GetPrimitiveArrayCritical(env, scaleInv, NULL);
  float* px = psc ? (*env)->GetPrimitiveArrayCritical(env, x, NULL) : NULL;
  float* py = px ? (*env)->GetPrimitiveArrayCritical(env, y, NULL) : NULL;
  jboolean read = JNI_FALSE;
  if (py) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      if (lanes == 16) {
        rowdot_fp8_16(pm + byteOffset, kDim, rows, row0, psc, scaleCols, blockRows, bc, px, m, py + yOff, nDim);
      } else {
        rowdot_fp8_8(pm + byteOffset, kDim, rows, row0, psc, scaleCols, blockRows, bc, px, m, py + yOff, nDim);
      }
    });
    if (!g.faulted) {
      read = JNI_TRUE;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, y, py, 0);
  }
  if (px) (*env)->ReleasePrimitiveArrayCritical(env, x, px, JNI_ABORT);
  if (psc) (*env)->ReleasePrimitiveArrayCritical(env, scaleInv, psc, JNI_ABORT);
  if (!py) {
    scorch_unpinned(env, !psc ? "cannot pin scaleInv" : !px ? "cannot pin x" : "cannot pin y");
  }
  return read;
}

/*
 * NativeCpu.mlaAbsorbedBf16Mapped0: mla_absorbed_bf16 on lanes (as bf16RowDotMapped0) for G consecutive heads, their
 * kv_b_proj rows read in place from byte byteOffset of map, under the thread's SIGBUS guard; q and out at qOff and
 * oOff, qStride and oStride floats a head; scratch as mla_absorbed_bf16 takes it. JNI_TRUE when read; JNI_FALSE where a
 * page could not be read (the file shrank). Bounds checked by the Java side.
 */
JNIEXPORT jboolean JNICALL Java_dev_scorch_engine_kernels_NativeCpu_mlaAbsorbedBf16Mapped0(
    JNIEnv* env, jclass cls, jobject map, jlong byteOffset, jint heads, jint nope, jint rope, jint vHead, jint rank,
    jfloat scale, jfloatArray q, jint qOff, jint qStride, jfloatArray cache, jint stride, jint len, jfloatArray out,
    jint oOff, jint oStride, jfloatArray scratch, jint lanes) {
  (void)cls;
  const unsigned char* pm = scorch_address(env, map, "the mapping is not a direct buffer");
  if (!pm) {
    return JNI_FALSE;
  }
  float* pq = (*env)->GetPrimitiveArrayCritical(env, q, NULL);
  float* pc = pq ? (*env)->GetPrimitiveArrayCritical(env, cache, NULL) : NULL;
  float* po = pc ? (*env)->GetPrimitiveArrayCritical(env, out, NULL) : NULL;
  float* ps = po ? (*env)->GetPrimitiveArrayCritical(env, scratch, NULL) : NULL;
  jboolean read = JNI_FALSE;
  if (ps) {
    struct mapped_read_guard g;
    GUARDED_READ(g, {
      if (lanes == 16) {
        mla_absorbed_bf16_16((const unsigned short*)(pm + byteOffset), heads, nope, rope, vHead, rank, scale, pq + qOff,
                             qStride, pc, stride, len, po + oOff, oStride, ps);
      } else {
        mla_absorbed_bf16_8((const unsigned short*)(pm + byteOffset), heads, nope, rope, vHead, rank, scale, pq + qOff,
                            qStride, pc, stride, len, po + oOff, oStride, ps);
      }
    });
    if (!g.faulted) {
      read = JNI_TRUE;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, scratch, ps, 0);
  }
  if (po) (*env)->ReleasePrimitiveArrayCritical(env, out, po, 0);
  if (pc) (*env)->ReleasePrimitiveArrayCritical(env, cache, pc, JNI_ABORT);
  if (pq) (*env)->ReleasePrimitiveArrayCritical(env, q, pq, JNI_ABORT);
  if (!ps) {
    scorch_unpinned(env, !pq ? "cannot pin q" : !pc ? "cannot pin cache" : !po ? "cannot pin out" : "cannot pin scratch");
  }
  return read;
}
