package dev.scorch.engine.demo;

import dev.scorch.engine.checkpoint.NumberFormats;

/** Block-wise FP8 E4M3 quantisation as DeepSeek-V3 stores it: w ≈ e4m3 code × weight_scale_inv of its block. */
public record Fp8Blocks(byte[] codes, float[] scaleInv, int scaleRows, int scaleCols) {
    static final float E4M3_MAX = 448f;

    public static Fp8Blocks quantize(float[] w, int rows, int cols, int blockRows, int blockCols) {
        int sr = (rows + blockRows - 1) / blockRows;
        int sc = (cols + blockCols - 1) / blockCols;
        float[] scale = new float[sr * sc];
        byte[] codes = new byte[w.length];
        for (int br = 0; br < sr; br++) {
            for (int bc = 0; bc < sc; bc++) {
                int r1 = Math.min(rows, (br + 1) * blockRows);
                int c1 = Math.min(cols, (bc + 1) * blockCols);
                float amax = 0;
                for (int r = br * blockRows; r < r1; r++) {
                    for (int c = bc * blockCols; c < c1; c++) {
                        amax = Math.max(amax, Math.abs(w[r * cols + c]));
                    }
                }
                float s = amax == 0 ? 1f : amax / E4M3_MAX;
                scale[br * sc + bc] = s;
                for (int r = br * blockRows; r < r1; r++) {
                    for (int c = bc * blockCols; c < c1; c++) {
                        codes[r * cols + c] = NumberFormats.floatToE4m3(w[r * cols + c] / s);
                    }
                }
            }
        }
        return new Fp8Blocks(codes, scale, sr, sc);
    }
}
