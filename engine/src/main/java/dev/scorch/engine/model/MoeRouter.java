package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.runtime.Workspace;

/** MoEGate with topk_method noaux_tc: the gate's logits in fp32 (through the layer's Matmuls), routed by {@link NoauxTcRouter}. */
final class MoeRouter {
    private static final Workspace.Key LOGITS = new Workspace.Key("router.logits"); // [T, n_routed_experts]
    private static final Workspace.Key EXPERTS = new Workspace.Key("router.experts"); // [T, top_k]
    private static final Workspace.Key WEIGHTS = new Workspace.Key("router.weights"); // [T, top_k]
    private static final Workspace.Key SCRATCH = new Workspace.Key("router.scratch"); // NoauxTcRouter.Scratch
    private static final Workspace.Key ROUTING = new Workspace.Key("router.routing"); // the Routing route returns

    private final Linear gate; // [n_routed_experts, hidden]
    private final float[] eScoreCorrectionBias; // [n_routed_experts]
    private final RouterShape shape;

    /**
     * The experts chosen for each token, in ascending id order, and their weights ([T, top_k] each; the arrays, the
     * workspace's, may be longer). One per workspace, refilled by each {@link #route}.
     */
    static final class Routing {
        private int[] experts;
        private float[] weights;
        private int topK;

        int[] experts() {
            return experts;
        }

        float[] weights() {
            return weights;
        }

        int topK() {
            return topK;
        }
    }

    MoeRouter(ModelWeights w, String prefix) {
        ModelConfig c = w.config();
        gate = w.linear(prefix + "gate.weight");
        eScoreCorrectionBias = w.vector(prefix + "gate.e_score_correction_bias");
        shape = RouterShape.of(c);
    }

    /** x: [T, hidden] → for each token its top_k experts (ascending ids) and weights, in ws's buffers. */
    Routing route(float[] x, int t, Matmuls mm, Workspace ws) {
        int nExperts = shape.nRoutedExperts();
        int topK = shape.numExpertsPerTok();
        float[] logits = ws.floats(LOGITS, t * nExperts); // [T, n_routed_experts]
        mm.apply(x, t, gate, logits);
        int[] experts = ws.ints(EXPERTS, t * topK);
        float[] weights = ws.floats(WEIGHTS, t * topK);
        NoauxTcRouter.route(
                logits,
                0,
                eScoreCorrectionBias,
                0,
                t,
                shape,
                experts,
                0,
                weights,
                0,
                ws.object(SCRATCH, NoauxTcRouter.Scratch::new));
        Routing r = ws.object(ROUTING, Routing::new);
        r.experts = experts;
        r.weights = weights;
        r.topK = topK;
        return r;
    }
}
