package dev.scorch.engine.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.checkpoint.Tensor;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Block-scaled FP8 (DeepSeek-V3 layout): w[r][c] = e4m3(code[r][c]) * weight_scale_inv[r / 128][c / 128], on a
 * [130, 260] weight whose 2 x 3 blocks include partial ones on the right and at the bottom.
 */
class Fp8BlocksTest {
    static final int ROWS = 130;
    static final int COLS = 260;

    @TempDir
    Path tmp;

    /** The dequantisation the model does, from the stored tensors: code decoded by Tensor, times its block's scale. */
    static float dequant(Tensor weight, Tensor scaleInv, int r, int c) {
        int cols = weight.dim(1);
        int scaleCols = scaleInv.dim(1);
        return weight.getFloat((long) r * cols + c) * scaleInv.getFloat((long) (r / 128) * scaleCols + c / 128);
    }

    @Test
    void storedCodesTimesBlockScalesMatchHandComputedValues() throws Exception {
        // Row-major [2, 3] scales: block (br, bc) -> index br * 3 + bc.
        float[] scales = {0.5f, 2f, 0.125f, 4f, 1.5f, 0x1p-7f};
        byte[] codes = new byte[ROWS * COLS];
        for (int r = 0; r < ROWS; r++) {
            for (int c = 0; c < COLS; c++) {
                codes[r * COLS + c] = (byte) (((r * 3 + c) % 0x7E) | (((r ^ c) & 1) << 7)); // background, never NaN
            }
        }
        // {row, col, code}: one or two chosen elements in each of the six blocks, corners of the partial ones included.
        int[][] chosen = {
            {0, 0, 0x38}, // block (0,0): 1.0 * 0.5
            {127, 127, 0xC4}, // -3.0 * 0.5
            {5, 128, 0x7E}, // block (0,1): 448 * 2
            {127, 255, 0x01}, // 2^-9 * 2
            {0, 256, 0x50}, // block (0,2), partial columns: 8 * 0.125
            {127, 259, 0x3A}, // 1.25 * 0.125
            {128, 0, 0x40}, // block (1,0), partial rows: 2 * 4
            {129, 127, 0xB9}, // -1.125 * 4
            {128, 128, 0x30}, // block (1,1): 0.5 * 1.5
            {129, 255, 0x77}, // 240 * 1.5
            {128, 256, 0x7E}, // block (1,2), the 2 x 4 corner: 448 * 2^-7
            {129, 259, 0x08}, // 2^-6 * 2^-7
        };
        float[] expected = {0.5f, -1.5f, 896f, 0.00390625f, 1f, 0.15625f, 8f, -4.5f, 0.75f, 360f, 3.5f, 0.0001220703125f
        };
        for (int[] e : chosen) {
            codes[e[0] * COLS + e[1]] = (byte) e[2];
        }

        Path file = tmp.resolve("fp8.safetensors");
        new SafetensorsWriter()
                .add("w.weight", DType.F8_E4M3, new long[] {ROWS, COLS}, codes)
                .addFloats("w.weight_scale_inv", DType.F32, new long[] {2, 3}, scales)
                .write(file);

        SafetensorsFile sf = SafetensorsFile.open(file);
        Tensor w = sf.tensor("w.weight");
        Tensor s = sf.tensor("w.weight_scale_inv");
        assertEquals(DType.F8_E4M3, w.dtype());
        assertArrayEquals(new long[] {2, 3}, s.shape());
        for (int i = 0; i < chosen.length; i++) {
            int r = chosen[i][0];
            int c = chosen[i][1];
            assertEquals(expected[i], dequant(w, s, r, c), "w[" + r + "][" + c + "]");
        }
        // Every element: its own code's value times its block's scale.
        float[] all = w.toFloatArray();
        for (int r = 0; r < ROWS; r++) {
            for (int c = 0; c < COLS; c++) {
                float want = NumberFormats.e4m3ToFloat(codes[r * COLS + c]) * scales[(r / 128) * 3 + c / 128];
                assertEquals(want, all[r * COLS + c] * s.getFloat((r / 128) * 3 + c / 128), "w[" + r + "][" + c + "]");
            }
        }
    }

    @Test
    void quantizeHandPickedBlocks() throws Exception {
        float[] w = new float[ROWS * COLS];
        // block (0,0): amax 3.5 -> scale 3.5 / 448 = 2^-7, so every value below is exact in E4M3 after scaling.
        w[5 * COLS + 7] = 3.5f; // 448 -> 0x7E
        w[6 * COLS + 7] = -1.75f; // -224 -> 0xF6
        w[0] = 0.02734375f; // 3.5 -> 0x46
        // block (0,1): all zero -> scale 1, codes 0.
        // block (0,2), partial columns: amax 896 -> scale 2.
        w[100 * COLS + 258] = -896f; // -448 -> 0xFE
        w[101 * COLS + 259] = 1f; // 0.5 -> 0x30
        // block (1,0), partial rows: amax 0.001.
        w[129 * COLS] = 0.001f; // 448 -> 0x7E
        w[128 * COLS + 5] = 0.0005f; // 224 -> 0x76
        // block (1,1): amax 7 -> scale 1/64; 3 * 2^-15 / (1/64) = 3 * 2^-9, a subnormal code.
        w[128 * COLS + 200] = 7f; // 0x7E
        w[129 * COLS + 130] = 3 * 0x1p-15f; // 0x03
        // block (1,2), the 2 x 4 corner: amax 0.1.
        w[129 * COLS + 259] = -0.1f; // 0xFE

        Fp8Blocks q = Fp8Blocks.quantize(w, ROWS, COLS, 128, 128);
        assertEquals(2, q.scaleRows());
        assertEquals(3, q.scaleCols());
        assertArrayEquals(new float[] {0x1p-7f, 1f, 2f, 0.001f / 448f, 1f / 64, 0.1f / 448f}, q.scaleInv());
        byte[] c = q.codes();
        assertEquals((byte) 0x7E, c[5 * COLS + 7]);
        assertEquals((byte) 0xF6, c[6 * COLS + 7]);
        assertEquals((byte) 0x46, c[0]);
        assertEquals((byte) 0x00, c[3 * COLS + 150]);
        assertEquals((byte) 0xFE, c[100 * COLS + 258]);
        assertEquals((byte) 0x30, c[101 * COLS + 259]);
        assertEquals((byte) 0x7E, c[129 * COLS]);
        assertEquals((byte) 0x76, c[128 * COLS + 5]);
        assertEquals((byte) 0x7E, c[128 * COLS + 200]);
        assertEquals((byte) 0x03, c[129 * COLS + 130]);
        assertEquals((byte) 0xFE, c[129 * COLS + 259]);

        // Through a file and back: the dequantised values are the originals (exactly where the hand values are exact).
        Path file = tmp.resolve("q.safetensors");
        new SafetensorsWriter()
                .add("w", DType.F8_E4M3, new long[] {ROWS, COLS}, q.codes())
                .addFloats("s", DType.F32, new long[] {2, 3}, q.scaleInv())
                .write(file);
        SafetensorsFile sf = SafetensorsFile.open(file);
        Tensor tw = sf.tensor("w");
        Tensor ts = sf.tensor("s");
        assertEquals(3.5f, dequant(tw, ts, 5, 7));
        assertEquals(-1.75f, dequant(tw, ts, 6, 7));
        assertEquals(0.02734375f, dequant(tw, ts, 0, 0));
        assertEquals(-896f, dequant(tw, ts, 100, 258));
        assertEquals(1f, dequant(tw, ts, 101, 259));
        assertEquals(7f, dequant(tw, ts, 128, 200));
        assertEquals(3 * 0x1p-15f, dequant(tw, ts, 129, 130));
        assertEquals(0.001f, dequant(tw, ts, 129, 0), 1e-9);
        assertEquals(0.0005f, dequant(tw, ts, 128, 5), 1e-9);
        assertEquals(-0.1f, dequant(tw, ts, 129, 259), 1e-8);
        assertEquals(0f, dequant(tw, ts, 64, 190));
    }

    @Test
    void quantizeRandomWeightsWithinFp8Precision() {
        SplittableRandom rnd = new SplittableRandom(3);
        float[] w = new float[ROWS * COLS];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) (rnd.nextGaussian() * (1 + (i % 7))); // blocks of different ranges
        }
        Fp8Blocks q = Fp8Blocks.quantize(w, ROWS, COLS, 128, 128);
        for (int br = 0; br < 2; br++) {
            for (int bc = 0; bc < 3; bc++) {
                float s = q.scaleInv()[br * 3 + bc];
                float amax = 0;
                int maxCode = 0;
                for (int r = br * 128; r < Math.min(ROWS, br * 128 + 128); r++) {
                    for (int col = bc * 128; col < Math.min(COLS, bc * 128 + 128); col++) {
                        amax = Math.max(amax, Math.abs(w[r * COLS + col]));
                        maxCode = Math.max(maxCode, q.codes()[r * COLS + col] & 0x7F);
                    }
                }
                assertEquals(amax / 448f, s, "scale of block " + br + "," + bc);
                assertEquals(0x7E, maxCode, "the block's largest magnitude maps to 448");
                for (int r = br * 128; r < Math.min(ROWS, br * 128 + 128); r++) {
                    for (int col = bc * 128; col < Math.min(COLS, bc * 128 + 128); col++) {
                        float x = w[r * COLS + col];
                        float deq = NumberFormats.e4m3ToFloat(q.codes()[r * COLS + col]) * s;
                        // Half an E4M3 ulp: 2^-4 relative for normals, 2^-10 * scale in the subnormal range.
                        double bound = Math.max(Math.abs(x) / 16, s * 0x1p-10) * 1.0001;
                        assertTrue(
                                Math.abs(deq - x) <= bound,
                                "w[" + r + "][" + col + "] = " + x + " dequantised to " + deq);
                    }
                }
            }
        }
    }
}
