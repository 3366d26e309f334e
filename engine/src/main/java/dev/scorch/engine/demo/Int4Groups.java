package dev.scorch.engine.demo;

import dev.scorch.engine.checkpoint.NumberFormats;

/**
 * Symmetric INT4 group quantisation as compressed-tensors' pack-quantized format stores it (Kimi-K2-Thinking's routed
 * experts): per row and group of groupSize inputs a BF16 scale = max |w| / 7, q = round(w / scale) in [-8, 7], packed
 * eight to an int32 word (input j in bits 4·(j % 8) .. 4·(j % 8) + 3 of word j / 8, as q + 8).
 *
 * @param packed [rows, ceil(cols / 8)] words
 * @param scales [rows, ceil(cols / groupSize)], each a BF16 value
 */
public record Int4Groups(int[] packed, float[] scales, int rows, int cols, int groupSize) {
    public static Int4Groups quantize(float[] w, int rows, int cols, int groupSize) {
        int words = (cols + 7) / 8;
        int groups = (cols + groupSize - 1) / groupSize;
        int[] packed = new int[rows * words];
        float[] scales = new float[rows * groups];
        for (int r = 0; r < rows; r++) {
            for (int g = 0; g < groups; g++) {
                int c1 = Math.min(cols, (g + 1) * groupSize);
                float amax = 0;
                for (int c = g * groupSize; c < c1; c++) {
                    amax = Math.max(amax, Math.abs(w[r * cols + c]));
                }
                float s = NumberFormats.bf16ToFloat(NumberFormats.floatToBf16(amax == 0 ? 1f : amax / 7));
                scales[r * groups + g] = s;
                for (int c = g * groupSize; c < c1; c++) {
                    int q = Math.max(-8, Math.min(7, Math.round(w[r * cols + c] / s)));
                    packed[r * words + c / 8] |= (q + 8) << (4 * (c % 8));
                }
            }
        }
        return new Int4Groups(packed, scales, rows, cols, groupSize);
    }

    /** The packed words as little-endian bytes, as a safetensors I32 tensor holds them. */
    public byte[] packedBytes() {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(packed.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(packed);
        return b.array();
    }

    /** [rows, cols] in fp32: q · scale, element by element. */
    public float[] dequantize() {
        int words = (cols + 7) / 8;
        int groups = (cols + groupSize - 1) / groupSize;
        float[] w = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int q = ((packed[r * words + c / 8] >>> (4 * (c % 8))) & 0xF) - 8;
                w[r * cols + c] = q * scales[r * groups + c / groupSize];
            }
        }
        return w;
    }
}
