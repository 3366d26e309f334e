package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * PackedGemm on AVX512-BF16 (bf16x3, bf16x2, bf16) against exact sums and the fp32 kernel, for every shape class: M from
 * 1 past a chunk, N around the 12-row group, K odd and even around the pair, the 16-input split step and the 256-input K
 * block. Runs where the CPU has the units (skipped elsewhere, where the selection falls back to fp32:
 * KernelSelectionTest).
 */
class Bf16GemmTest {
    static final CpuPrecision[] MODES = {CpuPrecision.BF16X3, CpuPrecision.BF16X2, CpuPrecision.BF16};

    /** {M, N, K}: tails of every tile, group, pair, split step and K block; a chunk and more; one weight row, one input. */
    static final int[][] SHAPES = {
        {1, 1, 1},
        {1, 12, 2},
        {2, 13, 3},
        {3, 11, 15},
        {5, 25, 16},
        {31, 24, 17},
        {32, 12, 255},
        {33, 37, 256},
        {64, 100, 257},
        {100, 130, 513},
        {257, 96, 1025},
        {1100, 29, 300}
    };

    @TempDir
    Path dir;

    @BeforeEach
    void units() {
        assumeTrue(PackedGemm.runs(CpuPrecision.BF16X3), "no AVX512-BF16 kernel here");
    }

    /** The bf16 rounding of f (to nearest, ties to even) as scorch_bf16.c's bf16_round does it, NaN and overflow included. */
    static int round(int bits) {
        int mag = bits & 0x7fffffff;
        if (Integer.compareUnsigned(mag, 0x7f800000) > 0) {
            return (bits | 0x00400000) & 0xffff0000;
        }
        int r = (bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000;
        if (mag < 0x7f800000 && (r & 0x7f800000) == 0x7f800000) {
            return bits & 0xffff0000;
        }
        return r;
    }

    /** The parts of x (as float bits): each the rounding of what the ones before left; 0 past a non-finite x. */
    static int[] parts(float x, int parts) {
        int[] p = new int[parts];
        p[0] = round(Float.floatToRawIntBits(x));
        float rest = Float.isFinite(x) ? x - Float.intBitsToFloat(p[0]) : 0f;
        for (int q = 1; q < parts; q++) {
            p[q] = round(Float.floatToRawIntBits(rest));
            rest -= Float.intBitsToFloat(p[q]);
        }
        return p;
    }

    Linear bf16(float[] w, int out, int in) throws IOException {
        return bf16(dir, w, out, in);
    }

    /** A BF16 weight [out, in] of w (rounded to bf16), in a file of its own in dir. */
    static Linear bf16(Path dir, float[] w, int out, int in) throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.addFloats("w", DType.BF16, new long[] {out, in}, w);
        Path f = dir.resolve("bf16-" + out + "x" + in + "-" + w.hashCode() + ".safetensors");
        sw.write(f);
        return new Linear(SafetensorsFile.open(f).tensor("w"));
    }

    /** An FP8 weight of the given codes with one scale per 128 x 128 block. */
    Linear fp8(byte[] codes, float[] scaleInv, int out, int in) throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.add("w", DType.F8_E4M3, new long[] {out, in}, codes);
        sw.addFloats("s", DType.F32, new long[] {(out + 127) / 128, (in + 127) / 128}, scaleInv);
        Path f = dir.resolve("fp8-" + out + "x" + in + "-" + scaleInv[0] + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return new Linear(sf.tensor("w"), sf.tensor("s"), 128, 128);
    }

    static float[] ints(int n, int bound, long seed) {
        Random r = new Random(seed);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = r.nextInt(2 * bound + 1) - bound;
        }
        return v;
    }

    static float[] gemm(float[] x, int m, Linear w, CpuPrecision p, int threads) {
        float[] y = new float[m * w.out()];
        try (CpuOps ops = new CpuOps(threads, p)) {
            ops.matmul(x, m, w, y);
        }
        return y;
    }

    @Test
    void splitTilesHoldEachPairsPartsInTheirPlaces() {
        // Values of every kind: ties, subnormals, the largest finite (which would round to infinity), infinities, NaN.
        float[] special = {
            0f,
            -0f,
            1f,
            1.00390625f,
            1.01171875f,
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
        Random r = new Random(7);
        for (int kDim : new int[] {1, 2, 15, 16, 17, 33, 300}) {
            for (int rows : new int[] {1, 17, 32}) {
                float[] x = new float[3 + rows * kDim];
                for (int i = 0; i < x.length; i++) {
                    x[i] = i % 5 == 0 ? special[r.nextInt(special.length)] : (float) (r.nextGaussian() * 100);
                }
                for (int parts = 1; parts <= 3; parts++) {
                    int pairs = NativeCpu.pairs(kDim);
                    ByteBuffer xs = NativeCpu.alignedFloats(5 + pairs * parts * 32);
                    NativeCpu.splitTile(parts, x, 3, rows, kDim, xs, 5);
                    for (int row = 0; row < 32; row++) {
                        for (int k = 0; k < 2 * pairs; k++) {
                            boolean live = row < rows && k < kDim;
                            int[] want = live ? parts(x[3 + row * kDim + k], parts) : new int[parts];
                            for (int q = 0; q < parts; q++) {
                                int word = xs.getInt(4 * (5 + ((k / 2) * parts + q) * 32 + row));
                                int got = (k % 2 == 0 ? word << 16 : word & 0xffff0000);
                                assertEquals(
                                        want[q] & 0xffff0000,
                                        got,
                                        "part " + q + " of " + parts + ", row " + row + ", input " + k + " of " + kDim);
                            }
                        }
                    }
                }
            }
        }
    }

    @Test
    void threePartsAddUpToTheInputExactly() {
        Random r = new Random(3);
        for (int i = 0; i < 200_000; i++) {
            float x = Float.intBitsToFloat(r.nextInt());
            if (!Float.isFinite(x) || Math.abs(x) < 0x1p-100f) {
                continue; // parts below 2^-126 would be subnormal, which VDPBF16PS reads as zero
            }
            int[] p = parts(x, 3);
            float sum = Float.intBitsToFloat(p[0]) + Float.intBitsToFloat(p[1]) + Float.intBitsToFloat(p[2]);
            assertEquals(Float.floatToRawIntBits(x), Float.floatToRawIntBits(sum), "x = " + x);
        }
    }

    /**
     * Integer inputs of 11 bits and weights of 4 bits: every product and sum is exact in fp32, so bf16x3 and bf16x2 (whose
     * parts hold 16 bits) give the exact sums, and bf16 the exact sums of bf16(x) · w. Any slip of layout shows.
     */
    @Test
    void exactSumsForEveryShape() throws IOException {
        for (int[] s : SHAPES) {
            int m = s[0], n = s[1], k = s[2];
            float[] x = ints(m * k, 2047, 31L * m + k);
            float[] wf = ints(n * k, 7, 17L * n + k);
            Linear w = bf16(wf, n, k);
            for (CpuPrecision p : MODES) {
                float[] y = gemm(x, m, w, p, 2);
                for (int i = 0; i < m; i++) {
                    for (int j = 0; j < n; j++) {
                        double want = 0;
                        for (int kk = 0; kk < k; kk++) {
                            float xv = x[i * k + kk];
                            if (p == CpuPrecision.BF16) {
                                xv = Float.intBitsToFloat(round(Float.floatToRawIntBits(xv)));
                            }
                            want += (double) xv * wf[j * k + kk];
                        }
                        assertEquals(
                                (float) want,
                                y[i * n + j],
                                0f,
                                p.id() + " " + m + "x" + n + "x" + k + ": y[" + i + ", " + j + "]");
                    }
                }
            }
        }
    }

    /**
     * Gaussian inputs and BF16 weights against the float64 sum: bf16x3 within fp32's bound for a chain of 3K roundings,
     * bf16x2 and bf16 within their parts' error on top.
     */
    @Test
    void gaussianWithinEachModesBound() throws IOException {
        for (int[] s : SHAPES) {
            int m = s[0], n = s[1], k = s[2];
            float[] x = GemmTest.randn(m * k, 5L * m + k);
            Linear w = bf16(GemmTest.randn(n * k, 9L * n + k), n, k);
            float[] wf = w.toFloat();
            float[] fp32 = gemm(x, m, w, CpuPrecision.FP32, 2);
            for (CpuPrecision p : MODES) {
                float[] y = gemm(x, m, w, p, 2);
                double worst = 0;
                for (int i = 0; i < m; i++) {
                    for (int j = 0; j < n; j++) {
                        double exact = 0, abs = 0;
                        for (int kk = 0; kk < k; kk++) {
                            exact += (double) x[i * k + kk] * wf[j * k + kk];
                            abs += Math.abs((double) x[i * k + kk] * wf[j * k + kk]);
                        }
                        double bound = abs * (3.0 * k * 0x1p-24 + Math.scalb(1.0, -8 * p.parts()));
                        double err = Math.abs(y[i * n + j] - exact);
                        assertTrue(
                                err <= bound,
                                p.id() + " " + m + "x" + n + "x" + k + ": y[" + i + ", " + j + "] = " + y[i * n + j]
                                        + ", exact " + exact + ", bound " + bound);
                        worst = Math.max(worst, Math.abs(y[i * n + j] - fp32[i * n + j]) / Math.max(abs, 1e-30));
                    }
                }
                if (p == CpuPrecision.BF16X3) {
                    // As close to fp32's result as two fp32 chains are to each other (relative to sum |x w|).
                    assertTrue(worst <= 2.0 * k * 0x1p-24 + 1e-7, m + "x" + n + "x" + k + ": " + worst);
                }
            }
        }
    }

    /** A row's bits do not depend on its batch mates, where it lands in a tile, or the thread count. */
    @Test
    void aRowsBitsAreTheSameAloneInABatchAndOnAnyThreads() throws IOException {
        int m = 300, n = 100, k = 513;
        float[] x = GemmTest.randn(m * k, 11);
        Linear w = bf16(GemmTest.randn(n * k, 12), n, k);
        for (CpuPrecision p : MODES) {
            float[] all = gemm(x, m, w, p, 2);
            assertArrayEquals(all, gemm(x, m, w, p, 1), p.id() + ": 1 thread");
            assertArrayEquals(all, gemm(x, m, w, p, 3), p.id() + ": 3 threads");
            for (int row : new int[] {0, 31, 32, 150, 299}) {
                float[] alone = gemm(java.util.Arrays.copyOfRange(x, row * k, (row + 1) * k), 1, w, p, 2);
                assertArrayEquals(
                        java.util.Arrays.copyOfRange(all, row * n, (row + 1) * n), alone, p.id() + ": row " + row);
                // Among other batch mates, at another place in its tile.
                float[] mates = GemmTest.randn(7 * k, row);
                System.arraycopy(x, row * k, mates, 5 * k, k);
                float[] y7 = gemm(mates, 7, w, p, 2);
                assertArrayEquals(alone, java.util.Arrays.copyOfRange(y7, 5 * n, 6 * n), p.id() + ": row " + row);
            }
        }
    }

    /** Weights that share their input give the bits of their own calls. */
    @Test
    void weightsSharingAnInputGiveTheBitsOfTheirOwnCalls() throws IOException {
        int m = 70, k = 300;
        float[] x = GemmTest.randn(m * k, 21);
        Linear a = bf16(GemmTest.randn(40 * k, 22), 40, k);
        Linear b = bf16(GemmTest.randn(13 * k, 23), 13, k);
        try (CpuOps ops = new CpuOps(2, CpuPrecision.BF16X3)) {
            float[][] y = {new float[m * 40], new float[m * 13]};
            ops.matmul(x, m, new Linear[] {a, b}, y);
            assertArrayEquals(gemm(x, m, a, CpuPrecision.BF16X3, 2), y[0]);
            assertArrayEquals(gemm(x, m, b, CpuPrecision.BF16X3, 2), y[1]);
        }
    }

    /**
     * FP8 codes times scales: a scale of 2^-6 keeps each value exact in bf16 (4 bits of code), so those groups run on the
     * bf16 units (exact sums again); a scale of 0.0123 does not, so its groups run in fp32 FMAs and, with three parts,
     * give the fp32 kernel's bits. Rows 120 .. 131 share a group across the two blocks: fp32 too.
     */
    @Test
    void fp8GroupsNotExactInBf16RunInFp32() throws IOException {
        int m = 40, n = 260, k = 300;
        Random r = new Random(5);
        byte[] codes = new byte[n * k];
        for (int i = 0; i < codes.length; i++) {
            codes[i] = NumberFormats.floatToE4m3(r.nextInt(15) - 7);
        }
        float[] scales = {0x1p-6f, 0x1p-6f, 0x1p-6f, 0.0123f, 0.0123f, 0.0123f, 0x1p-6f, 0x1p-6f, 0x1p-6f};
        Linear w = fp8(codes, scales, n, k);
        float[] wf = w.toFloat();
        float[] x = ints(m * k, 2047, 8);
        float[] fp32 = gemm(x, m, w, CpuPrecision.FP32, 2);
        float[] y = gemm(x, m, w, CpuPrecision.BF16X3, 2);
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                if (j < 120) {
                    double exact = 0;
                    for (int kk = 0; kk < k; kk++) {
                        exact += (double) x[i * k + kk] * wf[j * k + kk];
                    }
                    assertEquals((float) exact, y[i * n + j], 0f, "exact block, y[" + i + ", " + j + "]");
                } else if (j < 252) {
                    assertEquals(fp32[i * n + j], y[i * n + j], 0f, "inexact block, y[" + i + ", " + j + "]");
                }
            }
        }
    }

    @Test
    void int4WithBf16ScalesRunsInFp32AndGivesItsBits() throws IOException {
        Linear w = Int4Weights.random(dir, 50, 300, 32, 3);
        float[] x = GemmTest.randn(20 * 300, 4);
        assertArrayEquals(gemm(x, 20, w, CpuPrecision.FP32, 2), gemm(x, 20, w, CpuPrecision.BF16X3, 2));
    }

    @Test
    void theNativeCallsCheckTheirArguments() {
        ByteBuffer xs = NativeCpu.alignedFloats(32 * 3);
        float[] x = new float[4];
        assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.splitTile(3, x, 0, 2, 3, xs, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.splitTile(4, x, 0, 1, 2, xs, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.splitTile(3, x, 0, 1, 4, xs, 0));
        ByteBuffer c = NativeCpu.alignedFloats(12 * 32);
        float[] wb = new float[12 * 2];
        assertThrows(
                IllegalArgumentException.class,
                () -> NativeCpu.bf16KernelBlock(3, xs, 0, 1, 2, 1, 1, wb, 1, c, 32, true, null, 0, 1, 12, 0, 12));
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.bf16KernelBlock(3, xs, 32, 1, 2, 0, 2, wb, 1, c, 32, true, null, 0, 1, 12, 0, 12));
    }
}
