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
    int inter = gateProj.out();
    float[] g = new float[rows * inter];
    float[] u = new float[rows * inter];
    mm.apply(x, rows, gateProj, g);
    mm.apply(x, rows, upProj, u);
    for (int i = 0; i < g.length; i++) {
      g[i] = silu(g[i]) * u[i];
    }
    float[] out = new float[rows * downProj.out()];
    mm.apply(g, rows, downProj, out);
    return out;
  }

  static float silu(float x) {
    return (float) (x / (1.0 + Math.exp(-x)));
  }

  long activeWeightBytes() {
    return gateProj.weightBytes() + upProj.weightBytes() + downProj.weightBytes();
  }
}
