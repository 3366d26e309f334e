package dev.scorch.engine.device.host;

import dev.scorch.engine.device.MoeShape;
import java.util.Arrays;

/**
 * The noaux_tc router (DeepSeek-V3's MoEGate with topk_method noaux_tc), once for every device: {@code CpuDevice},
 * {@code HostDevice} and, mirrored line by line, the CUDA kernel {@code moe_route}. Per token:
 * scores = sigmoid(logits), computed in double and rounded to fp32; choice = score + e_score_correction_bias; the
 * topk_group groups with the largest sum of their two best choices stay (experts of the others choose 0.0, as the
 * Hugging Face code's masked_fill); the top_k experts by choice, ties to the lower index; weights are their unbiased
 * scores, divided by their sum + 1e-20 when norm_topk_prob (and top_k > 1), × routed_scaling_factor.
 */
public final class NoauxTcRouter {
    private NoauxTcRouter() {}

    /** Work arrays of routing passes, grown to the largest n_routed_experts and n_group seen; reused call to call. */
    public static final class Scratch {
        private float[] scores = new float[0];
        private float[] choice = new float[0];
        private float[] groupScore = new float[0];
        private int[] keepGroup = new int[0];
        private int[] chosen = new int[0];

        void ensure(int n, int nGroup) {
            if (scores.length < n) {
                scores = new float[n];
                choice = new float[n];
                chosen = new int[n];
            }
            if (groupScore.length < nGroup) {
                groupScore = new float[nGroup];
                keepGroup = new int[nGroup];
            }
        }
    }

    /**
     * Routes t tokens: logits [t, n_routed_experts] from logitsOff, bias [n_routed_experts] from biasOff; writes each
     * token's top_k experts in ascending id order and their weights ([t, top_k] each) from expertsOff and weightsOff.
     */
    public static void route(
            float[] logits,
            int logitsOff,
            float[] bias,
            int biasOff,
            int t,
            MoeShape r,
            int[] experts,
            int expertsOff,
            float[] weights,
            int weightsOff,
            Scratch s) {
        int n = r.nRoutedExperts();
        int topK = r.numExpertsPerTok();
        int nGroup = r.nGroup();
        int perGroup = n / nGroup;
        s.ensure(n, nGroup);
        float[] scores = s.scores;
        float[] choice = s.choice;
        float[] groupScore = s.groupScore;
        int[] keepGroup = s.keepGroup;
        int[] chosen = s.chosen;
        for (int i = 0; i < t; i++) {
            for (int e = 0; e < n; e++) {
                scores[e] = (float) (1.0 / (1.0 + Math.exp(-logits[logitsOff + i * n + e])));
                choice[e] = scores[e] + bias[biasOff + e];
            }
            // Group score: the sum of the two best choices in the group (just the one when a group has one expert).
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
            Arrays.fill(keepGroup, 0, nGroup, 0);
            for (int k = 0; k < r.topkGroup(); k++) {
                keepGroup[argmax(groupScore, keepGroup, nGroup)] = 1;
            }
            for (int e = 0; e < n; e++) {
                if (keepGroup[e / perGroup] == 0) {
                    choice[e] = 0f;
                }
            }
            Arrays.fill(chosen, 0, n, 0);
            for (int k = 0; k < topK; k++) {
                chosen[argmax(choice, chosen, n)] = 1;
            }
            float sum = 0;
            int k = 0;
            for (int e = 0; e < n; e++) {
                if (chosen[e] != 0) {
                    experts[expertsOff + i * topK + k] = e;
                    weights[weightsOff + i * topK + k] = scores[e];
                    sum += scores[e];
                    k++;
                }
            }
            for (k = 0; k < topK; k++) {
                float w = weights[weightsOff + i * topK + k];
                if (topK > 1 && r.normTopkProb()) {
                    w = w / (sum + 1e-20f);
                }
                weights[weightsOff + i * topK + k] = w * r.routedScalingFactor();
            }
        }
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
