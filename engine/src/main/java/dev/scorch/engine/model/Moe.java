package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Ops;

/**
 * DeepseekV3MoE: routed experts weighted by the router, plus the shared experts on the same input. Tokens
 * are grouped per expert so each expert runs one GEMM over its tokens; experts are visited in ascending id
 * order, so each token's sum has the same order in any batch.
 */
final class Moe {
  private final MoeRouter gate;
  private final DenseMlp[] experts;
  private final DenseMlp sharedExperts; // null when n_shared_experts is 0
  private final int hidden;

  Moe(ModelWeights w, int layer) {
    ModelConfig c = w.config();
    String p = WeightLayout.layer(layer) + "mlp.";
    hidden = c.hiddenSize();
    gate = new MoeRouter(w, p);
    experts = new DenseMlp[c.nRoutedExperts()];
    for (int e = 0; e < experts.length; e++) {
      experts[e] = new DenseMlp(w, p + "experts." + e + ".");
    }
    sharedExperts = c.nSharedExperts() > 0 ? new DenseMlp(w, p + "shared_experts.") : null;
  }

  /** x: [T, hidden] → [T, hidden]; routes[i * top_k ..] receives token i's experts when not null. */
  float[] forward(float[] x, int t, Ops ops, int[] routes) {
    return forward(x, t, Matmuls.prefill(ops), routes);
  }

  /** As above, each row through the matmul mm picks for it. */
  float[] forward(float[] x, int t, Matmuls mm, int[] routes) {
    MoeRouter.Routing r = gate.route(x, t, mm);
    int topK = r.topK();
    if (routes != null) {
      System.arraycopy(r.experts(), 0, routes, 0, t * topK);
    }
    // Tokens per expert, in token order: the rows each expert's GEMM runs over.
    int[] count = new int[experts.length];
    for (int e : r.experts()) {
      count[e]++;
    }
    float[] y = new float[t * hidden];
    if (mm.allDecode()) {
      return forwardDecode(x, t, r, count, mm, y);
    }
    for (int e = 0; e < experts.length; e++) {
      if (count[e] == 0) {
        continue;
      }
      int[] rows = new int[count[e]];
      float[] rowWeight = new float[count[e]];
      int n = 0;
      for (int i = 0; i < t; i++) {
        for (int k = 0; k < topK; k++) {
          if (r.experts()[i * topK + k] == e) {
            rows[n] = i;
            rowWeight[n++] = r.weights()[i * topK + k];
          }
        }
      }
      float[] xe = new float[n * hidden]; // [tokens of e, hidden]
      for (int j = 0; j < n; j++) {
        System.arraycopy(x, rows[j] * hidden, xe, j * hidden, hidden);
      }
      float[] ye = experts[e].forward(xe, n, mm.rows(rows, n));
      // Each token of e is a different row of y: rows spread over the engine's threads.
      mm.ops().forEachRow(n, j -> {
        int yo = rows[j] * hidden;
        for (int d = 0; d < hidden; d++) {
          y[yo + d] += rowWeight[j] * ye[j * hidden + d];
        }
      });
    }
    if (sharedExperts != null) {
      float[] s = sharedExperts.forward(x, t, mm);
      mm.ops().forEachRow(t, i -> {
        for (int d = i * hidden; d < (i + 1) * hidden; d++) {
          y[d] += s[d];
        }
      });
    }
    return y;
  }

  /**
   * The decode step: every expert hit and the shared experts run as one group of matmuls (two parallel
   * passes in all), then are summed exactly as {@link #forward} sums them, experts in ascending id order.
   */
  private float[] forwardDecode(float[] x, int t, MoeRouter.Routing r, int[] count, Matmuls mm, float[] y) {
    int topK = r.topK();
    int hit = 0;
    for (int c : count) {
      hit += c > 0 ? 1 : 0;
    }
    int groups = hit + (sharedExperts != null ? 1 : 0);
    DenseMlp[] mlps = new DenseMlp[groups];
    float[][] xs = new float[groups][];
    int[] n = new int[groups];
    int[][] rows = new int[hit][];
    float[][] rowWeight = new float[hit][];
    for (int e = 0, g = 0; e < experts.length; e++) {
      if (count[e] == 0) {
        continue;
      }
      rows[g] = new int[count[e]];
      rowWeight[g] = new float[count[e]];
      xs[g] = new float[count[e] * hidden]; // [tokens of e, hidden]
      for (int i = 0, j = 0; i < t; i++) {
        for (int k = 0; k < topK; k++) {
          if (r.experts()[i * topK + k] == e) {
            rows[g][j] = i;
            rowWeight[g][j] = r.weights()[i * topK + k];
            System.arraycopy(x, i * hidden, xs[g], j++ * hidden, hidden);
          }
        }
      }
      mlps[g] = experts[e];
      n[g++] = count[e];
    }
    if (sharedExperts != null) {
      mlps[hit] = sharedExperts;
      xs[hit] = x;
      n[hit] = t;
    }
    float[][] out = DenseMlp.forwardDecode(mlps, xs, n, mm.ops());
    for (int g = 0; g < hit; g++) {
      float[] ye = out[g];
      for (int j = 0; j < n[g]; j++) {
        int yo = rows[g][j] * hidden;
        for (int d = 0; d < hidden; d++) {
          y[yo + d] += rowWeight[g][j] * ye[j * hidden + d];
        }
      }
    }
    if (sharedExperts != null) {
      float[] s = out[hit];
      for (int i = 0; i < y.length; i++) {
        y[i] += s[i];
      }
    }
    return y;
  }
}
