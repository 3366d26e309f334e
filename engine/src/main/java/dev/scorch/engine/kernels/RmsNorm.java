package dev.scorch.engine.kernels;

/** RMSNorm in fp32 as the reference: x * rsqrt(mean(x²) + eps) * weight, per row of [rows, dim]. */
public final class RmsNorm {
  private RmsNorm() {}

  /** Normalises x[row * stride + offset .. + dim) into out[row * dim ..) for every row. */
  public static void apply(float[] x, int rows, int stride, int offset, int dim, float[] weight, double eps, float[] out) {
    for (int r = 0; r < rows; r++) {
      int xi = r * stride + offset;
      float ss = 0;
      for (int i = 0; i < dim; i++) {
        ss += x[xi + i] * x[xi + i];
      }
      float inv = (float) (1.0 / Math.sqrt(ss / dim + eps));
      int oi = r * dim;
      for (int i = 0; i < dim; i++) {
        out[oi + i] = weight[i] * (x[xi + i] * inv);
      }
    }
  }

  public static void apply(float[] x, int rows, int dim, float[] weight, double eps, float[] out) {
    apply(x, rows, dim, 0, dim, weight, eps, out);
  }
}
