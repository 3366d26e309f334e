package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.Workspace;

/**
 * DeepseekV3MoE: routed experts weighted by the router, plus the shared experts on the same input. Tokens
 * are grouped per expert so each expert runs one GEMM over its tokens; experts are visited in ascending id
 * order, so each token's sum has the same order in any batch.
 */
final class Moe {
    private static final Workspace.Key COUNT = new Workspace.Key("moe.count"); // [n_routed_experts]
    private static final Workspace.Key ROWS = new Workspace.Key("moe.rows"); // [tokens of one expert]
    private static final Workspace.Key ROW_WEIGHT = new Workspace.Key("moe.row_weight"); // [tokens of one expert]
    private static final Workspace.Key XE = new Workspace.Key("moe.xe"); // [tokens of one expert, hidden]
    private static final Workspace.Key Y = new Workspace.Key("moe.y"); // [T, hidden]
    private static final Workspace.Key GROUP_X = new Workspace.Key("moe.group_x"); // per expert hit: [tokens, hidden]
    private static final Workspace.Key GROUP_ROWS =
            new Workspace.Key("moe.group_rows"); // [T * top_k]: each hit's tokens in turn
    private static final Workspace.Key GROUP_WEIGHT = new Workspace.Key("moe.group_weight"); // [T * top_k]
    // The decode group's argument arrays, exact lengths (experts hit, then the shared experts).
    private static final Workspace.Key GROUP_MLPS = new Workspace.Key("moe.group_mlps");
    private static final Workspace.Key GROUP_INPUTS = new Workspace.Key("moe.group_inputs");
    private static final Workspace.Key GROUP_N = new Workspace.Key("moe.group_n");
    private static final Workspace.Key ADD_ROWS = new Workspace.Key("moe.add_rows"); // the AddRows items
    private static final Workspace.Key COPY_ROWS = new Workspace.Key("moe.copy_rows"); // the CopyRows items

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
        return forward(x.clone(), t, Matmuls.prefill(ops), routes, new Workspace());
    }

    /**
     * As above, each row through the matmul mm picks for it; activations live in ws, the result (at least [T, hidden])
     * too. x is consumed: the shared experts write their output over it once the routed experts have read it.
     */
    float[] forward(float[] x, int t, Matmuls mm, int[] routes, Workspace ws) {
        MoeRouter.Routing r = gate.route(x, t, mm, ws);
        int topK = r.topK();
        if (routes != null) {
            System.arraycopy(r.experts(), 0, routes, 0, t * topK);
        }
        // Tokens per expert, in token order: the rows each expert's GEMM runs over.
        int[] count = ws.intZeros(COUNT, experts.length);
        for (int i = 0; i < t * topK; i++) {
            count[r.experts()[i]]++;
        }
        int maxCount = 0; // the busiest expert's tokens: buffers are sized once for it, not grown expert by expert
        for (int e = 0; e < experts.length; e++) {
            maxCount = Math.max(maxCount, count[e]);
        }
        float[] y = ws.zeros(Y, t * hidden);
        if (mm.allDecode()) {
            return forwardDecode(x, t, r, count, maxCount, mm, y, ws);
        }
        int[] rows = ws.ints(ROWS, maxCount);
        float[] rowWeight = ws.floats(ROW_WEIGHT, maxCount);
        AddRows add = ws.object(ADD_ROWS, AddRows::new);
        CopyRows copy = ws.object(COPY_ROWS, CopyRows::new);
        float[] xe = ws.floats(XE, maxCount * hidden); // [tokens of e, hidden]
        for (int e = 0; e < experts.length; e++) {
            if (count[e] == 0) {
                continue;
            }
            int n = 0;
            for (int i = 0; i < t; i++) {
                for (int k = 0; k < topK; k++) {
                    if (r.experts()[i * topK + k] == e) {
                        rows[n] = i;
                        rowWeight[n++] = r.weights()[i * topK + k];
                    }
                }
            }
            copy.gather(mm.ops(), x, rows, n, xe, hidden);
            experts[e].forward(xe, n, mm.rows(rows, n), ws, xe); // xe: e's tokens, then its output
            // Each token of e is a different row of y: rows spread over the engine's threads.
            add.run(mm.ops(), n, y, xe, rows, rowWeight, hidden);
        }
        if (sharedExperts != null) {
            sharedExperts.forward(x, t, mm, ws, x); // x: the layer's normed input, then the shared experts' output
            add.run(mm.ops(), t, y, x, null, null, hidden);
        }
        return y;
    }

    /**
     * The decode step: every expert hit and the shared experts run as one group of matmuls (two parallel
     * passes in all), then are summed exactly as {@link #forward} sums them, experts in ascending id order.
     */
    private float[] forwardDecode(
            float[] x, int t, MoeRouter.Routing r, int[] count, int maxCount, Matmuls mm, float[] y, Workspace ws) {
        int topK = r.topK();
        int hit = 0;
        for (int e = 0; e < experts.length; e++) {
            hit += count[e] > 0 ? 1 : 0;
        }
        int groups = hit + (sharedExperts != null ? 1 : 0);
        DenseMlp[] mlps = ws.exactArray(GROUP_MLPS, groups, DenseMlp[]::new);
        float[][] xs = ws.exactArray(GROUP_INPUTS, groups, float[][]::new);
        float[][] gathered = ws.floatRows(GROUP_X, hit, maxCount * hidden);
        int[] n = ws.exactInts(GROUP_N, groups);
        // Hit g's tokens are rows[base .. base + n[g]) in turn, with their router weights.
        int[] rows = ws.ints(GROUP_ROWS, t * topK);
        float[] rowWeight = ws.floats(GROUP_WEIGHT, t * topK);
        for (int e = 0, g = 0, base = 0; e < experts.length; e++) {
            if (count[e] == 0) {
                continue;
            }
            xs[g] = gathered[g]; // [tokens of e, hidden]
            for (int i = 0, j = 0; i < t; i++) {
                for (int k = 0; k < topK; k++) {
                    if (r.experts()[i * topK + k] == e) {
                        rows[base + j] = i;
                        rowWeight[base + j] = r.weights()[i * topK + k];
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
        float[][] out = DenseMlp.forwardDecode(mlps, xs, n, mm.ops(), ws);
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
            float[] s = out[hit];
            for (int i = 0; i < t * hidden; i++) {
                y[i] += s[i];
            }
        }
        return y;
    }
}
