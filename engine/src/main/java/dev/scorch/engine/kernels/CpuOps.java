package dev.scorch.engine.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The fast CPU backend: packed-panel Vector API GEMM (scalar fallback without SIMD), and attention computed
 * one query row at a time per (sequence, head, query tile) work item, so no [T × T × heads] score tensor
 * exists. Every reduction has a fixed order independent of batch mates and thread count.
 */
public final class CpuOps implements Ops {
  private static final int QUERY_TILE = 32;

  private final Parallel par;
  private final boolean simd;

  public CpuOps(int threads) {
    this(threads, vectorApiUsable());
  }

  public CpuOps(int threads, boolean simd) {
    this.par = new Parallel(threads);
    this.simd = simd;
  }

  /** True when jdk.incubator.vector is present and its preferred float species has 4+ lanes. */
  public static boolean vectorApiUsable() {
    try {
      return FloatVector.SPECIES_PREFERRED.length() >= 4;
    } catch (Throwable t) {
      return false;
    }
  }

  public boolean simd() {
    return simd;
  }

  @Override
  public int threads() {
    return par.threads();
  }

  public Parallel parallel() {
    return par;
  }

  @Override
  public void matmul(float[] x, int m, Linear w, float[] y) {
    if (simd) {
      PackedGemm.matmul(x, m, w, y, par);
    } else {
      ScalarGemm.matmul(x, m, w, y, par);
    }
  }

  @Override
  public void attention(MlaInputs in, float[] out) {
    int heads = in.heads();
    int[] tilesBefore = new int[in.seqLen().length + 1];
    for (int s = 0; s < in.seqLen().length; s++) {
      tilesBefore[s + 1] = tilesBefore[s] + (in.seqLen()[s] + QUERY_TILE - 1) / QUERY_TILE;
    }
    int items = tilesBefore[in.seqLen().length] * heads;
    int maxLen = 0;
    for (int len : in.seqLen()) {
      maxLen = Math.max(maxLen, len);
    }
    int scoreLen = maxLen;
    par.forEach(items, item -> {
      int h = item % heads;
      int tile = item / heads;
      int s = 0;
      while (tilesBefore[s + 1] <= tile) {
        s++;
      }
      int q0 = (tile - tilesBefore[s]) * QUERY_TILE;
      int q1 = Math.min(in.seqLen()[s], q0 + QUERY_TILE);
      float[] scores = new float[scoreLen];
      for (int i = q0; i < q1; i++) {
        attendRow(in, in.seqStart()[s], i, h, scores, out);
      }
    });
  }

  /** One query row i (0-based inside its sequence starting at packed row base) of head h. */
  private void attendRow(MlaInputs in, int base, int i, int h, float[] scores, float[] out) {
    int qHead = in.qHead();
    int kvHead = in.kvHead();
    int heads = in.heads();
    int qOff = ((base + i) * heads + h) * qHead;
    float max = Float.NEGATIVE_INFINITY;
    for (int j = 0; j <= i; j++) {
      int kOff = ((base + j) * heads + h) * kvHead;
      float nope = dot(in.q(), qOff, in.kv(), kOff, in.qkNope());
      float pe = dot(in.q(), qOff + in.qkNope(), in.kPe(), (base + j) * in.qkRope(), in.qkRope());
      float sc = (nope + pe) * in.scale();
      scores[j] = sc;
      max = Math.max(max, sc);
    }
    float sum = 0;
    for (int j = 0; j <= i; j++) {
      float e = (float) Math.exp(scores[j] - max);
      scores[j] = e;
      sum += e;
    }
    float inv = 1f / sum;
    int vDim = in.vHead();
    int oOff = ((base + i) * heads + h) * vDim;
    java.util.Arrays.fill(out, oOff, oOff + vDim, 0f);
    for (int j = 0; j <= i; j++) {
      float p = scores[j] * inv;
      int vOff = ((base + j) * heads + h) * kvHead + in.qkNope();
      axpy(p, in.kv(), vOff, out, oOff, vDim);
    }
  }

  private float dot(float[] a, int ao, float[] b, int bo, int n) {
    if (!simd) {
      float acc = 0;
      for (int k = 0; k < n; k++) {
        acc = Math.fma(a[ao + k], b[bo + k], acc);
      }
      return acc;
    }
    return VecMath.dot(a, ao, b, bo, n);
  }

  private void axpy(float p, float[] x, int xo, float[] y, int yo, int n) {
    if (simd) {
      VecMath.axpy(p, x, xo, y, yo, n);
      return;
    }
    for (int k = 0; k < n; k++) {
      y[yo + k] = Math.fma(p, x[xo + k], y[yo + k]);
    }
  }

  @Override
  public void close() {
    par.close();
  }

  /** Vector helpers kept apart so the scalar path never loads Vector API classes. */
  static final class VecMath {
    static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

    /**
     * Lane-wise FMA over full vectors, then the lanes summed in index order, then a scalar FMA tail.
     * (reduceLanes(ADD) may sum in any order, differently in the interpreter and in compiled code.)
     */
    static float dot(float[] a, int ao, float[] b, int bo, int n) {
      int l = S.length();
      int k = 0;
      float acc = 0;
      if (n >= l) {
        FloatVector v = FloatVector.zero(S);
        for (; k + l <= n; k += l) {
          v = FloatVector.fromArray(S, a, ao + k).fma(FloatVector.fromArray(S, b, bo + k), v);
        }
        float[] lanes = new float[l];
        v.intoArray(lanes, 0);
        for (float x : lanes) {
          acc += x;
        }
      }
      for (; k < n; k++) {
        acc = Math.fma(a[ao + k], b[bo + k], acc);
      }
      return acc;
    }

    /** y += p · x lane-wise: the same fused operation per element as the scalar loop. */
    static void axpy(float p, float[] x, int xo, float[] y, int yo, int n) {
      int l = S.length();
      int k = 0;
      FloatVector pv = FloatVector.broadcast(S, p);
      for (; k + l <= n; k += l) {
        FloatVector.fromArray(S, x, xo + k).fma(pv, FloatVector.fromArray(S, y, yo + k)).intoArray(y, yo + k);
      }
      for (; k < n; k++) {
        y[yo + k] = Math.fma(p, x[xo + k], y[yo + k]);
      }
    }
  }
}
