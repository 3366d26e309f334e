package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.runtime.Workspace;

/** MoEGate with topk_method noaux_tc: the gate's logits in fp32 (through the layer's Matmuls), routed by {@link NoauxTcRouter}. */
final class MoeRouter {
    /**
     * A workspace's router buffers, holding the routing {@link #route} made last: for each token its top_k experts in
     * ascending id order, and their weights.
     */
    static final class Scratch extends Workspace.Buffers {
        private float[] logits; // [T, n_routed_experts]
        private int[] experts; // [T, top_k]
        private float[] weights; // [T, top_k]
        private final NoauxTcRouter.Scratch router = new NoauxTcRouter.Scratch();

        Scratch(Workspace ws) {
            super(ws);
        }

        /** [T, top_k]: each token's experts, ascending (the array may be longer). */
        int[] experts() {
            return experts;
        }

        /** [T, top_k]: their weights (the array may be longer). */
        float[] weights() {
            return weights;
        }
    }

    private final Linear gate; // [n_routed_experts, hidden]
    private final float[] eScoreCorrectionBias; // [n_routed_experts]
    private final RouterShape shape;

    MoeRouter(ModelWeights w, String prefix) {
        ModelConfig c = w.config();
        gate = w.linear(prefix + "gate.weight");
        eScoreCorrectionBias = w.vector(prefix + "gate.e_score_correction_bias");
        shape = RouterShape.of(c);
    }

    int topK() {
        return shape.numExpertsPerTok();
    }

    /** x: [T, hidden] → for each token its top_k experts (ascending ids) and weights, in s. */
    void route(float[] x, int t, Matmuls mm, Scratch s) {
        int nExperts = shape.nRoutedExperts();
        int topK = shape.numExpertsPerTok();
        float[] logits = s.logits = s.floats(s.logits, t * nExperts);
        mm.apply(x, t, gate, logits);
        s.experts = s.ints(s.experts, t * topK);
        s.weights = s.floats(s.weights, t * topK);
        NoauxTcRouter.route(logits, 0, eScoreCorrectionBias, 0, t, shape, s.experts, 0, s.weights, 0, s.router);
    }
}
