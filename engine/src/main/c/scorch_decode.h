/*
 * Decode's kernels in C (RowDotGemm's BF16, INT4 and FP8 row-dots, LatentAttention's absorbed attention), written once
 * for both vector widths: scorch_cpu.c includes this file with RD_LANES 8 (AVX2: rowdot_bf16_8, ...) and 16 (AVX-512:
 * rowdot_bf16_16, ...). Each gives the bits of the Java kernel on vectors of RD_LANES floats: the same lanes take the
 * same inputs, and the lanes are added in Lanes.foldTree's order (16 lanes: i + 8 onto i, then as 8). What does not
 * depend on the width (the prefetch helpers, fp8_nan_in, the INT4 scales' spreading, the attention's column sums
 * mla_axpy_*, whose every column is one FMA chain) comes from scorch_cpu.c.
 */
#if RD_LANES == 8
#define RD_TARGET __attribute__((target("avx2,fma")))
#define rd_v __m256
#define rd_vi __m256i
#define RD_ZERO() _mm256_setzero_ps()
#define RD_LOAD(p) _mm256_loadu_ps(p)
#define RD_LOADI(p) _mm256_loadu_si256((const __m256i*)(p))
#define RD_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define RD_MUL(a, b) _mm256_mul_ps(a, b)
#define RD_SET1(f) _mm256_set1_ps(f)
#define RD_SET1I(i) _mm256_set1_epi32(i)
#define RD_ASF(v) _mm256_castsi256_ps(v)
#define RD_SLLI(v, n) _mm256_slli_epi32(v, n)
#define RD_SRAI(v, n) _mm256_srai_epi32(v, n)
#define RD_AND(a, b) _mm256_and_si256(a, b)
#define RD_XOR(a, b) _mm256_xor_si256(a, b)
#define RD_CVT(v) _mm256_cvtepi32_ps(v)
#define RD_CODES(s) _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(s))) /* 8 codes, sign-extended */
#define RD_FOLD(a) rowdot_fold8(a)
#define RD_BF16(p) bf16x8(p) /* 8 BF16 values widened */
#define RD_ADD(a, b) _mm256_add_ps(a, b)
#define RD_SUB(a, b) _mm256_sub_ps(a, b)
#define RD_MAX(a, b) _mm256_max_ps(a, b)
#define RD_STORE(p, v) _mm256_storeu_ps(p, v)
#define RD_EXP(v) exp256(v)
#define RD_BELOW(n) _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_ps((float)(n)), _CMP_LT_OQ)
#define RD_KEEP(in, x, other) _mm256_blendv_ps(other, x, in) /* x in the lanes of in, else other */
#elif RD_LANES == 16
#define RD_TARGET __attribute__((target("avx512f,avx2,fma")))
#define rd_v __m512
#define rd_vi __m512i
#define RD_ZERO() _mm512_setzero_ps()
#define RD_LOAD(p) _mm512_loadu_ps(p)
#define RD_LOADI(p) _mm512_loadu_si512((const void*)(p))
#define RD_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define RD_MUL(a, b) _mm512_mul_ps(a, b)
#define RD_SET1(f) _mm512_set1_ps(f)
#define RD_SET1I(i) _mm512_set1_epi32(i)
#define RD_ASF(v) _mm512_castsi512_ps(v)
#define RD_SLLI(v, n) _mm512_slli_epi32(v, n)
#define RD_SRAI(v, n) _mm512_srai_epi32(v, n)
#define RD_AND(a, b) _mm512_and_si512(a, b)
#define RD_XOR(a, b) _mm512_xor_si512(a, b)
#define RD_CVT(v) _mm512_cvtepi32_ps(v)
#define RD_CODES(s) _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(s))) /* 16 codes, sign-extended */
#define RD_FOLD(a) rowdot_fold16(a)
#define RD_BF16(p) \
  _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(p))), 16))
#define RD_ADD(a, b) _mm512_add_ps(a, b)
#define RD_SUB(a, b) _mm512_sub_ps(a, b)
#define RD_MAX(a, b) _mm512_max_ps(a, b)
#define RD_STORE(p, v) _mm512_storeu_ps(p, v)
#define RD_EXP(v) exp512(v)
#define RD_BELOW(n)                                                                                              \
  _mm512_cmp_ps_mask(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_ps((float)(n)), \
                     _CMP_LT_OQ)
#define RD_KEEP(in, x, other) _mm512_mask_blend_ps(in, other, x)
#else
#error "RD_LANES is 8 or 16"
#endif
#define RD_CAT_(name, lanes) name##_##lanes
#define RD_CAT(name, lanes) RD_CAT_(name, lanes)
#define RD(name) RD_CAT(name, RD_LANES)

/*
 * Decode's row-dot over BF16 weights read in place from the mapping (RowDotGemm.bf16Rows, the same bits):
 * y[i * nDim + r] = x row i · weight row r for r < rows, i < m, each weight row a run of K / 2 raw pairs (element 2t in
 * the low half, 2t + 1 in the high half) from w. Per output one accumulator over the whole vectors of pairs, the
 * even product then the odd one (against xs, x split into its even and odd elements: row i holds x[i, 0], x[i, 2], ...
 * at i * K and x[i, 1], x[i, 3], ... at i * K + K / 2), its lanes added in RowDotGemm's tree (Lanes.foldTree), then the
 * inputs past the last whole vector by scalar FMAs in order against x. Blocks: four weight rows, each decoded pair
 * vector feeding two rows of x, the x row left over against the four weight rows alone; a last block of fewer weight
 * rows one output at a time (blocks change no output's operations, only how often x and w are loaded). Nothing is
 * copied: the weights stream from the page cache once per call, each block's four rows side by side.
 */

/* The lanes' sum, then k = 2 * kv .. K - 1 of the weight row's pairs at p by scalar FMAs against x. */
RD_TARGET
static inline float RD(rowdot_bf16_finish)(rd_v a, const unsigned char* p, const float* x, int kv, int kDim) {
  float sum = RD_FOLD(a);
  for (int k = 2 * kv; k < kDim; k++) {
    unsigned int pair;
    memcpy(&pair, p + 4 * (size_t)(k / 2), 4);
    unsigned int bits = (k & 1) == 0 ? pair << 16 : pair & 0xFFFF0000u;
    float wk;
    memcpy(&wk, &bits, 4);
    sum = __builtin_fmaf(x[k], wk, sum);
  }
  return sum;
}

#define BF16_LO(p) RD_ASF(RD_SLLI(p, 16))
#define BF16_HI(p) RD_ASF(RD_AND(p, hiMask))
#define LOADP(row, j) RD_LOADI((w + (size_t)(row) * rowBytes + 4 * (size_t)(j)))

RD_TARGET
static void RD(rowdot_bf16)(const unsigned char* w, int kDim, int rows, const float* xs, const float* x, int m, float* y,
                        int nDim) {
  const rd_vi hiMask = RD_SET1I((int)0xFFFF0000u);
  int half = kDim / 2;
  int kv = half / RD_LANES * RD_LANES; /* pairs taken by whole vectors */
  size_t rowBytes = 2 * (size_t)kDim;
  prefetch_head(w, rowBytes * (size_t)rows);
  int r = 0;
  for (; r + 4 <= rows; r += 4, w += 4 * rowBytes, y += 4) {
    int i = 0;
    for (; i + 2 <= m; i += 2) { /* the block's four rows against two rows of x: x streams once per block */
      const float* x0 = xs + (size_t)i * kDim;
      const float* x1 = x0 + kDim;
      rd_v a00 = RD_ZERO(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
      for (int j = 0; j < kv; j += RD_LANES) {
        if (i == 0 && (j & 15) == 0) { /* the block's first pass over its rows: four lines ahead */
          PREFETCH_ROWS(w, 4 * (size_t)j, rowBytes, 4);
        }
        rd_v e0 = RD_LOAD(x0 + j), e1 = RD_LOAD(x1 + j);
        rd_v o0 = RD_LOAD(x0 + half + j), o1 = RD_LOAD(x1 + half + j);
/* weight row h's pair vector against both x rows: the even product, then the odd one, into each accumulator */
#define ROW_AGAINST_2(h, ah0, ah1)                                            \
  do {                                                                       \
    rd_vi p = LOADP(h, j);                                                 \
    rd_v lo = BF16_LO(p), hi = BF16_HI(p);                                 \
    ah0 = RD_FMA(lo, e0, ah0);                                      \
    ah1 = RD_FMA(lo, e1, ah1);                                      \
    ah0 = RD_FMA(hi, o0, ah0);                                      \
    ah1 = RD_FMA(hi, o1, ah1);                                      \
  } while (0)
        ROW_AGAINST_2(0, a00, a01);
        ROW_AGAINST_2(1, a10, a11);
        ROW_AGAINST_2(2, a20, a21);
        ROW_AGAINST_2(3, a30, a31);
#undef ROW_AGAINST_2
      }
      const float* xr = x + (size_t)i * kDim;
      float* yr = y + (size_t)i * nDim;
      yr[0] = RD(rowdot_bf16_finish)(a00, w, xr, kv, kDim);
      yr[1] = RD(rowdot_bf16_finish)(a10, w + rowBytes, xr, kv, kDim);
      yr[2] = RD(rowdot_bf16_finish)(a20, w + 2 * rowBytes, xr, kv, kDim);
      yr[3] = RD(rowdot_bf16_finish)(a30, w + 3 * rowBytes, xr, kv, kDim);
      yr[nDim] = RD(rowdot_bf16_finish)(a01, w, xr + kDim, kv, kDim);
      yr[nDim + 1] = RD(rowdot_bf16_finish)(a11, w + rowBytes, xr + kDim, kv, kDim);
      yr[nDim + 2] = RD(rowdot_bf16_finish)(a21, w + 2 * rowBytes, xr + kDim, kv, kDim);
      yr[nDim + 3] = RD(rowdot_bf16_finish)(a31, w + 3 * rowBytes, xr + kDim, kv, kDim);
    }
    for (; i < m; i++) { /* four weight rows against one row of x: four independent streams of the mapping */
      const float* xe = xs + (size_t)i * kDim;
      const float* xo = xe + half;
      rd_v a0 = RD_ZERO(), a1 = a0, a2 = a0, a3 = a0;
      for (int j = 0; j < kv; j += RD_LANES) {
        if ((j & 15) == 0) { /* four lines every second step */
          PREFETCH_ROWS(w, 4 * (size_t)j, rowBytes, 4);
        }
        rd_v ve = RD_LOAD(xe + j), vo = RD_LOAD(xo + j);
        rd_vi p0 = LOADP(0, j), p1 = LOADP(1, j), p2 = LOADP(2, j), p3 = LOADP(3, j);
        a0 = RD_FMA(BF16_LO(p0), ve, a0);
        a1 = RD_FMA(BF16_LO(p1), ve, a1);
        a2 = RD_FMA(BF16_LO(p2), ve, a2);
        a3 = RD_FMA(BF16_LO(p3), ve, a3);
        a0 = RD_FMA(BF16_HI(p0), vo, a0);
        a1 = RD_FMA(BF16_HI(p1), vo, a1);
        a2 = RD_FMA(BF16_HI(p2), vo, a2);
        a3 = RD_FMA(BF16_HI(p3), vo, a3);
      }
      const float* xr = x + (size_t)i * kDim;
      float* yr = y + (size_t)i * nDim;
      yr[0] = RD(rowdot_bf16_finish)(a0, w, xr, kv, kDim);
      yr[1] = RD(rowdot_bf16_finish)(a1, w + rowBytes, xr, kv, kDim);
      yr[2] = RD(rowdot_bf16_finish)(a2, w + 2 * rowBytes, xr, kv, kDim);
      yr[3] = RD(rowdot_bf16_finish)(a3, w + 3 * rowBytes, xr, kv, kDim);
    }
  }
  for (; r < rows; r++, w += rowBytes, y++) { /* the last block's rows, one output at a time */
    for (int i = 0; i < m; i++) {
      const float* xe = xs + (size_t)i * kDim;
      rd_v a = RD_ZERO();
      for (int j = 0; j < kv; j += RD_LANES) {
        rd_vi p = LOADP(0, j);
        a = RD_FMA(BF16_LO(p), RD_LOAD(xe + j), a);
        a = RD_FMA(BF16_HI(p), RD_LOAD(xe + half + j), a);
      }
      y[(size_t)i * nDim] = RD(rowdot_bf16_finish)(a, w, x + (size_t)i * kDim, kv, kDim);
    }
  }
}
#undef BF16_LO
#undef BF16_HI
#undef LOADP

/*
 * Decode's row-dot over INT4 weights read in place (RowDotGemm.int4Rows, the same bits): the packed words of
 * weight rows [0, rows) from w (wpr words a row), their group scales (scaleType as scales_from, gpr a row) from scales.
 * Per block of four rows (fewer at the end) the scales are decoded and spread to one per word (sw: 4 * wpr floats, then
 * 4 * gpr for the group scales), as the Java kernel does; then per output one accumulator: lane i of step j takes word
 * j + i whole, the dot of its eight q (phase p, element 8(j + i) + p) with xs (x split by phase: row i holds
 * x[i, 8v + p] at i * K + p * (K / 8) + v) in phase order, q0 x0 then seven FMAs, and adds it times the word's scale by
 * one FMA (the scale once a word, not once an input; each word's short chain starts afresh, so the lanes' sums do not
 * wait on one another's latency); the lanes in RowDotGemm's tree; the inputs past the last whole vector of words by
 * scalar FMAs of q × word scale against x. Every row of x runs against the block's four rows (the Java kernel's 2 x 2
 * blocks give each output the same operations).
 */
RD_TARGET
static inline float RD(rowdot_int4_finish)(rd_v a, const unsigned char* wr, const float* sw, const float* x, int kvw,
                                       int kDim) {
  float sum = RD_FOLD(a);
  for (int k = 8 * kvw; k < kDim; k++) {
    unsigned int word;
    memcpy(&word, wr + 4 * (size_t)(k / 8), 4);
    float wk = (float)((int)((word >> (4 * (k & 7))) & 0xF) - 8) * sw[k / 8];
    sum = __builtin_fmaf(x[k], wk, sum);
  }
  return sum;
}

#define INT4_Q(p, ph) RD_CVT(RD_SRAI(RD_SLLI(p, 28 - 4 * (ph)), 28))
#define INT4_WORDS(w, j) RD_XOR(RD_LOADI(((w) + 4 * (size_t)(j))), flip)

/* One vector of words (flipped) against x split by phase from xp: q0 x0, then the seven other phases by FMAs. */
RD_TARGET
static inline rd_v RD(int4_phases)(rd_vi p, const float* xp, int kw) {
  rd_v t = RD_MUL(INT4_Q(p, 0), RD_LOAD(xp));
#pragma GCC unroll 7
  for (int ph = 1; ph < 8; ph++) { /* unrolled: immediate shift counts */
    t = RD_FMA(INT4_Q(p, ph), RD_LOAD(xp + (size_t)ph * kw), t);
  }
  return t;
}

RD_TARGET
static void RD(rowdot_int4)(const unsigned char* w, int wpr, int kDim, int rows, const unsigned char* scales, int scaleType,
                        int gpr, int group, const float* xs, const float* x, int m, float* y, int nDim, float* sw) {
  const rd_vi flip = RD_SET1I((int)0x88888888u);
  int kw = kDim / 8;
  int kvw = kw / RD_LANES * RD_LANES; /* words taken by whole vectors */
  int wordsPerGroup = group / 8;
  size_t rowBytes = 4 * (size_t)wpr;
  size_t scaleRowBytes = (scaleType == 0 ? 4 : 2) * (size_t)gpr;
  prefetch_head(w, rowBytes * (size_t)rows);
  for (int r = 0; r < rows; r += 4, w += 4 * rowBytes, scales += 4 * scaleRowBytes, y += 4) {
    int nr = rows - r < 4 ? rows - r : 4;
    int4_word_scales(scales, scaleType, scaleRowBytes, gpr, wordsPerGroup, nr, wpr, sw);
    for (int i = 0; i < m; i++) {
      const float* xi = xs + (size_t)i * kDim;
      const float* xr = x + (size_t)i * kDim;
      float* yr = y + (size_t)i * nDim;
      if (nr == 4) {
        for (int h = 0; h < 4; h += 2) { /* two rows a pass: no register spills in the unrolled phases */
          const unsigned char* w0 = w + (size_t)h * rowBytes;
          const unsigned char* w1 = w0 + rowBytes;
          const float* sw0 = sw + (size_t)h * wpr;
          const float* sw1 = sw0 + wpr;
          rd_v a0 = RD_ZERO(), a1 = a0;
          int j = 0;
          for (; j + 2 * RD_LANES <= kvw; j += 2 * RD_LANES) { /* two vectors of words a row: four phase chains in flight, not two */
            if (i == 0) { /* the first x row's pass: the step's lines of both rows ahead, as rowdot_bf16 */
              for (int l = 0; l < RD_LANES / 8; l++) {
                PREFETCH_ROWS(w0, 4 * (size_t)j + 64 * l, rowBytes, 2);
              }
            }
            rd_vi p0 = INT4_WORDS(w0, j), p1 = INT4_WORDS(w1, j);
            rd_vi r0 = INT4_WORDS(w0, j + RD_LANES), r1 = INT4_WORDS(w1, j + RD_LANES);
            rd_v v = RD_LOAD(xi + j), u = RD_LOAD(xi + j + RD_LANES);
            rd_v t0 = RD_MUL(INT4_Q(p0, 0), v), t1 = RD_MUL(INT4_Q(p1, 0), v);
            rd_v c0 = RD_MUL(INT4_Q(r0, 0), u), c1 = RD_MUL(INT4_Q(r1, 0), u);
#pragma GCC unroll 7
            for (int ph = 1; ph < 8; ph++) { /* int4_phases' steps written out: through it, the four chains spilled */
              v = RD_LOAD(xi + (size_t)ph * kw + j);
              u = RD_LOAD(xi + (size_t)ph * kw + j + RD_LANES);
              t0 = RD_FMA(INT4_Q(p0, ph), v, t0);
              t1 = RD_FMA(INT4_Q(p1, ph), v, t1);
              c0 = RD_FMA(INT4_Q(r0, ph), u, c0);
              c1 = RD_FMA(INT4_Q(r1, ph), u, c1);
            }
            a0 = RD_FMA(t0, RD_LOAD(sw0 + j), a0);
            a1 = RD_FMA(t1, RD_LOAD(sw1 + j), a1);
            a0 = RD_FMA(c0, RD_LOAD(sw0 + j + RD_LANES), a0);
            a1 = RD_FMA(c1, RD_LOAD(sw1 + j + RD_LANES), a1);
          }
          if (j < kvw) { /* an odd vector left */
            if (i == 0) {
              PREFETCH_ROWS(w0, 4 * (size_t)j, rowBytes, 2);
            }
            a0 = RD_FMA(RD(int4_phases)(INT4_WORDS(w0, j), xi + j, kw), RD_LOAD(sw0 + j), a0);
            a1 = RD_FMA(RD(int4_phases)(INT4_WORDS(w1, j), xi + j, kw), RD_LOAD(sw1 + j), a1);
          }
          yr[h] = RD(rowdot_int4_finish)(a0, w0, sw0, xr, kvw, kDim);
          yr[h + 1] = RD(rowdot_int4_finish)(a1, w1, sw1, xr, kvw, kDim);
        }
      } else {
        for (int q = 0; q < nr; q++) {
          const unsigned char* wq = w + q * rowBytes;
          const float* sq = sw + (size_t)q * wpr;
          rd_v a = RD_ZERO();
          for (int j = 0; j < kvw; j += RD_LANES) {
            a = RD_FMA(RD(int4_phases)(INT4_WORDS(wq, j), xi + j, kw), RD_LOAD(sq + j), a);
          }
          yr[q] = RD(rowdot_int4_finish)(a, wq, sq, xr, kvw, kDim);
        }
      }
    }
  }
}
#undef INT4_WORDS
#undef INT4_Q

/*
 * Decode's row-dot over FP8 E4M3 weights read in place (RowDotGemm.fp8Rows, the same bits): the codes of
 * weight rows [0, rows) from w (K a row; global row row0 + r), their block scales from scaleInv (weight_scale_inv in
 * fp32, scaleCols a row of blocks, blockRows weight rows a block row). Per output one accumulator over the inputs taken
 * by whole vectors (kv = K / RD_LANES * RD_LANES), block by block: the block's scale times 2^120 broadcast, each code decoded as
 * fp8_from decodes it (its value times 2^-120, exactly, then one product with that scale) and one FMA; the lanes in
 * RowDotGemm's tree; the inputs past kv by scalar FMAs of the code's value times the block's scale. Every row of x runs
 * against the block's four rows (the Java kernel's 2 x 4 blocks give each output the same operations). A row holding a
 * NaN code is NaN, as in Java, but found once per row by fp8_nan_in rather than by each vector's decoding.
 */
RD_TARGET
static inline rd_v RD(rowdot_fp8_codes)(const unsigned char* s, rd_v scale) {
  /* Each code sign-extended, so bits 7-31 all hold its sign: shifted left by 20 the sign lands on bit 31 (kept) beside
   * the magnitude's seven bits at 20-26, bits 27-30 masked off. A NaN code decodes here as 480: fp8_nan_in finds them. */
  const rd_vi keep = RD_SET1I((int)0x87f00000u);
  rd_vi c = RD_CODES(s);
  return RD_MUL(RD_ASF(RD_AND(RD_SLLI(c, 20), keep)), scale);
}

RD_TARGET
static inline float RD(rowdot_fp8_finish)(rd_v a, const unsigned char* wr, const float* srow, int bc, const float* x,
                                      int kv, int kDim) {
  float sum = RD_FOLD(a);
  for (int k = kv; k < kDim; k++) {
    unsigned int c = wr[k], mag = c & 0x7f;
    unsigned int bits = mag == 0x7f ? 0x7fc00000u : mag << 20 | (c & 0x80) << 24;
    float v;
    memcpy(&v, &bits, 4);
    float wk = v * 0x1p120f * srow[k / bc]; /* the code's value (exact), times the block's scale */
    sum = __builtin_fmaf(x[k], wk, sum);
  }
  return sum;
}

RD_TARGET
static void RD(rowdot_fp8)(const unsigned char* w, int kDim, int rows, int row0, const float* scaleInv, int scaleCols,
                       int blockRows, int bc, const float* x, int m, float* y, int nDim) {
  int kv = kDim / RD_LANES * RD_LANES;
  prefetch_head(w, (size_t)kDim * rows);
  for (int r = 0; r < rows; r += 4, w += 4 * (size_t)kDim, y += 4) {
    int nr = rows - r < 4 ? rows - r : 4;
    int nanRows = 0; /* bit q: row q holds a NaN code (found after the first x row's pass, from the cache) */
    const float* s[4];
    for (int q = 0; q < nr; q++) {
      s[q] = scaleInv + (size_t)((row0 + r + q) / blockRows) * scaleCols;
    }
    for (int i = 0; i < m; i++) {
      const float* xr = x + (size_t)i * kDim;
      float* yr = y + (size_t)i * nDim;
      if (nr == 4) {
        rd_v a0 = RD_ZERO(), a1 = a0, a2 = a0, a3 = a0;
        for (int k0 = 0, b = 0; k0 < kv; k0 += bc, b++) {
          int kEnd = kv < k0 + bc ? kv : k0 + bc;
          rd_v s0 = RD_SET1(s[0][b] * 0x1p120f), s1 = RD_SET1(s[1][b] * 0x1p120f);
          rd_v s2 = RD_SET1(s[2][b] * 0x1p120f), s3 = RD_SET1(s[3][b] * 0x1p120f);
          for (int k = k0; k < kEnd; k += RD_LANES) {
            if (i == 0 && (k & 63) == 0) { /* the block's first pass: four lines ahead, as rowdot_bf16 */
              PREFETCH_ROWS(w, (size_t)k, (size_t)kDim, 4);
            }
            rd_v v = RD_LOAD(xr + k);
            a0 = RD_FMA(RD(rowdot_fp8_codes)(w + k, s0), v, a0);
            a1 = RD_FMA(RD(rowdot_fp8_codes)(w + kDim + k, s1), v, a1);
            a2 = RD_FMA(RD(rowdot_fp8_codes)(w + 2 * (size_t)kDim + k, s2), v, a2);
            a3 = RD_FMA(RD(rowdot_fp8_codes)(w + 3 * (size_t)kDim + k, s3), v, a3);
          }
        }
        yr[0] = RD(rowdot_fp8_finish)(a0, w, s[0], bc, xr, kv, kDim);
        yr[1] = RD(rowdot_fp8_finish)(a1, w + kDim, s[1], bc, xr, kv, kDim);
        yr[2] = RD(rowdot_fp8_finish)(a2, w + 2 * (size_t)kDim, s[2], bc, xr, kv, kDim);
        yr[3] = RD(rowdot_fp8_finish)(a3, w + 3 * (size_t)kDim, s[3], bc, xr, kv, kDim);
      } else {
        for (int q = 0; q < nr; q++) {
          const unsigned char* wq = w + (size_t)q * kDim;
          rd_v a = RD_ZERO();
          for (int k0 = 0, b = 0; k0 < kv; k0 += bc, b++) {
            int kEnd = kv < k0 + bc ? kv : k0 + bc;
            rd_v sc = RD_SET1(s[q][b] * 0x1p120f);
            for (int k = k0; k < kEnd; k += RD_LANES) {
              a = RD_FMA(RD(rowdot_fp8_codes)(wq + k, sc), RD_LOAD(xr + k), a);
            }
          }
          yr[q] = RD(rowdot_fp8_finish)(a, wq, s[q], bc, xr, kv, kDim);
        }
      }
      if (i == 0) {
        for (int q = 0; q < nr; q++) {
          nanRows |= fp8_nan_in(w + (size_t)q * kDim, kv) << q;
        }
      }
      for (int q = 0; q < nr; q++) {
        if (nanRows >> q & 1) {
          yr[q] = NAN;
        }
      }
    }
  }
}

/*
 * Decode's absorbed MLA attention of one query row of one head (LatentAttention.Vec.attend on RD_LANES lanes, op for op:
 * the same bits), the head's kv_b_proj rows read as BF16 in place: w holds its qk_nope W_UK rows, then its v_head W_UV rows,
 * rank halves each. q = [q_nope | q_pe]; cache rows [c_j (rank) | k_pe_j (rope)] at stride; sc holds len rounded up to RD_LANES floats,
 * qLat and oLat rank each.
 */
/* (q_latent . c_j + q_pe . k_pe_j) * scale from the latent part's lanes a: LatentAttention.Vec.score. */
RD_TARGET
static inline float RD(mla_score)(rd_v a, const float* qLat, const float* row, int rank, const float* qPe, int rope,
                              float scale) {
  int rv = rank / RD_LANES * RD_LANES;
  float s = RD_FOLD(a);
  for (int k = rv; k < rank; k++) {
    s = __builtin_fmaf(row[k], qLat[k], s);
  }
  const float* pe = row + rank;
  int pv = rope / RD_LANES * RD_LANES;
  rd_v b = RD_ZERO();
  for (int d = 0; d < pv; d += RD_LANES) {
    b = RD_FMA(RD_LOAD(pe + d), RD_LOAD(qPe + d), b);
  }
  float p = RD_FOLD(b);
  for (int d = pv; d < rope; d++) {
    p = __builtin_fmaf(pe[d], qPe[d], p);
  }
  return (s + p) * scale;
}

/* p = softmax(sc[0 .. len)) in place: the max exact in any order; exp lane-wise, lanes past len zeroed, the lanes summed
 * in index order (sc holds len rounded up to RD_LANES floats) */
RD_TARGET
static void RD(mla_softmax)(float* sc, int len) {
  int nPad = (len + RD_LANES - 1) / RD_LANES * RD_LANES;
  const rd_v ninf = RD_SET1(-__builtin_inff());
  rd_v vmax = ninf;
  for (int k = 0; k < nPad; k += RD_LANES) {
    vmax = RD_MAX(RD_KEEP(RD_BELOW(len - k), RD_LOAD(sc + k), ninf), vmax);
  }
  float lanes[RD_LANES];
  RD_STORE(lanes, vmax);
  float mx = lanes[0];
  for (int i = 1; i < RD_LANES; i++) {
    mx = lanes[i] > mx ? lanes[i] : mx;
  }
  rd_v max = RD_SET1(mx);
  rd_v vsum = RD_ZERO();
  for (int k = 0; k < nPad; k += RD_LANES) {
    rd_v e = RD_KEEP(RD_BELOW(len - k), RD_EXP(RD_SUB(RD_LOAD(sc + k), max)), RD_ZERO());
    RD_STORE(sc + k, e);
    vsum = RD_ADD(vsum, e);
  }
  RD_STORE(lanes, vsum);
  float sum = 0;
  for (int i = 0; i < RD_LANES; i++) {
    sum += lanes[i];
  }
  float inv = 1.0f / sum;
  for (int k = 0; k < len; k++) {
    sc[k] *= inv;
  }
}

/* a0..a3 = the partial dots of rows r, r + ld, r + 2 ld, r + 3 ld (read by LOAD) with x over its first rv
 * columns: each x vector loaded once for the four rows */
#define MLA_DOT4(LOAD, r, ld, x, rv, a0, a1, a2, a3)       \
  do {                                                     \
    a0 = RD_ZERO();                                        \
    a1 = a0;                                               \
    a2 = a0;                                               \
    a3 = a0;                                               \
    for (int c_ = 0; c_ < (rv); c_ += RD_LANES) {          \
      rd_v v_ = RD_LOAD((x) + c_);                         \
      a0 = RD_FMA(LOAD((r) + c_), v_, a0);                 \
      a1 = RD_FMA(LOAD((r) + (ld) + c_), v_, a1);          \
      a2 = RD_FMA(LOAD((r) + 2 * (ld) + c_), v_, a2);      \
      a3 = RD_FMA(LOAD((r) + 3 * (ld) + c_), v_, a3);      \
    }                                                      \
  } while (0)

/* out[e] = W_UV[e] . o_latent for e < vHead, four rows per pass */
RD_TARGET
static void RD(mla_uv_out)(const unsigned short* uv, int vHead, int rank, const float* oLat, float* out) {
  int rv = rank / RD_LANES * RD_LANES;
  int e = 0;
  for (; e + 4 <= vHead; e += 4) {
    const unsigned short* r0 = uv + (size_t)e * rank;
    rd_v a0, a1, a2, a3;
    MLA_DOT4(RD_BF16, r0, (size_t)rank, oLat, rv, a0, a1, a2, a3);
    rd_v acc[4] = {a0, a1, a2, a3};
    for (int i = 0; i < 4; i++) {
      const unsigned short* ri = r0 + (size_t)i * rank;
      float s = RD_FOLD(acc[i]);
      for (int k = rv; k < rank; k++) {
        s = __builtin_fmaf(bf16_at(ri + k), oLat[k], s);
      }
      out[e + i] = s;
    }
  }
  for (; e < vHead; e++) {
    const unsigned short* r0 = uv + (size_t)e * rank;
    rd_v a = RD_ZERO();
    for (int c = 0; c < rv; c += RD_LANES) {
      a = RD_FMA(RD_BF16(r0 + c), RD_LOAD(oLat + c), a);
    }
    float s = RD_FOLD(a);
    for (int k = rv; k < rank; k++) {
      s = __builtin_fmaf(bf16_at(r0 + k), oLat[k], s);
    }
    out[e] = s;
  }
}

/*
 * The absorbed attention of one query row for G consecutive heads over one sequence's latent cache, which all heads
 * share: each block of cache rows is loaded once and used by every head while it sits in L1 (for the scores 4 keys at
 * a time, for o_latent MLA_AXPY_ROWS rows at a time), so a long cache streams in once per G heads, not once per head.
 * Head g's kv_b_proj rows start at w + g * (nope + vHead) * rank, its query at q + g * qStride, its output at
 * out + g * oStride. Each head's arithmetic is the one-head kernel's, step by step, so its bits do not depend on G.
 * scratch: q_latent [G, rank], o_latent [G, rank], scores [G, ld] with ld = len rounded up to RD_LANES.
 */
RD_TARGET
static void RD(mla_absorbed_bf16)(const unsigned short* w, int G, int nope, int rope, int vHead, int rank,
                                  float scale, const float* q, int qStride, const float* cache, int stride, int len,
                                  float* out, int oStride, float* scratch) {
  int rv = rank / RD_LANES * RD_LANES;
  size_t headW = (size_t)(nope + vHead) * rank;
  int ld = (len + RD_LANES - 1) / RD_LANES * RD_LANES;
  float* qLats = scratch;
  float* oLats = scratch + (size_t)G * rank;
  float* scs = oLats + (size_t)G * rank;
  /* q_latent[c] = sum_d q_nope[d] W_UK[d, c] */
  for (int g = 0; g < G; g++) {
    mla_axpy_rows(q + (size_t)g * qStride, nope, w + g * headW, 1, (size_t)rank, rank, qLats + (size_t)g * rank);
  }
  /* The group's W_UV rows on their way in while the scores and o_latent run on the cache: read straight after those,
   * they would otherwise come from DRAM with no work left to hide behind */
  for (int g = 0; g < G; g++) {
    const char* uv = (const char*)(w + g * headW + (size_t)nope * rank);
    for (size_t b = 0; b < (size_t)vHead * rank * sizeof(unsigned short); b += 64) {
      _mm_prefetch(uv + b, _MM_HINT_T0);
    }
  }
  int j = 0;
  for (; j + 4 <= len; j += 4) { /* four keys per pass over q_latent, for every head while they sit in L1 */
    const float* c0 = cache + (size_t)j * stride;
    for (int g = 0; g < G; g++) {
      const float* qLat = qLats + (size_t)g * rank;
      const float* qPe = q + (size_t)g * qStride + nope;
      float* sc = scs + (size_t)g * ld;
      rd_v a0, a1, a2, a3;
      MLA_DOT4(RD_LOAD, c0, (size_t)stride, qLat, rv, a0, a1, a2, a3);
      sc[j] = RD(mla_score)(a0, qLat, c0, rank, qPe, rope, scale);
      sc[j + 1] = RD(mla_score)(a1, qLat, c0 + stride, rank, qPe, rope, scale);
      sc[j + 2] = RD(mla_score)(a2, qLat, c0 + 2 * (size_t)stride, rank, qPe, rope, scale);
      sc[j + 3] = RD(mla_score)(a3, qLat, c0 + 3 * (size_t)stride, rank, qPe, rope, scale);
    }
  }
  for (; j < len; j++) {
    const float* c0 = cache + (size_t)j * stride;
    for (int g = 0; g < G; g++) {
      const float* qLat = qLats + (size_t)g * rank;
      rd_v a = RD_ZERO();
      for (int c = 0; c < rv; c += RD_LANES) {
        a = RD_FMA(RD_LOAD(c0 + c), RD_LOAD(qLat + c), a);
      }
      scs[(size_t)g * ld + j] = RD(mla_score)(a, qLat, c0, rank, q + (size_t)g * qStride + nope, rope, scale);
    }
  }
  for (int g = 0; g < G; g++) {
    RD(mla_softmax)(scs + (size_t)g * ld, len);
  }
  /* o_latent[c] = sum_j p_j c_j[c]: a block of cache rows at a time, through every head */
  for (int g = 0; g < G; g++) {
    mla_axpy_zero(rank, oLats + (size_t)g * rank);
  }
  for (int r0 = 0; r0 < len; r0 += MLA_AXPY_ROWS) {
    int r1 = len - r0 < MLA_AXPY_ROWS ? len : r0 + MLA_AXPY_ROWS;
    for (int g = 0; g < G; g++) {
      mla_axpy_block(scs + (size_t)g * ld, r0, r1, cache, 0, (size_t)stride, rank, oLats + (size_t)g * rank);
    }
  }
  for (int g = 0; g < G; g++) {
    RD(mla_uv_out)(w + g * headW + (size_t)nope * rank, vHead, rank, oLats + (size_t)g * rank, out + (size_t)g * oStride);
  }
}
#undef MLA_DOT4

#undef RD_TARGET
#undef rd_v
#undef rd_vi
#undef RD_ZERO
#undef RD_LOAD
#undef RD_LOADI
#undef RD_FMA
#undef RD_MUL
#undef RD_SET1
#undef RD_SET1I
#undef RD_ASF
#undef RD_SLLI
#undef RD_SRAI
#undef RD_AND
#undef RD_XOR
#undef RD_CVT
#undef RD_CODES
#undef RD_FOLD
#undef RD_BF16
#undef RD_ADD
#undef RD_SUB
#undef RD_MAX
#undef RD_STORE
#undef RD_EXP
#undef RD_BELOW
#undef RD_KEEP
#undef RD_CAT_
#undef RD_CAT
#undef RD
#undef RD_LANES
