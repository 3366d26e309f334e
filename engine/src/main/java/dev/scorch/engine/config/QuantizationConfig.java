package dev.scorch.engine.config;

import java.util.List;

/** DeepSeek-V3 style {@code quantization_config}: FP8 E4M3 weights with one scale per block of weight_block_size. */
public record QuantizationConfig(String quantMethod, String fmt, String activationScheme, int blockRows, int blockCols) {
  /** Block sides beyond any real checkpoint's (128). */
  public static final int MAX_BLOCK = 1 << 16;

  static QuantizationConfig parse(JsonFields f) {
    String method = f.optString("quant_method", null);
    if (!"fp8".equals(method)) {
      throw f.error("quant_method", "is " + method + "; only \"fp8\" (block-scaled E4M3) is supported");
    }
    String fmt = f.optString("fmt", "e4m3");
    if (!fmt.equals("e4m3")) {
      throw f.error("fmt", "is " + fmt + "; only e4m3 is supported");
    }
    List<Integer> block = f.intList("weight_block_size");
    if (block.size() != 2 || block.get(0) <= 0 || block.get(1) <= 0 || block.get(0) > MAX_BLOCK || block.get(1) > MAX_BLOCK) {
      throw f.error("weight_block_size", "must be two integers in [1, " + MAX_BLOCK + "], got " + block);
    }
    return new QuantizationConfig(method, fmt, f.optString("activation_scheme", "dynamic"), block.get(0), block.get(1));
  }
}
