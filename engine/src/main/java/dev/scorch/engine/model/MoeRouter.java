package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.runtime.Workspace;

/**
 * MoEGate with topk_method noaux_tc: router logits in fp32, sigmoid scores; choice on scores +
 * e_score_correction_bias, limited to the topk_group groups with the largest sum of their top-2 choice
 * scores; weights are the unbiased scores of the chosen experts, normalised when norm_topk_prob, ×
 * routed_scaling_factor. Ties go to the lower index.
 */
final class MoeRouter {
    private static final Workspace.Key LOGITS = new Workspace.Key("router.logits"); // [T, n_routed_experts]
    private static final Workspace.Key EXPERTS = new Workspace.Key("router.experts"); // [T, top_k]
    private static final Workspace.Key WEIGHTS = new Workspace.Key("router.weights"); // [T, top_k]
    private static final Workspace.Key SCORES = new Workspace.Key("router.scores"); // [n_routed_experts]
    private static final Workspace.Key CHOICE = new Workspace.Key("router.choice"); // [n_routed_experts]
    private static final Workspace.Key GROUP_SCORE = new Workspace.Key("router.group_score"); // [n_group]
    private static final Workspace.Key KEEP_GROUP = new Workspace.Key("router.keep_group"); // [n_group], 1 = kept
    private static final Workspace.Key CHOSEN = new Workspace.Key("router.chosen"); // [n_routed_experts], 1 = chosen
    private static final Workspace.Key ROUTING = new Workspace.Key("router.routing"); // the Routing route returns

    private final Linear gate; // [n_routed_experts, hidden]
    private final float[] eScoreCorrectionBias; // [n_routed_experts]
    private final int nExperts;
    private final int topK;
    private final int nGroup;
    private final int topkGroup;
    private final boolean normTopkProb;
    private final float routedScalingFactor;

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
        nExperts = c.nRoutedExperts();
        topK = c.numExpertsPerTok();
        nGroup = c.nGroup();
        topkGroup = c.topkGroup();
        normTopkProb = c.normTopkProb();
        routedScalingFactor = (float) c.routedScalingFactor();
    }

    /** x: [T, hidden] → for each token its top_k experts (ascending ids) and weights, in ws's buffers. */
    Routing route(float[] x, int t, Matmuls mm, Workspace ws) {
        float[] logits = ws.floats(LOGITS, t * nExperts); // [T, n_routed_experts]
        mm.apply(x, t, gate, logits);
        int[] experts = ws.ints(EXPERTS, t * topK);
        float[] weights = ws.floats(WEIGHTS, t * topK);
        float[] scores = ws.floats(SCORES, nExperts);
        float[] choice = ws.floats(CHOICE, nExperts);
        int perGroup = nExperts / nGroup;
        float[] groupScore = ws.floats(GROUP_SCORE, nGroup);
        int[] keepGroup = ws.ints(KEEP_GROUP, nGroup);
        int[] chosen = ws.ints(CHOSEN, nExperts);
        for (int i = 0; i < t; i++) {
            for (int e = 0; e < nExperts; e++) {
                scores[e] = (float) (1.0 / (1.0 + Math.exp(-logits[i * nExperts + e])));
                choice[e] = scores[e] + eScoreCorrectionBias[e];
            }
            // Group score: sum of the two best choice scores in the group (just the one when a group has one expert).
            for (int g = 0; g < nGroup; g++) {
                float best = Float.NEGATIVE_INFINITY;
                float second = Float.NEGATIVE_INFINITY;
                for (int e = g * perGroup; e < (g + 1) * perGroup; e++) {
                    if (choice[e] > best) {
                        second = best;
                        best = choice[e];
                    } else if (choice[e] > second) {
                        second = choice[e];
                    }
                }
                groupScore[g] = perGroup == 1 ? best : best + second;
            }
            java.util.Arrays.fill(keepGroup, 0, nGroup, 0);
            for (int k = 0; k < topkGroup; k++) {
                keepGroup[argmax(groupScore, keepGroup, nGroup)] = 1;
            }
            // Experts of dropped groups score 0.0, as the Hugging Face code's masked_fill does.
            for (int e = 0; e < nExperts; e++) {
                if (keepGroup[e / perGroup] == 0) {
                    choice[e] = 0f;
                }
            }
            java.util.Arrays.fill(chosen, 0, nExperts, 0);
            for (int k = 0; k < topK; k++) {
                chosen[argmax(choice, chosen, nExperts)] = 1;
            }
            float sum = 0;
            int k = 0;
            for (int e = 0; e < nExperts; e++) {
                if (chosen[e] != 0) {
                    experts[i * topK + k] = e;
                    weights[i * topK + k] = scores[e];
                    sum += scores[e];
                    k++;
                }
            }
            for (k = 0; k < topK; k++) {
                float wgt = weights[i * topK + k];
                if (topK > 1 && normTopkProb) {
                    wgt = wgt / (sum + 1e-20f);
                }
                weights[i * topK + k] = wgt * routedScalingFactor;
            }
        }
        Routing r = ws.object(ROUTING, Routing::new);
        r.experts = experts;
        r.weights = weights;
        r.topK = topK;
        return r;
    }

    /** Index of the largest of v[0 .. n) not yet taken (taken[i] != 0); the lowest index wins ties. */
    private static int argmax(float[] v, int[] taken, int n) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (taken[i] == 0 && (best < 0 || v[i] > v[best])) {
                best = i;
            }
        }
        return best;
    }
}
