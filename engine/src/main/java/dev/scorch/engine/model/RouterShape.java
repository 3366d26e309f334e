package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;

/** The noaux_tc router's settings, as config.json names them. */
public record RouterShape(
        int nRoutedExperts,
        int numExpertsPerTok,
        int nGroup,
        int topkGroup,
        boolean normTopkProb,
        float routedScalingFactor) {

    public static RouterShape of(ModelConfig c) {
        return new RouterShape(
                c.nRoutedExperts(), c.numExpertsPerTok(), c.nGroup(), c.topkGroup(), c.normTopkProb(), (float)
                        c.routedScalingFactor());
    }
}
