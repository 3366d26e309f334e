package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;

/** SwiGLU MLP (DeepseekV3MLP): down_proj(silu(gate_proj(x)) * up_proj(x)); also each expert and the shared experts. */
final class DenseMlp {
  private final Linear gateProj; // [intermediate, hidden]
  private final Linear upProj; // [intermediate, hidden]
  private final Linear downProj; // [hidden, intermediate]

  DenseMlp(ModelWeights w, String prefix) {
    gateProj = w.linear(prefix + "gate_proj.weight");
    upProj = w.linear(prefix + "up_proj.weight");
    downProj = w.linear(prefix + "down_proj.weight");
  }

  /** x: [rows, hidden] → [rows, hidden]. */
  float[] forward(float[] x, int rows, Ops ops) {
    return forward(x, rows, Matmuls.prefill(ops));
  }

  /** As above, each row through the matmul mm picks for it. */
  float[] forward(float[] x, int rows, Matmuls mm) {
    if (mm.allDecode()) {
      return forwardDecode(new DenseMlp[] {this}, new float[][] {x}, new int[] {rows}, mm.ops())[0];
    }
    int inter = gateProj.out();
    float[] g = new float[rows * inter];
    float[] u = new float[rows * inter];
    mm.apply(x, rows, new Linear[] {gateProj, upProj}, new float[][] {g, u});
    swiglu(g, u, rows, inter, mm.ops());
    float[] out = new float[rows * downProj.out()];
    mm.apply(g, rows, downProj, out);
    return out;
  }

  /**
   * Several MLPs (a decode step's experts), mlps[i] on x[i] [rows[i], hidden], through
   * {@link Ops#matmulDecode} in two grouped passes: gate_proj and up_proj of all, then down_proj of all. Each
   * result has the bits of mlps[i] run alone.
   */
  static float[][] forwardDecode(DenseMlp[] mlps, float[][] x, int[] rows, Ops ops) {
    int n = mlps.length;
    float[][] in = new float[2 * n][];
    int[] m = new int[2 * n];
    Linear[] w = new Linear[2 * n];
    float[][] gu = new float[2 * n][];
    for (int i = 0; i < n; i++) {
      in[2 * i] = in[2 * i + 1] = x[i];
      m[2 * i] = m[2 * i + 1] = rows[i];
      w[2 * i] = mlps[i].gateProj;
      w[2 * i + 1] = mlps[i].upProj;
      gu[2 * i] = new float[rows[i] * mlps[i].gateProj.out()];
      gu[2 * i + 1] = new float[rows[i] * mlps[i].upProj.out()];
    }
    ops.matmulDecode(in, m, w, gu);
    float[][] h = new float[n][];
    Linear[] down = new Linear[n];
    float[][] out = new float[n][];
    for (int i = 0; i < n; i++) {
      float[] g = gu[2 * i];
      float[] u = gu[2 * i + 1];
      for (int k = 0; k < g.length; k++) {
        g[k] = silu(g[k]) * u[k];
      }
      h[i] = g;
      down[i] = mlps[i].downProj;
      out[i] = new float[rows[i] * down[i].out()];
    }
    ops.matmulDecode(h, rows, down, out);
    return out;
  }

  /** g = silu(g) · u over [rows, inter], rows spread over the engine's threads. */
  private static void swiglu(float[] g, float[] u, int rows, int inter, Ops ops) {
    ops.forEachRow(rows, i -> {
      for (int k = i * inter; k < (i + 1) * inter; k++) {
        g[k] = silu(g[k]) * u[k];
      }
    });
  }

  static float silu(float x) {
    return (float) (x / (1.0 + Math.exp(-x)));
  }

  long activeWeightBytes() {
    return gateProj.weightBytes() + upProj.weightBytes() + downProj.weightBytes();
  }
}
