package dev.scorch.engine.device;

/**
 * How a device multiplies: the dtype its linear weights are held in and its GEMM inputs are rounded to.
 * Accumulation is fp32 in both; logits come out in fp32.
 */
public enum GemmPrecision {
    /**
     * BF16 weights and BF16-rounded activations (tensor cores), fp32 accumulate: the fastest mode, but rounding
     * every GEMM input to 8 mantissa bits moves log-probs by up to ~1e-1 and can flip expert choices.
     */
    BF16(2),
    /**
     * BF16 weights; each activation split into two BF16 parts, x = hi + lo (16 mantissa bits in all), and the
     * two tensor-core GEMMs summed in fp32: near-fp32 results at twice BF16's GEMM work.
     */
    BF16X2(2),
    /**
     * BF16 weights; each activation split into three BF16 parts (all 24 mantissa bits of fp32), three tensor-core
     * GEMMs summed in fp32: fp32-grade results from BF16 weights (the default GPU mode), at three times BF16's
     * GEMM work.
     */
    BF16X3(2),
    /** fp32 weights (widened from the checkpoint's dtype) and activations, fp32 math: the exact mode. */
    FP32(4);

    private final int weightBytes;

    GemmPrecision(int weightBytes) {
        this.weightBytes = weightBytes;
    }

    /** BF16 parts each GEMM input is split into (0 for fp32 GEMMs). */
    public int inputParts() {
        return switch (this) {
            case BF16 -> 1;
            case BF16X2 -> 2;
            case BF16X3 -> 3;
            case FP32 -> 0;
        };
    }

    /** Whether weights are held in BF16. */
    public boolean bf16Weights() {
        return this != FP32;
    }

    /** Bytes per weight element on the device. */
    public int weightBytes() {
        return weightBytes;
    }

    public static GemmPrecision parse(String s) {
        return switch (s.toLowerCase(java.util.Locale.ROOT)) {
            case "bf16" -> BF16;
            case "bf16x2" -> BF16X2;
            case "bf16x3" -> BF16X3;
            case "fp32" -> FP32;
            default ->
                throw new IllegalArgumentException("GEMM precision '" + s + "': expected bf16, bf16x2, bf16x3 or fp32");
        };
    }
}
