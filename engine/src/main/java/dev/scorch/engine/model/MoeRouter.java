package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;

/**
 * MoEGate with topk_method noaux_tc: router logits in fp32, sigmoid scores; choice on scores +
 * e_score_correction_bias, limited to the topk_group groups with the largest sum of their top-2 choice
 * scores; weights are the unbiased scores of the chosen experts, normalised when norm_topk_prob, ×
 * routed_scaling_factor. Ties go to the lower index.
 */
final class MoeRouter {
  private final Linear gate; // [n_routed_experts, hidden]
  private final float[] eScoreCorrectionBias; // [n_routed_experts]
  private final int nExperts;
  private final int topK;
  private final int nGroup;
  private final int topkGroup;
  private final boolean normTopkProb;
  private final float routedScalingFactor;

  /** The experts chosen for each token, in ascending id order, and their weights. */
  record Routing(int[] experts, float[] weights, int topK) {}

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

  /** x: [T, hidden] → for each token its top_k experts (ascending ids) and weights. */
  Routing route(float[] x, int t, Matmuls mm) {
    float[] logits = new float[t * nExperts]; // [T, n_routed_experts]
    mm.apply(x, t, gate, logits);
    int[] experts = new int[t * topK];
    float[] weights = new float[t * topK];
    float[] scores = new float[nExperts];
    float[] choice = new float[nExperts];
    int perGroup = nExperts / nGroup;
    float[] groupScore = new float[nGroup];
    boolean[] keepGroup = new boolean[nGroup];
    boolean[] chosen = new boolean[nExperts];
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
      java.util.Arrays.fill(keepGroup, false);
      for (int k = 0; k < topkGroup; k++) {
        keepGroup[argmax(groupScore, keepGroup)] = true;
      }
      // Experts of dropped groups score 0.0, as the Hugging Face code's masked_fill does.
      for (int e = 0; e < nExperts; e++) {
        if (!keepGroup[e / perGroup]) {
          choice[e] = 0f;
        }
      }
      java.util.Arrays.fill(chosen, false);
      for (int k = 0; k < topK; k++) {
        chosen[argmax(choice, chosen)] = true;
      }
      float sum = 0;
      int k = 0;
      for (int e = 0; e < nExperts; e++) {
        if (chosen[e]) {
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
    return new Routing(experts, weights, topK);
  }

  /** Index of the largest value not yet taken; the lowest index wins ties. */
  private static int argmax(float[] v, boolean[] taken) {
    int best = -1;
    for (int i = 0; i < v.length; i++) {
      if (!taken[i] && (best < 0 || v[i] > v[best])) {
        best = i;
      }
    }
    return best;
  }
}
