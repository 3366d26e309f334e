package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Decode's row-dot in the bf16 CPU precisions (BF16 weights read in place against x's bf16 parts on VDPBF16PS): the
 * split's layout, exact sums for every shape class (K around the 16-pair step and its masked tail, weight rows around
 * the 4-row block, rows of x around the 2-row block, the last rows of a file), bits independent of batch mates, group
 * mates and threads, and bf16x3's error at fp32's level. Runs where the CPU has the units (skipped elsewhere, where
 * decode stays fp32: KernelSelectionTest).
 */
class RowDotBf16Test {
    static final CpuPrecision[] MODES = Bf16GemmTest.MODES;

    /** {M, N, K}: K = 2 (one pair, all tail), tails of 1 and 15 pairs, whole steps; N and M around their blocks. */
    static final int[][] SHAPES = {
        {1, 1, 2},
        {1, 4, 30},
        {2, 5, 32},
        {3, 7, 34},
        {5, 9, 62},
        {9, 8, 64},
        {4, 13, 66},
        {2, 33, 1060},
        {7, 258, 1056}
    };

    @TempDir
    Path dir;

    @BeforeEach
    void units() {
        assumeTrue(RowDotGemm.runs(CpuPrecision.BF16X3), "no bf16 decode kernel here");
    }

    Linear bf16(float[] w, int out, int in) throws IOException {
        return Bf16GemmTest.bf16(dir, w, out, in);
    }

    static float[] decode(float[] x, int m, Linear w, CpuPrecision p, int threads) {
        float[] y = new float[m * w.out()];
        try (Parallel par = new Parallel(threads)) {
            RowDotGemm.matmul(x, m, w, y, par, p);
        }
        return y;
    }

    @Test
    void splitPairsHoldEachPairsPartsInTheirPlaces() {
        float[] special = {
            0f,
            -0f,
            1f,
            1.00390625f,
            1f + 0x1p-8f + 0x1p-23f,
            3.4028235e38f,
            -3.4e38f,
            1e-40f,
            1.5e-38f,
            Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY,
            Float.NaN,
            (float) Math.PI,
            -1e-7f
        };
        Random r = new Random(5);
        for (int kDim : new int[] {2, 30, 32, 34, 300}) {
            for (int m : new int[] {1, 3}) {
                float[] x = new float[m * kDim];
                for (int i = 0; i < x.length; i++) {
                    x[i] = i % 4 == 0 ? special[r.nextInt(special.length)] : (float) (r.nextGaussian() * 100);
                }
                int hp = NativeCpu.pairsStride(kDim);
                for (int parts = 1; parts <= 3; parts++) {
                    int[] xp = new int[m * parts * hp + 5];
                    java.util.Arrays.fill(xp, -1);
                    NativeCpu.splitPairs(x, m, kDim, parts, xp);
                    for (int i = 0; i < m; i++) {
                        for (int k = 0; k < 2 * hp; k++) {
                            int[] want = k < kDim ? Bf16GemmTest.parts(x[i * kDim + k], parts) : new int[parts];
                            for (int q = 0; q < parts; q++) {
                                int word = xp[(i * parts + q) * hp + k / 2];
                                assertEquals(
                                        want[q] & 0xffff0000,
                                        k % 2 == 0 ? word << 16 : word & 0xffff0000,
                                        "part " + q + " of " + parts + ", row " + i + ", input " + k + " of " + kDim);
                            }
                        }
                    }
                    assertEquals(-1, xp[m * parts * hp], "nothing written past the parts");
                }
            }
        }
    }

    /**
     * Integer inputs of 11 bits and weights of 4 bits: every product and partial sum is exact in fp32, so bf16x3 and
     * bf16x2 (whose parts hold 16 bits) give the exact sums, and bf16 the exact sums of bf16(x) · w.
     */
    @Test
    void exactSumsForEveryShape() throws IOException {
        for (int[] s : SHAPES) {
            int m = s[0], n = s[1], k = s[2];
            float[] x = Bf16GemmTest.ints(m * k, 2047, 31L * m + k);
            float[] wf = Bf16GemmTest.ints(n * k, 7, 17L * n + k);
            Linear w = bf16(wf, n, k);
            for (CpuPrecision p : MODES) {
                for (int threads : new int[] {1, 3}) {
                    float[] y = decode(x, m, w, p, threads);
                    for (int i = 0; i < m; i++) {
                        for (int j = 0; j < n; j++) {
                            double want = 0;
                            for (int kk = 0; kk < k; kk++) {
                                float xv = x[i * k + kk];
                                if (p == CpuPrecision.BF16) {
                                    xv = Float.intBitsToFloat(Bf16GemmTest.round(Float.floatToRawIntBits(xv)));
                                }
                                want += (double) xv * wf[j * k + kk];
                            }
                            assertEquals(
                                    (float) want,
                                    y[i * n + j],
                                    p.id() + " " + m + "x" + n + "x" + k + ", " + threads + " threads, y[" + i + ", "
                                            + j + "]");
                        }
                    }
                }
            }
        }
    }

    /** A row's bits are the same alone on one thread, among eight mates on three, and in a group with other weights. */
    @Test
    void aRowsBitsDependOnNothingButTheRowAndTheWeights() throws IOException {
        int n = 70, k = 290, m = 9;
        Linear w = bf16(GemmTest.randn(n * k, 3), n, k);
        Linear other = bf16(GemmTest.randn(5 * k, 4), 5, k);
        float[] x = GemmTest.randn(m * k, 9);
        for (CpuPrecision p : MODES) {
            float[] together = decode(x, m, w, p, 3);
            float[][] y = {new float[m * n], new float[m * 5]};
            try (Parallel par = new Parallel(2)) {
                RowDotGemm.matmulGroup(new float[][] {x, x}, new int[] {m, m}, new Linear[] {w, other}, y, par, p);
            }
            for (int i = 0; i < m; i++) {
                float[] alone = decode(java.util.Arrays.copyOfRange(x, i * k, (i + 1) * k), 1, w, p, 1);
                for (int j = 0; j < n; j++) {
                    String at = p.id() + " row " + i + ", output " + j;
                    assertEquals(Float.floatToRawIntBits(alone[j]), Float.floatToRawIntBits(together[i * n + j]), at);
                    assertEquals(Float.floatToRawIntBits(alone[j]), Float.floatToRawIntBits(y[0][i * n + j]), at);
                }
            }
        }
    }

    /**
     * bf16x3 is as accurate as fp32 (three exact products per input, summed in fp32): on Gaussian data with K = 2048 its
     * largest error against the exact sums, relative to Σ|x·w|, is within twice the fp32 row-dot's and under 2^-18; bf16x2
     * and bf16 are within their parts' bounds (2^-15 and 2^-7 of Σ|x·w|). NaN in x makes its row's outputs NaN.
     */
    @Test
    void errorsAgainstExactSums() throws IOException {
        int n = 40, k = 2048, m = 3;
        float[] wf = GemmTest.randn(n * k, 21);
        Linear w = bf16(wf, n, k);
        float[] x = GemmTest.randn(m * k, 22);
        float[] stored = new float[n * k]; // the weights as the file holds them (rounded to bf16)
        for (int j = 0; j < n; j++) {
            w.row(j, 0, k, stored, j * k);
        }
        double[] worst = new double[4]; // fp32, then MODES
        for (int mode = 0; mode < 4; mode++) {
            CpuPrecision p = mode == 0 ? CpuPrecision.FP32 : MODES[mode - 1];
            float[] y = decode(x, m, w, p, 2);
            for (int i = 0; i < m; i++) {
                for (int j = 0; j < n; j++) {
                    double exact = 0, abs = 0;
                    for (int kk = 0; kk < k; kk++) {
                        double wv = stored[j * k + kk];
                        exact += x[i * k + kk] * wv;
                        abs += Math.abs(x[i * k + kk] * wv);
                    }
                    worst[mode] = Math.max(worst[mode], Math.abs(y[i * n + j] - exact) / abs);
                }
            }
        }
        System.out.printf(
                "decode row-dot error / sum|xw|, K = %d: fp32 %.2e, bf16x3 %.2e, bf16x2 %.2e, bf16 %.2e%n",
                k, worst[0], worst[1], worst[2], worst[3]);
        assertTrue(worst[1] <= Math.max(2 * worst[0], 0x1p-24) && worst[1] < 0x1p-18, "bf16x3 " + worst[1]);
        assertTrue(worst[2] < 0x1p-15, "bf16x2 " + worst[2]);
        assertTrue(worst[3] < 0x1p-7, "bf16 " + worst[3]);
        x[k + 17] = Float.NaN;
        for (CpuPrecision p : MODES) {
            float[] y = decode(x, m, w, p, 1);
            for (int j = 0; j < n; j++) {
                assertTrue(Float.isNaN(y[n + j]), p.id() + ": NaN in row 1, output " + j + " = " + y[n + j]);
                assertTrue(Float.isFinite(y[j]) && Float.isFinite(y[2 * n + j]), p.id() + ": other rows finite");
            }
        }
    }
}
