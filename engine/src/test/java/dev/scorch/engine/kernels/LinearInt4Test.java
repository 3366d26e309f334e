package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.demo.Int4Groups;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** An INT4 weight decodes as the format says: every nibble, every scale, any row segment. */
class LinearInt4Test {
    @TempDir
    Path dir;

    Linear write(int out, int in, int groupSize, int[] packed, float[] scales, DType scaleType) throws IOException {
        return Int4Weights.write(
                dir.resolve(out + "x" + in + "-" + groupSize + scaleType + ".safetensors"),
                out,
                in,
                groupSize,
                packed,
                scales,
                scaleType);
    }

    @Test
    void everyNibbleAndScaleDecodesToQTimesScale() throws IOException {
        // Row r holds nibble (r + j) % 16 at input j, so every nibble value sits at every bit position; scales vary by
        // group.
        int out = 16;
        int in = 100; // not a multiple of 8 nor of the group: the last word and group are partial
        int groupSize = 32;
        int words = (in + 7) / 8;
        int groups = (in + groupSize - 1) / groupSize;
        int[] packed = Int4Weights.everyNibble(out, in);
        float[] scales = new float[out * groups];
        for (int r = 0; r < out; r++) {
            for (int g = 0; g < groups; g++) {
                scales[r * groups + g] = (g % 2 == 0 ? 1 : -1) * 0.0078125f * (1 + r + 3 * g); // BF16-exact
            }
        }
        for (DType scaleType : new DType[] {DType.BF16, DType.F32}) {
            Linear w = write(out, in, groupSize, packed, scales, scaleType);
            assertEquals(Linear.Format.INT4_GROUP, w.format());
            assertEquals(out, w.out());
            assertEquals(in, w.in());
            assertEquals((long) out * words * 4 + (long) out * groups * scaleType.bytes(), w.weightBytes());
            float[] got = w.toFloat();
            for (int r = 0; r < out; r++) {
                for (int j = 0; j < in; j++) {
                    int q = (r + j) % 16 - 8;
                    assertEquals(
                            q * scales[r * groups + j / groupSize],
                            got[r * in + j],
                            0f,
                            scaleType + " W[" + r + ", " + j + "]");
                }
            }
            // Any segment decodes as the whole row does.
            float[] seg = new float[in];
            for (int k0 : new int[] {0, 1, 7, 8, 31, 32, 33, 95}) {
                int n = in - k0;
                w.row(5, k0, n, seg, 0);
                float[] want = java.util.Arrays.copyOfRange(got, 5 * in + k0, 5 * in + in);
                assertArrayEquals(want, java.util.Arrays.copyOf(seg, n), "k0 " + k0);
            }
        }
    }

    @Test
    void quantizedWeightsRoundTripThroughTheCheckpoint() throws IOException {
        Random r = new Random(3);
        int out = 37;
        int in = 200;
        float[] w = new float[out * in];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) r.nextGaussian() * 0.02f;
        }
        Int4Groups q = Int4Groups.quantize(w, out, in, 32);
        Linear lin = write(out, in, 32, q.packed(), q.scales(), DType.BF16);
        assertArrayEquals(q.dequantize(), lin.toFloat());
        float maxErr = 0;
        for (int i = 0; i < w.length; i++) {
            maxErr = Math.max(maxErr, Math.abs(w[i] - q.dequantize()[i]));
        }
        assertEquals(0, maxErr, 0.02f * 4 / 7 * 0.6, "within half a step of the largest |w| / 7");
    }

    @Test
    void shapesThatDisagreeAreRefused() throws IOException {
        int[] packed = new int[4 * 2];
        float[] scales = new float[4];
        Linear ok = write(4, 16, 16, packed, scales, DType.BF16);
        SafetensorsFile sf = SafetensorsFile.open(dir.resolve("4x16-16BF16.safetensors"));
        assertEquals(16, ok.in());
        String msg = assertThrows(
                        IllegalArgumentException.class,
                        () -> Linear.int4(
                                "w.weight", sf.tensor("w.weight_packed"), sf.tensor("w.weight_scale"), 4, 24, 16))
                .getMessage();
        assertEquals(true, msg.contains("w.weight_packed") && msg.contains("[4, 3]"), msg);
        msg = assertThrows(
                        IllegalArgumentException.class,
                        () -> Linear.int4(
                                "w.weight", sf.tensor("w.weight_packed"), sf.tensor("w.weight_scale"), 4, 16, 8))
                .getMessage();
        assertEquals(true, msg.contains("w.weight_scale"), msg);
    }
}
