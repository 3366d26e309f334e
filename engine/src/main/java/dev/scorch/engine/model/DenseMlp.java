package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.Workspace;

/** SwiGLU MLP (DeepseekV3MLP): down_proj(silu(gate_proj(x)) * up_proj(x)); also each expert and the shared experts. */
final class DenseMlp {
  private static final Workspace.Key GATE_UP = new Workspace.Key("mlp.gate_up"); // gate and up: [rows, intermediate] each
  private static final Workspace.Key OUT = new Workspace.Key("mlp.out"); // [rows, hidden]
  private static final Workspace.Key CHUNK_X = new Workspace.Key("mlp.chunk_x"); // [ROW_CHUNK, hidden]
  private static final Workspace.Key CHUNK_OUT = new Workspace.Key("mlp.chunk_out"); // [ROW_CHUNK, hidden]
  // Rows per pass through the MLP: the [rows, intermediate] gate and up buffers stay this long however long the
  // batch (Kimi's dense layer has intermediate 18432). Each output row's bits do not depend on its chunk.
  static final int ROW_CHUNK = 512;
  private static final Workspace.Key GROUP_GATE_UP = new Workspace.Key("mlp.group_gate_up"); // per MLP: [rows, intermediate] × 2
  private static final Workspace.Key GROUP_OUT = new Workspace.Key("mlp.group_out"); // per MLP: [rows, hidden]

  private final Linear gateProj; // [intermediate, hidden]
  private final Linear upProj; // [intermediate, hidden]
  private final Linear downProj; // [hidden, intermediate]
  private final Linear[] gateUp; // {gate_proj, up_proj}: both read x, in one pass

  DenseMlp(ModelWeights w, String prefix) {
    gateProj = w.linear(prefix + "gate_proj.weight");
    upProj = w.linear(prefix + "up_proj.weight");
    downProj = w.linear(prefix + "down_proj.weight");
    gateUp = new Linear[] {gateProj, upProj};
  }

  /** x: [rows, hidden] → [rows, hidden]. */
  float[] forward(float[] x, int rows, Ops ops) {
    return forward(x, rows, Matmuls.prefill(ops), new Workspace());
  }

  /** As above, each row through the matmul mm picks for it; activations live in ws, the result (at least [rows, hidden]) too. */
  float[] forward(float[] x, int rows, Matmuls mm, Workspace ws) {
    if (mm.allDecode()) {
      return forwardDecode(new DenseMlp[] {this}, new float[][] {x}, new int[] {rows}, mm.ops(), ws)[0];
    }
    if (rows <= ROW_CHUNK) {
      return forwardRows(x, rows, mm, ws);
    }
    int in = gateProj.in();
    int hidden = downProj.out();
    float[] out = ws.floats(OUT, rows * hidden);
    float[] xc = ws.floats(CHUNK_X, ROW_CHUNK * in);
    for (int r0 = 0; r0 < rows; r0 += ROW_CHUNK) {
      int n = Math.min(ROW_CHUNK, rows - r0);
      System.arraycopy(x, r0 * in, xc, 0, n * in);
      float[] yc = forwardRows(xc, n, mm.range(r0, r0 + n), ws);
      System.arraycopy(yc, 0, out, r0 * hidden, n * hidden);
    }
    return out;
  }

  /** x: [rows, hidden] → [rows, hidden] in one pass (ws's CHUNK_OUT buffer), each row through the matmul mm picks for it. */
  private float[] forwardRows(float[] x, int rows, Matmuls mm, Workspace ws) {
    int inter = gateProj.out();
    float[][] gu = ws.floatRows(GATE_UP, 2, rows * inter);
    float[] g = gu[0];
    float[] u = gu[1];
    mm.apply(x, rows, gateUp, gu);
    swiglu(g, u, rows, inter, mm.ops());
    float[] out = ws.floats(CHUNK_OUT, rows * downProj.out());
    mm.apply(g, rows, downProj, out);
    return out;
  }

  /**
   * Several MLPs (a decode step's experts), mlps[i] on x[i] [rows[i], hidden], through
   * {@link Ops#matmulDecode} in two grouped passes: gate_proj and up_proj of all, then down_proj of all. Each
   * result has the bits of mlps[i] run alone. Activations live in ws; so do the results (result i at least
   * [rows[i], hidden]).
   */
  static float[][] forwardDecode(DenseMlp[] mlps, float[][] x, int[] rows, Ops ops, Workspace ws) {
    int n = mlps.length;
    float[][] in = new float[2 * n][];
    int[] m = new int[2 * n];
    Linear[] w = new Linear[2 * n];
    int maxRows = 0;
    int maxInter = 0;
    int maxOut = 0;
    for (int i = 0; i < n; i++) {
      maxRows = Math.max(maxRows, rows[i]);
      maxInter = Math.max(maxInter, mlps[i].gateProj.out());
      maxOut = Math.max(maxOut, mlps[i].downProj.out());
    }
    float[][] gu = ws.floatRows(GROUP_GATE_UP, 2 * n, maxRows * maxInter);
    for (int i = 0; i < n; i++) {
      in[2 * i] = in[2 * i + 1] = x[i];
      m[2 * i] = m[2 * i + 1] = rows[i];
      w[2 * i] = mlps[i].gateProj;
      w[2 * i + 1] = mlps[i].upProj;
    }
    ops.matmulDecode(in, m, w, gu);
    float[][] h = new float[n][];
    Linear[] down = new Linear[n];
    float[][] out = ws.floatRows(GROUP_OUT, n, maxRows * maxOut);
    for (int i = 0; i < n; i++) {
      float[] g = gu[2 * i];
      float[] u = gu[2 * i + 1];
      for (int k = 0; k < rows[i] * mlps[i].gateProj.out(); k++) {
        g[k] = silu(g[k]) * u[k];
      }
      h[i] = g;
      down[i] = mlps[i].downProj;
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
