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
    double factor = f.requiredDouble("factor");
    if (factor < 1) {
      throw f.error("factor", "must be >= 1, got " + factor);
    }
    return new RopeScaling(type, factor,
        f.optInt("original_max_position_embeddings", 4096),
        f.optDouble("beta_fast", 32),
        f.optDouble("beta_slow", 1),
        f.optDouble("mscale", 1),
        f.optDouble("mscale_all_dim", 0));
  }
}
