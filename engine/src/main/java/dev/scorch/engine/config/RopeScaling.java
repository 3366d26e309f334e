package dev.scorch.engine.config;

/**
 * YaRN rope scaling from config.json {@code rope_scaling}; absent keys take the reference modeling code's
 * defaults (beta_fast 32, beta_slow 1, mscale 1, mscale_all_dim 0, original_max_position_embeddings 4096).
 */
public record RopeScaling(
        String type,
        double factor,
        int originalMaxPositionEmbeddings,
        double betaFast,
        double betaSlow,
        double mscale,
        double mscaleAllDim) {

    static RopeScaling parse(JsonFields f) {
        String type = f.optString("type", f.optString("rope_type", null));
        if (type == null) {
            throw f.error("type", "is required (only \"yarn\" is supported)");
        }
        if (!type.equals("yarn")) {
            throw f.error("type", "is \"" + type + "\"; only \"yarn\" rope scaling is supported");
        }
        // Bounds far from the real files' (factor 32 or 40, betas 32 or 1, mscales 1) that keep inv_freq and the
        // softmax
        // scale finite: a zero beta makes the correction range infinite, a huge mscale overflows the scale squared.
        return new RopeScaling(
                type,
                f.doubleIn("factor", 1, 10_000),
                f.optIntIn("original_max_position_embeddings", 4096, 1, ModelConfig.MAX_POSITIONS),
                f.optDoubleIn("beta_fast", 32, 0, true, 10_000, false),
                f.optDoubleIn("beta_slow", 1, 0, true, 10_000, false),
                f.optDoubleIn("mscale", 1, 0, false, 1000, false),
                f.optDoubleIn("mscale_all_dim", 0, 0, false, 1000, false));
    }
}
