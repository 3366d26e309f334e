package dev.scorch.engine.device;

import dev.scorch.engine.config.ModelConfig;

/**
 * The shape of DeepseekV3MoE and the settings of its noaux_tc router, as config.json names them: the same in every MoE
 * layer, built once per layer ({@code Moe}) and passed to the MoE kernels whole.
 *
 * @param hidden              hidden_size
 * @param moeInter            moe_intermediate_size: a routed expert's
 * @param nRoutedExperts      n_routed_experts
 * @param numExpertsPerTok    num_experts_per_tok (top_k)
 * @param nGroup              n_group
 * @param topkGroup           topk_group
 * @param normTopkProb        norm_topk_prob
 * @param routedScalingFactor routed_scaling_factor
 */
public record MoeShape(
        int hidden,
        int moeInter,
        int nRoutedExperts,
        int numExpertsPerTok,
        int nGroup,
        int topkGroup,
        boolean normTopkProb,
        float routedScalingFactor) {

    public static MoeShape of(ModelConfig c) {
        return new MoeShape(
                c.hiddenSize(),
                c.moeIntermediateSize(),
                c.nRoutedExperts(),
                c.numExpertsPerTok(),
                c.nGroup(),
                c.topkGroup(),
                c.normTopkProb(),
                (float) c.routedScalingFactor());
    }

    /** A router's settings alone, for {@link Device#moeRoute} (no expert widths). */
    public static MoeShape router(
            int nRoutedExperts, int numExpertsPerTok, int nGroup, int topkGroup, boolean normTopkProb, float scaling) {
        return new MoeShape(0, 0, nRoutedExperts, numExpertsPerTok, nGroup, topkGroup, normTopkProb, scaling);
    }
}
