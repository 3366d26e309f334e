package dev.scorch.engine.kernels;

import java.util.function.IntConsumer;

/** RMSNorm in fp32 as the reference: x * rsqrt(mean(x²) + eps) * weight, per row of [rows, dim]. */
public final class RmsNorm {
  private RmsNorm() {}

  /** Normalises x[row * stride + offset .. + dim) into out[row * dim ..) for every row. */
  public static void apply(float[] x, int rows, int stride, int offset, int dim, float[] weight, double eps, float[] out) {
    for (int r = 0; r < rows; r++) {
      row(x, r * stride + offset, dim, weight, eps, out, r * dim);
    }
  }

  public static void apply(float[] x, int rows, int dim, float[] weight, double eps, float[] out) {
    apply(x, rows, dim, 0, dim, weight, eps, out);
  }

  /** out[oi .. oi + dim) = RMSNorm(x[xi .. xi + dim)); out may be x at the same offset. */
  static void row(float[] x, int xi, int dim, float[] weight, double eps, float[] out, int oi) {
    float ss = 0;
    for (int i = 0; i < dim; i++) {
      ss += x[xi + i] * x[xi + i];
    }
    float inv = (float) (1.0 / Math.sqrt(ss / dim + eps));
    for (int i = 0; i < dim; i++) {
      out[oi + i] = weight[i] * (x[xi + i] * inv);
    }
  }

  /**
   * The same per row, rows spread over {@link Ops#forEachRow}'s threads; each row's bits are {@link #apply}'s. One per
   * workspace, set per call, so that a call makes no lambda.
   */
  public static final class Rows implements IntConsumer {
    private float[] x;
    private float[] add;
    private int stride;
    private int offset;
    private int dim;
    private float[] weight;
    private double eps;
    private float[] out;

    /** As {@link RmsNorm#apply(float[], int, int, int, int, float[], double, float[])}. */
    public void apply(Ops ops, float[] x, int rows, int stride, int offset, int dim, float[] weight, double eps, float[] out) {
      run(ops, x, null, rows, stride, offset, dim, weight, eps, out);
    }

    public void apply(Ops ops, float[] x, int rows, int dim, float[] weight, double eps, float[] out) {
      run(ops, x, null, rows, dim, 0, dim, weight, eps, out);
    }

    /**
     * The residual step and the next norm in one pass over [rows, dim]: x += add, then out = RMSNorm(x), row by row.
     * out may be add (each row of add is read before its row of out is written).
     */
    public void addThenApply(Ops ops, float[] x, float[] add, int rows, int dim, float[] weight, double eps, float[] out) {
      run(ops, x, add, rows, dim, 0, dim, weight, eps, out);
    }

    private void run(Ops ops, float[] x, float[] add, int rows, int stride, int offset, int dim, float[] weight, double eps,
        float[] out) {
      this.x = x;
      this.add = add;
      this.stride = stride;
      this.offset = offset;
      this.dim = dim;
      this.weight = weight;
      this.eps = eps;
      this.out = out;
      try {
        ops.forEachRow(rows, this);
      } finally {
        this.x = this.add = this.weight = this.out = null;
      }
    }

    @Override
    public void accept(int r) {
      int xi = r * stride + offset;
      if (add != null) {
        for (int i = 0; i < dim; i++) {
          x[xi + i] += add[r * dim + i];
        }
      }
      row(x, xi, dim, weight, eps, out, r * dim);
    }
  }
}
