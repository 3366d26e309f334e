package dev.scorch.engine.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * y[M, N] = x[M, K] · Wᵀ with W [N, K] in its checkpoint dtype. W is decoded to fp32 while a panel of NR
 * output columns × KC inputs is packed (once per panel, reused by every row of x), then a register-tiled
 * Vector API micro-kernel runs MR rows at a time.
 *
 * <p>Every output is one fused-multiply-add chain over k = 0 .. K-1 in order, whatever M, the tile a row
 * lands in, or the thread that runs it: a row's result is bit-identical in any batch and at any thread count.
 */
public final class PackedGemm {
  static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
  static final int L = S.length();
  /** Output columns per panel: two vectors. */
  static final int NR = 2 * L;
  /** Rows of x per micro-kernel call. */
  static final int MR = 6;
  /** Inputs per packed panel block. */
  static final int KC = 256;

  private PackedGemm() {}

  /** Per-thread buffers: packed panels and their output tiles, reused call after call. */
  private static final class Scratch {
    final float[][] panels = new float[PANELS_PER_BLOCK][KC * NR];
    final float[] row = new float[KC];
    final float[][] c = new float[PANELS_PER_BLOCK][0];

    void ensure(int np, int m) {
      for (int j = 0; j < np; j++) {
        if (c[j].length < m * NR) {
          c[j] = new float[m * NR];
        }
      }
    }
  }

  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

  /** Panels packed together: the rows of x in L1 are reused across this many panels before moving on. */
  static final int PANELS_PER_BLOCK = 8;

  public static void matmul(float[] x, int m, Linear w, float[] y, Parallel par) {
    int kDim = w.in();
    int nDim = w.out();
    int panels = (nDim + NR - 1) / NR;
    // Enough blocks to keep every thread busy, at most PANELS_PER_BLOCK panels each.
    int perBlock = Math.max(1, Math.min(PANELS_PER_BLOCK, panels / (2 * par.threads())));
    int blocks = (panels + perBlock - 1) / perBlock;
    par.forEach(blocks, b -> {
      Scratch s = SCRATCH.get();
      int p0 = b * perBlock;
      int np = Math.min(perBlock, panels - p0);
      s.ensure(np, m);
      for (int k0 = 0; k0 < kDim; k0 += KC) {
        int kc = Math.min(KC, kDim - k0);
        for (int j = 0; j < np; j++) {
          int n0 = (p0 + j) * NR;
          pack(w, n0, Math.min(NR, nDim - n0), k0, kc, s.panels[j], s.row);
        }
        boolean first = k0 == 0;
        int i = 0;
        for (; i + MR <= m; i += MR) {
          for (int j = 0; j < np; j++) {
            kernel6(x, i, kDim, k0, kc, s.panels[j], s.c[j], first);
          }
        }
        for (; i < m; i++) {
          for (int j = 0; j < np; j++) {
            kernel1(x, i, kDim, k0, kc, s.panels[j], s.c[j], first);
          }
        }
      }
      for (int j = 0; j < np; j++) {
        int n0 = (p0 + j) * NR;
        int nr = Math.min(NR, nDim - n0);
        for (int i = 0; i < m; i++) {
          System.arraycopy(s.c[j], i * NR, y, i * nDim + n0, nr);
        }
      }
    });
  }

  /** panel[k * NR + j] = W[n0 + j, k0 + k] in fp32; columns past N are zero. */
  private static void pack(Linear w, int n0, int nr, int k0, int kc, float[] panel, float[] row) {
    for (int j = 0; j < nr; j++) {
      w.row(n0 + j, k0, kc, row, 0);
      for (int k = 0; k < kc; k++) {
        panel[k * NR + j] = row[k];
      }
    }
    for (int j = nr; j < NR; j++) {
      for (int k = 0; k < kc; k++) {
        panel[k * NR + j] = 0f;
      }
    }
  }

  private static void kernel6(float[] x, int i, int kDim, int k0, int kc, float[] panel, float[] c, boolean first) {
    int c0 = i * NR;
    FloatVector a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51;
    if (first) {
      a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = FloatVector.zero(S);
    } else {
      a00 = FloatVector.fromArray(S, c, c0);
      a01 = FloatVector.fromArray(S, c, c0 + L);
      a10 = FloatVector.fromArray(S, c, c0 + NR);
      a11 = FloatVector.fromArray(S, c, c0 + NR + L);
      a20 = FloatVector.fromArray(S, c, c0 + 2 * NR);
      a21 = FloatVector.fromArray(S, c, c0 + 2 * NR + L);
      a30 = FloatVector.fromArray(S, c, c0 + 3 * NR);
      a31 = FloatVector.fromArray(S, c, c0 + 3 * NR + L);
      a40 = FloatVector.fromArray(S, c, c0 + 4 * NR);
      a41 = FloatVector.fromArray(S, c, c0 + 4 * NR + L);
      a50 = FloatVector.fromArray(S, c, c0 + 5 * NR);
      a51 = FloatVector.fromArray(S, c, c0 + 5 * NR + L);
    }
    int x0 = i * kDim + k0;
    int x1 = x0 + kDim;
    int x2 = x1 + kDim;
    int x3 = x2 + kDim;
    int x4 = x3 + kDim;
    int x5 = x4 + kDim;
    for (int k = 0; k < kc; k++) {
      FloatVector b0 = FloatVector.fromArray(S, panel, k * NR);
      FloatVector b1 = FloatVector.fromArray(S, panel, k * NR + L);
      FloatVector v = FloatVector.broadcast(S, x[x0 + k]);
      a00 = b0.fma(v, a00);
      a01 = b1.fma(v, a01);
      v = FloatVector.broadcast(S, x[x1 + k]);
      a10 = b0.fma(v, a10);
      a11 = b1.fma(v, a11);
      v = FloatVector.broadcast(S, x[x2 + k]);
      a20 = b0.fma(v, a20);
      a21 = b1.fma(v, a21);
      v = FloatVector.broadcast(S, x[x3 + k]);
      a30 = b0.fma(v, a30);
      a31 = b1.fma(v, a31);
      v = FloatVector.broadcast(S, x[x4 + k]);
      a40 = b0.fma(v, a40);
      a41 = b1.fma(v, a41);
      v = FloatVector.broadcast(S, x[x5 + k]);
      a50 = b0.fma(v, a50);
      a51 = b1.fma(v, a51);
    }
    a00.intoArray(c, c0);
    a01.intoArray(c, c0 + L);
    a10.intoArray(c, c0 + NR);
    a11.intoArray(c, c0 + NR + L);
    a20.intoArray(c, c0 + 2 * NR);
    a21.intoArray(c, c0 + 2 * NR + L);
    a30.intoArray(c, c0 + 3 * NR);
    a31.intoArray(c, c0 + 3 * NR + L);
    a40.intoArray(c, c0 + 4 * NR);
    a41.intoArray(c, c0 + 4 * NR + L);
    a50.intoArray(c, c0 + 5 * NR);
    a51.intoArray(c, c0 + 5 * NR + L);
  }

  private static void kernel1(float[] x, int i, int kDim, int k0, int kc, float[] panel, float[] c, boolean first) {
    int c0 = i * NR;
    FloatVector a0 = first ? FloatVector.zero(S) : FloatVector.fromArray(S, c, c0);
    FloatVector a1 = first ? FloatVector.zero(S) : FloatVector.fromArray(S, c, c0 + L);
    int x0 = i * kDim + k0;
    for (int k = 0; k < kc; k++) {
      FloatVector v = FloatVector.broadcast(S, x[x0 + k]);
      a0 = FloatVector.fromArray(S, panel, k * NR).fma(v, a0);
      a1 = FloatVector.fromArray(S, panel, k * NR + L).fma(v, a1);
    }
    a0.intoArray(c, c0);
    a1.intoArray(c, c0 + L);
  }

  /** The plain reference: one float accumulation per output, simple loops, W decoded row by row. */
  public static void reference(float[] x, int m, Linear w, float[] y) {
    int kDim = w.in();
    int nDim = w.out();
    float[] row = new float[kDim];
    for (int n = 0; n < nDim; n++) {
      w.row(n, 0, kDim, row, 0);
      for (int i = 0; i < m; i++) {
        float acc = 0;
        for (int k = 0; k < kDim; k++) {
          acc += x[i * kDim + k] * row[k];
        }
        y[i * nDim + n] = acc;
      }
    }
  }
}
