package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.runtime.Workspace;

/**
 * DeepseekV3MoE: routed experts weighted by the router, plus the shared experts on the same input. Tokens
 * are grouped per expert so each expert runs one GEMM over its tokens; experts are visited in ascending id
 * order, so each token's sum has the same order in any batch.
 */
final class Moe {
    /** A workspace's buffers for every MoE layer (one runs at a time); its experts' are the MLPs' scratch. */
    static final class Scratch extends Workspace.Buffers {
        private final MoeRouter.Scratch router;
        private final DenseMlp.Scratch mlp; // shared with the dense layers' MLP
        private int[] count; // [n_routed_experts]
        private int[] rows; // [tokens of one expert]
        private float[] rowWeight; // [tokens of one expert]
        private float[] xe; // [tokens of one expert, hidden]
        private float[] y; // [T, hidden]
        private final AddRows add = new AddRows();
        private final CopyRows copy = new CopyRows();
        // The decode group: per expert hit its tokens [tokens, hidden]; each hit's tokens in turn and their weights
        // [T * top_k]; the argument arrays, exact lengths (experts hit, then the shared experts).
        private float[][] groupX;
        private int[] groupRows;
        private float[] groupWeight;
        private final Workspace.ByLength<DenseMlp[]> groupMlps = new Workspace.ByLength<>(DenseMlp[]::new);
        private final Workspace.ByLength<float[][]> groupInputs = new Workspace.ByLength<>(float[][]::new);
        private final Workspace.ByLength<int[]> groupN = new Workspace.ByLength<>(int[]::new);

        Scratch(Workspace ws, DenseMlp.Scratch mlp) {
            super(ws);
            this.router = new MoeRouter.Scratch(ws);
            this.mlp = mlp;
        }
    }

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

    /**
     * x: [T, hidden] → [T, hidden], each row through the matmul mm picks for it; routes[i * top_k ..] receives token i's
     * experts when not null. Activations live in s, the result (at least [T, hidden]) too. x is consumed: the shared
     * experts write their output over it once the routed experts have read it.
     */
    float[] forward(float[] x, int t, Matmuls mm, int[] routes, Scratch s) {
        gate.route(x, t, mm, s.router);
        int topK = gate.topK();
        int[] chosen = s.router.experts(); // [T, top_k]
        float[] weights = s.router.weights(); // [T, top_k]
        if (routes != null) {
            System.arraycopy(chosen, 0, routes, 0, t * topK);
        }
        // Tokens per expert, in token order: the rows each expert's GEMM runs over.
        int[] count = s.count = s.intZeros(s.count, experts.length);
        for (int i = 0; i < t * topK; i++) {
            count[chosen[i]]++;
        }
        int maxCount = 0; // the busiest expert's tokens: buffers are sized once for it, not grown expert by expert
        for (int e = 0; e < experts.length; e++) {
            maxCount = Math.max(maxCount, count[e]);
        }
        float[] y = s.y = s.zeros(s.y, t * hidden);
        if (mm.allDecode()) {
            return forwardDecode(x, t, count, maxCount, mm, y, s);
        }
        int[] rows = s.rows = s.ints(s.rows, maxCount);
        float[] rowWeight = s.rowWeight = s.floats(s.rowWeight, maxCount);
        float[] xe = s.xe = s.floats(s.xe, maxCount * hidden); // [tokens of e, hidden]
        for (int e = 0; e < experts.length; e++) {
            if (count[e] == 0) {
                continue;
            }
            int n = 0;
            for (int i = 0; i < t; i++) {
                for (int k = 0; k < topK; k++) {
                    if (chosen[i * topK + k] == e) {
                        rows[n] = i;
                        rowWeight[n++] = weights[i * topK + k];
                    }
                }
            }
            s.copy.gather(mm.ops(), x, rows, n, xe, hidden);
            experts[e].forward(xe, n, mm.rows(rows, n), s.mlp, xe); // xe: e's tokens, then its output
            // Each token of e is a different row of y: rows spread over the engine's threads.
            s.add.run(mm.ops(), n, y, xe, rows, rowWeight, hidden);
        }
        if (sharedExperts != null) {
            sharedExperts.forward(x, t, mm, s.mlp, x); // x: the layer's normed input, then the shared experts' output
            s.add.run(mm.ops(), t, y, x, null, null, hidden);
        }
        return y;
    }

    /**
     * The decode step: every expert hit and the shared experts run as one group of matmuls (two parallel
     * passes in all), then are summed exactly as {@link #forward} sums them, experts in ascending id order.
     */
    private float[] forwardDecode(float[] x, int t, int[] count, int maxCount, Matmuls mm, float[] y, Scratch s) {
        int topK = gate.topK();
        int[] chosen = s.router.experts();
        float[] weights = s.router.weights();
        int hit = 0;
        for (int e = 0; e < experts.length; e++) {
            hit += count[e] > 0 ? 1 : 0;
        }
        int groups = hit + (sharedExperts != null ? 1 : 0);
        DenseMlp[] mlps = s.groupMlps.get(groups);
        float[][] xs = s.groupInputs.get(groups);
        float[][] gathered = s.groupX = s.floatRows(s.groupX, hit, maxCount * hidden);
        int[] n = s.groupN.get(groups);
        // Hit g's tokens are rows[base .. base + n[g]) in turn, with their router weights.
        int[] rows = s.groupRows = s.ints(s.groupRows, t * topK);
        float[] rowWeight = s.groupWeight = s.floats(s.groupWeight, t * topK);
        for (int e = 0, g = 0, base = 0; e < experts.length; e++) {
            if (count[e] == 0) {
                continue;
            }
            xs[g] = gathered[g]; // [tokens of e, hidden]
            for (int i = 0, j = 0; i < t; i++) {
                for (int k = 0; k < topK; k++) {
                    if (chosen[i * topK + k] == e) {
                        rows[base + j] = i;
                        rowWeight[base + j] = weights[i * topK + k];
                        System.arraycopy(x, i * hidden, xs[g], j++ * hidden, hidden);
                    }
                }
            }
            mlps[g] = experts[e];
            n[g++] = count[e];
            base += count[e];
        }
        if (sharedExperts != null) {
            mlps[hit] = sharedExperts;
            xs[hit] = x;
            n[hit] = t;
        }
        float[][] out = DenseMlp.forwardDecode(mlps, xs, n, mm.ops(), s.mlp);
        for (int g = 0, base = 0; g < hit; base += n[g++]) {
            float[] ye = out[g];
            for (int j = 0; j < n[g]; j++) {
                int yo = rows[base + j] * hidden;
                for (int d = 0; d < hidden; d++) {
                    y[yo + d] += rowWeight[base + j] * ye[j * hidden + d];
                }
            }
        }
        if (sharedExperts != null) {
            float[] shared = out[hit];
            for (int i = 0; i < t * hidden; i++) {
                y[i] += shared[i];
            }
        }
        return y;
    }
}
