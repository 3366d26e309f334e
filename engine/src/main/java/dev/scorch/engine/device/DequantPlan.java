package dev.scorch.engine.device;

/**
 * How a GEMM multiplies a weight kept packed on the device ({@link PackedInt4}, {@link PackedFp8}): the weight is
 * dequantised a tile of at most {@link #TILE_ELEMS} weights at a time into a device scratch, then either one fp32 GEMM
 * (fp32 weights, fp32 x), or tensor-core GEMMs of the tile's BF16 parts W ≈ w0 + w1 + w2 with x's BF16 parts
 * x = p0 + p1 + p2 ({@link GemmPrecision#inputParts}): w_a · p_b for every a &lt; weightParts and b &lt; inputParts − a,
 * in that order (a outer, b inner), summed in fp32. The terms left out are those below the mode's grade: each part is
 * 2⁻⁸ of the one before, so w_a · p_b is about 2^(−8(a + b)) of |W·x|.
 *
 * @param fp32        one fp32 GEMM of the fp32 tile (weightParts and inputParts 0)
 * @param weightParts BF16 parts of the weight the GEMMs use: the dequantiser writes w_a = bf16(W − w0 − … − w_(a−1))
 * @param inputParts  BF16 parts of x
 */
public record DequantPlan(boolean fp32, int weightParts, int inputParts) {
    /** Weights dequantised per GEMM tile at most: 32 Mi (128 MiB of fp32 scratch), a Kimi K2 expert's gate_up (4096 x 7168) whole. */
    public static final long TILE_ELEMS = 1L << 25;

    public static final DequantPlan FP32 = new DequantPlan(true, 0, 0);

    public DequantPlan {
        if (fp32
                ? weightParts != 0 || inputParts != 0
                : weightParts < 1 || weightParts > 3 || inputParts < weightParts) {
            throw new IllegalArgumentException("dequantisation plan: fp32 " + fp32 + ", " + weightParts
                    + " weight parts, " + inputParts + " input parts");
        }
    }

    /** BF16 GEMMs the plan runs (1 for fp32's one GEMM). */
    public int gemms() {
        int g = 0;
        for (int a = 0; a < weightParts; a++) {
            g += inputParts - a;
        }
        return fp32 ? 1 : g;
    }

    /** Scratch bytes of a tile of elems weights: 4 a weight in fp32, 2 a BF16 part. */
    public long scratchBytes(long elems) {
        return elems * (fp32 ? 4 : 2L * weightParts);
    }

    /** Rows of a weight [n, k] dequantised per tile. */
    public static int tileRows(int n, long k) {
        return (int) Math.max(1, Math.min(n, TILE_ELEMS / Math.max(1, k)));
    }
}
