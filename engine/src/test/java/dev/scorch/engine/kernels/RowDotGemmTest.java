package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Fp8Blocks;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The decode kernel against the plain reference, and its bits independent of M, row position, blocking and threads. */
class RowDotGemmTest {
    @TempDir
    Path dir;

    Linear linear(DType dtype, int out, int in, long seed) throws IOException {
        return linear(dtype, out, in, seed, 128);
    }

    /** I32 stands for INT4 (compressed-tensors' packed words) in groups of 32 inputs, or of block where it is not 128. */
    Linear linear(DType dtype, int out, int in, long seed, int block) throws IOException {
        if (dtype == DType.I32) {
            return Int4Weights.random(dir, out, in, block == 128 ? 32 : block, seed);
        }
        float[] w = GemmTest.randn(out * in, seed);
        SafetensorsWriter sw = new SafetensorsWriter();
        if (dtype == DType.F8_E4M3) {
            Fp8Blocks q = Fp8Blocks.quantize(w, out, in, block, block);
            sw.add("w", DType.F8_E4M3, new long[] {out, in}, q.codes());
            sw.addFloats("w_scale_inv", DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
        } else {
            sw.addFloats("w", dtype, new long[] {out, in}, w);
        }
        Path f = dir.resolve(dtype + "-" + out + "x" + in + "-" + block + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return dtype == DType.F8_E4M3
                ? new Linear(sf.tensor("w"), sf.tensor("w_scale_inv"), block, block)
                : new Linear(sf.tensor("w"));
    }

    /**
     * BF16's register blocks for four rows of x and more: two 2 × 4, and 4 × 4 where the vectors have 16 lanes (whatever
     * the JDK: production takes it on JDK 21+ only, for speed, and these tests run on the build's JDK).
     */
    static final boolean[] BLOCKS = RowDotGemm.L == 16 ? new boolean[] {false, true} : new boolean[] {false};

    static void matmul(float[] x, int m, Linear w, float[] y, Parallel p, boolean block4x4) {
        RowDotGemm.matmulGroup(new float[][] {x}, new int[] {m}, new Linear[] {w}, new float[][] {y}, p, block4x4);
    }

    static void assertClose(float[] ref, float[] got, int k, String what) {
        for (int i = 0; i < ref.length; i++) {
            assertEquals(ref[i], got[i], 2e-5 * Math.sqrt(k) + 1e-5 * Math.abs(ref[i]), what + " at " + i);
        }
    }

    @Test
    void matchesTheReferenceForEveryWeightPath() throws IOException {
        // M around the 4-row block, N not a multiple of the 4-row weight block, K with tails and partial FP8 blocks.
        int[][] shapes = {
            {1, 1, 1}, {1, 5, 7}, {3, 17, 34}, {4, 8, 192}, {7, 33, 320}, {9, 130, 513}, {32, 64, 1024}, {5, 66, 2816}
        };
        for (DType dtype : new DType[] {DType.BF16, DType.F8_E4M3, DType.F32, DType.I32}) {
            for (int[] s : shapes) {
                int m = s[0];
                int n = s[1];
                int k = s[2];
                Linear w = linear(dtype, n, k, 31L * n + k);
                float[] x = GemmTest.randn(m * k, m + 7L * k);
                float[] ref = new float[m * n];
                PackedGemm.reference(x, m, w, ref);
                for (boolean block4x4 : BLOCKS) {
                    float[] fast = new float[m * n];
                    try (Parallel p = new Parallel(2)) {
                        matmul(x, m, w, fast, p, block4x4);
                    }
                    assertClose(ref, fast, k, dtype + " " + m + "x" + n + "x" + k + (block4x4 ? ", 4 x 4" : ""));
                }
            }
        }
    }

    /** FP8 whose block columns are not a multiple of the vector width take the generic path; same reference. */
    @Test
    void fp8WithOddBlocksMatchesTheReference() throws IOException {
        Linear w = linear(DType.F8_E4M3, 21, 100, 3, 24);
        float[] x = GemmTest.randn(3 * 100, 4);
        float[] fast = new float[3 * 21];
        float[] ref = new float[3 * 21];
        try (Parallel p = new Parallel(1)) {
            RowDotGemm.matmul(x, 3, w, fast, p);
        }
        PackedGemm.reference(x, 3, w, ref);
        assertClose(ref, fast, 100, "FP8 24x24 blocks");
    }

    /**
     * Each output row's bits are the same at M = 1, 4, 7 and 32, in any position in the batch, on 1, 2 or 3 threads:
     * the one-row, four-row and 4 × 4 blocks (with and without a K tail past the last whole vector) agree.
     */
    @Test
    void aRowGivesTheSameBitsWhateverTheBatchAndThreads() throws IOException {
        // N large enough to be split into several tasks (N·K >= 2 · MIN_TASK_WEIGHTS), with a tail of 2 rows; BF16 also
        // with K = 1060, whose 530 pairs leave a tail of 2 pairs past whole 8- or 16-lane vectors.
        Object[][] cases = {
            {DType.BF16, 1056}, {DType.BF16, 1060}, {DType.F8_E4M3, 1056}, {DType.F32, 1056}, {DType.I32, 1056}
        };
        for (Object[] c : cases) {
            DType dtype = (DType) c[0];
            int n = 258;
            int k = (Integer) c[1];
            Linear w = linear(dtype, n, k, 11);
            float[] x = GemmTest.randn(32 * k, 12);
            float[][] alone = new float[32][n];
            try (Parallel p1 = new Parallel(1)) {
                for (int i = 0; i < 32; i++) {
                    RowDotGemm.matmul(Arrays.copyOfRange(x, i * k, (i + 1) * k), 1, w, alone[i], p1);
                }
            }
            for (int threads = 1; threads <= 3; threads++) {
                try (Parallel p = new Parallel(threads)) {
                    for (int m : new int[] {1, 4, 7, 32}) {
                        for (boolean block4x4 : BLOCKS) {
                            // The batch: rows 32 - m .. 31 of x, so each row sits at a different position than alone.
                            float[] xb = Arrays.copyOfRange(x, (32 - m) * k, 32 * k);
                            float[] y = new float[m * n];
                            matmul(xb, m, w, y, p, block4x4);
                            for (int i = 0; i < m; i++) {
                                assertArrayEquals(
                                        alone[32 - m + i],
                                        Arrays.copyOfRange(y, i * n, (i + 1) * n),
                                        dtype + " K " + k + ", " + threads + " threads, m = " + m + ", row " + i
                                                + (block4x4 ? ", 4 x 4" : ", 2 x 4"));
                            }
                        }
                    }
                }
            }
        }
    }

    /**
     * The native row-dot (BF16 read in place, 8 lanes) gives the Java blocks' bits, output for output: K with and without
     * a tail of pairs past the last whole vector (K = 2 has only the tail), every count of weight rows around the 4-row
     * block (a partial last block), rows of x around the 4-row block, and tasks that start inside the tensor (several
     * threads; a weight whose rows lie at an offset in the file).
     */
    @Test
    void theNativeRowDotGivesTheJavaBits() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(RowDotGemm.NATIVE_ROWDOT, "no native row-dot on this machine/JVM");
        int[] ks = {2, 4, 14, 16, 18, 30, 32, 34, 62, 1056, 1060};
        for (int k : ks) {
            for (int n = 1; n <= 9; n++) {
                checkNativeRowDot(linear(DType.BF16, n, k, 100L * k + n), n, k, new int[] {1, 2, 3, 4, 5, 8, 9}, 1);
            }
            checkNativeRowDot(linear(DType.BF16, 258, k, k), 258, k, new int[] {1, 3, 4, 7}, 3);
        }
        // A tensor that does not start the file's data: the weight after another one (byte offset 2 · 3 · 5 = 30).
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.addFloats("a", DType.BF16, new long[] {3, 5}, GemmTest.randn(15, 1));
        sw.addFloats("w", DType.BF16, new long[] {7, 34}, GemmTest.randn(7 * 34, 2));
        Path f = dir.resolve("offset.safetensors");
        sw.write(f);
        checkNativeRowDot(new Linear(SafetensorsFile.open(f).tensor("w")), 7, 34, new int[] {1, 2, 5}, 2);
    }

    /**
     * The same for FP8: K with a tail past the last whole vector, blocks of 8, 16 and 128 columns (a partial last block)
     * and of 1, 3 and 128 rows (a task's rows across block rows), 1..9 rows and x rows, 258 rows on 3 threads.
     */
    @Test
    void theNativeFp8RowDotGivesTheJavaBits() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(RowDotGemm.NATIVE_ROWDOT, "no native row-dot on this machine/JVM");
        int[][] kBlocks = {{8, 8}, {13, 8}, {40, 16}, {100, 16}, {300, 128}, {1060, 128}};
        int id = 0;
        for (int[] kb : kBlocks) {
            int k = kb[0];
            int bc = kb[1];
            for (int blockRows : new int[] {1, 3, 128}) {
                for (int n = 1; n <= 9; n++) {
                    checkNativeRowDot(
                            fp8(n, k, blockRows, bc, 100L * k + n, id++), n, k, new int[] {1, 2, 3, 4, 5, 9}, 1);
                }
                checkNativeRowDot(fp8(258, k, blockRows, bc, k, id++), 258, k, new int[] {1, 4, 7}, 3);
            }
        }
    }

    /**
     * Every FP8 code (both signs, zeros, subnormals, the largest) decodes in the native row-dot as in Java, bit for bit;
     * a row holding a NaN code (0x7f, 0xff) is NaN in both.
     */
    @Test
    void theNativeFp8RowDotDecodesEveryCodeAsJavaDoes() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(RowDotGemm.NATIVE_ROWDOT, "no native row-dot on this machine/JVM");
        int n = 8;
        int k = 64;
        byte[] finite = new byte[n * k];
        byte[] withNan = new byte[n * k];
        for (int i = 0; i < finite.length; i++) {
            int c = i & 0xFF; // rows 0-3 hold codes 0..255 in order, rows 4-7 again
            finite[i] = (byte) ((c & 0x7F) == 0x7F ? 0 : c);
            withNan[i] = (byte) ((i / k) % 2 == 0 && (c & 0x7F) == 0x7F ? 0 : c); // NaN codes left in rows 1, 3, 5, 7
        }
        float[] scaleInv = {0.75f};
        checkNativeRowDot(fp8Codes(finite, n, k, scaleInv, "finite"), n, k, new int[] {1, 2, 5}, 1);
        Linear w = fp8Codes(withNan, n, k, scaleInv, "nan");
        try (Parallel p = new Parallel(1)) {
            float[][] both = javaAndNative(w, n, GemmTest.randn(k, 5), 1, p);
            float[] java = both[0];
            float[] nat = both[1];
            for (int r = 0; r < n; r++) {
                if (r % 2 == 1) {
                    assertTrue(
                            Float.isNaN(java[r]) && Float.isNaN(nat[r]), "row " + r + ": " + java[r] + ", " + nat[r]);
                } else {
                    assertEquals(Float.floatToRawIntBits(java[r]), Float.floatToRawIntBits(nat[r]), "row " + r);
                }
            }
        }
    }

    /**
     * One NaN code makes its row NaN for every row of x, wherever it lies: in the row-dot's vectors (first code, mid
     * row), past the NaN scan's last 32 codes, in the scalar tail past the last whole vector, in a last block of fewer
     * than four rows; the other rows keep Java's bits.
     */
    @Test
    void oneNanCodeMakesItsRowNanForEveryRowOfX() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(RowDotGemm.NATIVE_ROWDOT, "no native row-dot on this machine/JVM");
        int n = 7; // a block of four rows, then one of three
        int k = 75; // 72 inputs by vectors on 8 lanes, 64 on 16 (the scan's 64 by 32s, then 8); the rest in the tail
        int[] nanAt = {0, 40, 66, -1, 73, 10, -1}; // per row: where its one NaN code is (-1: none)
        java.util.Random rnd = new java.util.Random(7);
        byte[] codes = new byte[n * k];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < k; c++) {
                int code = rnd.nextInt(256);
                codes[r * k + c] = (byte) ((code & 0x7F) == 0x7F ? 0x3C : code);
            }
            if (nanAt[r] >= 0) {
                codes[r * k + nanAt[r]] = (byte) (r % 2 == 0 ? 0x7F : 0xFF);
            }
        }
        Linear w = fp8Codes(codes, n, k, new float[] {0.5f}, "one-nan");
        int m = 3;
        try (Parallel p = new Parallel(2)) {
            float[][] both = javaAndNative(w, n, GemmTest.randn(m * k, 11), m, p);
            float[] java = both[0];
            float[] nat = both[1];
            for (int i = 0; i < m; i++) {
                for (int r = 0; r < n; r++) {
                    int o = i * n + r;
                    String at = "x row " + i + ", weight row " + r + ": " + java[o] + ", " + nat[o];
                    if (nanAt[r] >= 0) {
                        assertTrue(Float.isNaN(java[o]) && Float.isNaN(nat[o]), at);
                    } else {
                        assertEquals(Float.floatToRawIntBits(java[o]), Float.floatToRawIntBits(nat[o]), at);
                        assertTrue(Float.isFinite(nat[o]), at);
                    }
                }
            }
        }
    }

    private Linear fp8Codes(byte[] codes, int out, int in, float[] scaleInv, String name) throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.add("w", DType.F8_E4M3, new long[] {out, in}, codes);
        sw.addFloats("w_scale_inv", DType.F32, new long[] {1, 1}, scaleInv);
        Path f = dir.resolve("fp8-codes-" + name + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return new Linear(sf.tensor("w"), sf.tensor("w_scale_inv"), 128, 128);
    }

    private Linear fp8(int out, int in, int blockRows, int bc, long seed, int id) throws IOException {
        Fp8Blocks q = Fp8Blocks.quantize(GemmTest.randn(out * in, seed), out, in, blockRows, bc);
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.add("w", DType.F8_E4M3, new long[] {out, in}, q.codes());
        sw.addFloats("w_scale_inv", DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
        Path f = dir.resolve("fp8-" + id + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return new Linear(sf.tensor("w"), sf.tensor("w_scale_inv"), blockRows, bc);
    }

    /**
     * The same for INT4: K with a partial last word (K % 8 != 0), words past the last whole vector of 8 (K < 64, K =
     * 72, 1060), an odd number of vectors (one pair, then one alone: K = 200 on 8 lanes, 392 on 16), groups of 8, 32 and
     * 128 (a vector's words spanning one to eight groups), BF16, F16 and F32 scales, every
     * nibble at every place of a word, rows 1..9 and x rows 1..9, 258 rows on 3 threads.
     */
    @Test
    void theNativeInt4RowDotGivesTheJavaBits() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(RowDotGemm.NATIVE_ROWDOT, "no native row-dot on this machine/JVM");
        int[][] kGroups = {
            {8, 8}, {13, 8}, {64, 32}, {72, 8}, {100, 32}, {200, 8}, {256, 128}, {392, 8}, {1056, 32}, {1060, 32}
        };
        int id = 0;
        for (int[] kg : kGroups) {
            int k = kg[0];
            int group = kg[1];
            for (int n = 1; n <= 9; n++) {
                checkNativeRowDot(
                        Int4Weights.random(dir, n, k, group, 100L * k + n), n, k, new int[] {1, 2, 3, 4, 5, 9}, 1);
            }
            checkNativeRowDot(Int4Weights.random(dir, 258, k, group, k), 258, k, new int[] {1, 4, 7}, 3);
            for (DType scaleType : new DType[] {DType.BF16, DType.F16, DType.F32}) {
                int n = 6;
                // Raw scale patterns of a quantised weight's size (2^-8 .. 2^-3), either sign, every mantissa bit.
                java.util.Random rnd = new java.util.Random(k + group);
                int[] bits = new int[n * ((k + group - 1) / group)];
                for (int b = 0; b < bits.length; b++) {
                    int r = rnd.nextInt();
                    bits[b] = switch (scaleType) {
                        case F16 -> (r & 0x83FF) | ((7 + (r >>> 16) % 5 + 5) << 10) & 0x7C00;
                        case BF16 -> (r & 0x807F) | ((119 + (r >>> 16) % 5 + 5) << 7) & 0x7F80;
                        default -> (r & 0x807FFFFF) | ((119 + (r >>> 24) % 5 + 5) << 23) & 0x7F800000;
                    };
                }
                Linear w = Int4Weights.writeBits(
                        dir.resolve("every-" + id++ + ".safetensors"),
                        n,
                        k,
                        group,
                        Int4Weights.everyNibble(n, k),
                        bits,
                        scaleType);
                checkNativeRowDot(w, n, k, new int[] {1, 3, 5}, 2);
            }
        }
    }

    /** y = x w^T for m rows of x by the Java row-dot, then by the native one: {java, native}. */
    private static float[][] javaAndNative(Linear w, int n, float[] x, int m, Parallel p) {
        float[] java = new float[m * n];
        float[] nat = new float[m * n];
        RowDotGemm.matmulGroup(
                new float[][] {x}, new int[] {m}, new Linear[] {w}, new float[][] {java}, p, false, false);
        RowDotGemm.matmulGroup(new float[][] {x}, new int[] {m}, new Linear[] {w}, new float[][] {nat}, p, false, true);
        return new float[][] {java, nat};
    }

    private static void checkNativeRowDot(Linear w, int n, int k, int[] ms, int threads) {
        try (Parallel p = new Parallel(threads)) {
            for (int m : ms) {
                float[] x = GemmTest.randn(m * k, 13L * m + k);
                float[][] both = javaAndNative(w, n, x, m, p);
                float[] java = both[0];
                float[] nat = both[1];
                for (int i = 0; i < java.length; i++) {
                    assertEquals(
                            Float.floatToRawIntBits(java[i]),
                            Float.floatToRawIntBits(nat[i]),
                            w.format() + " " + m + "x" + n + "x" + k + ", " + threads + " threads, output " + i + ": "
                                    + java[i] + " vs " + nat[i]);
                }
                float[] ref = new float[m * n];
                PackedGemm.reference(x, m, w, ref);
                assertClose(ref, nat, k, w.format() + " native " + m + "x" + n + "x" + k);
            }
        }
    }

    /** A group of matmuls in one pass gives each member the bits it gets alone. */
    @Test
    void groupedMatmulsGiveTheBitsOfSingleOnes() throws IOException {
        Linear[] w = {
            linear(DType.BF16, 256, 1024, 1),
            linear(DType.F8_E4M3, 130, 320, 2),
            linear(DType.F32, 7, 33, 3),
            linear(DType.BF16, 66, 256, 4),
            linear(DType.I32, 258, 1056, 5)
        };
        int[] m = {1, 5, 2, 0, 3};
        float[][] x = new float[w.length][];
        float[][] y = new float[w.length][];
        for (int g = 0; g < w.length; g++) {
            x[g] = GemmTest.randn(m[g] * w[g].in(), 10 + g);
            y[g] = new float[m[g] * w[g].out()];
        }
        try (Parallel p = new Parallel(2)) {
            RowDotGemm.matmulGroup(x, m, w, y, p);
            for (int g = 0; g < w.length; g++) {
                float[] alone = new float[m[g] * w[g].out()];
                RowDotGemm.matmul(x[g], m[g], w[g], alone, p);
                assertArrayEquals(alone, y[g], "member " + g);
            }
        }
    }

    /**
     * INT4 rows take the kernel's documented order, computed here over rows decoded by Linear.row (q = the decoded weight
     * over its group's scale, exact): per output one L-lane accumulator, lane i of step j taking word jL + i as the dot of
     * its eight q with x in order (k = 8(jL + i) + p: q0 x0, then FMAs) and adding it times the scale by one FMA, for the
     * words below K / 8 rounded down to L; the lanes in the fixed tree; then the K tail by scalar FMAs of q × scale in
     * order. Groups of 8, 32 and 128 decode in registers; 24 (not a multiple of a word) takes the generic path, lane i
     * over k = i, i + L, ... M from 1 to 9 and N = 7 reach every register block (2 x 2, 4 x 1, and the 1 x 1 of a last
     * partial weight block).
     */
    @Test
    void int4OutputsAreTheDocumentedFmaOrderOverTheReferenceRows() throws IOException {
        int l = RowDotGemm.L;
        for (int[] s : new int[][] {{7, 1000, 32}, {7, 300, 128}, {5, 33, 32}, {6, 264, 8}, {7, 120, 24}}) {
            int n = s[0];
            int k = s[1];
            boolean words = s[2] % 8 == 0;
            Linear w = linear(DType.I32, n, k, 40L + k, s[2]);
            int kv = words ? k / 8 / l * l * 8 : k / l * l; // inputs the lanes take
            float[] row = new float[k];
            float[] lanes = new float[l];
            float[] scales = new float[w.groupScales()];
            for (int m = 1; m <= 9; m++) {
                float[] x = GemmTest.randn(m * k, m);
                float[] y = new float[m * n];
                try (Parallel p = new Parallel(2)) {
                    RowDotGemm.matmul(x, m, w, y, p);
                }
                for (int r = 0; r < n; r++) {
                    w.row(r, 0, k, row, 0);
                    w.groupScales(r, 0, scales, 0, scales.length);
                    for (int i = 0; i < m; i++) {
                        java.util.Arrays.fill(lanes, 0f);
                        if (words) {
                            for (int kk = 0; kk < kv; kk += 8) {
                                float sc = scales[kk / w.groupSize()];
                                float t = row[kk] / sc * x[i * k + kk];
                                for (int p = 1; p < 8; p++) {
                                    t = Math.fma(row[kk + p] / sc, x[i * k + kk + p], t);
                                }
                                lanes[kk / 8 % l] = Math.fma(t, sc, lanes[kk / 8 % l]);
                            }
                        } else {
                            for (int kk = 0; kk < kv; kk++) { // the generic path: lane i over k = i, i + L, ...
                                lanes[kk % l] = Math.fma(row[kk], x[i * k + kk], lanes[kk % l]);
                            }
                        }
                        float sum = Lanes.foldTree(lanes, 0, l);
                        for (int kk = kv; kk < k; kk++) {
                            sum = Math.fma(x[i * k + kk], row[kk], sum);
                        }
                        assertEquals(
                                Float.floatToIntBits(sum),
                                Float.floatToIntBits(y[i * n + r]),
                                "groups of " + s[2] + ", " + n + "x" + k + ", m = " + m + ": y[" + i + ", " + r + "]");
                    }
                }
            }
        }
    }

    @Test
    void cpuOpsDecodeUsesTheKernelOrTheScalarFallback() throws IOException {
        Linear w = linear(DType.BF16, 40, 96, 8);
        float[] x = GemmTest.randn(3 * 96, 9);
        float[] kernel = new float[3 * 40];
        float[] viaOps = new float[3 * 40];
        float[] scalar = new float[3 * 40];
        float[] ref = new float[3 * 40];
        try (Parallel p = new Parallel(1);
                CpuOps ops = new CpuOps(2);
                CpuOps noSimd = new CpuOps(2, false)) {
            RowDotGemm.matmul(x, 3, w, kernel, p);
            ops.matmulDecode(x, 3, w, viaOps);
            noSimd.matmulDecode(x, 3, w, scalar);
            PackedGemm.reference(x, 3, w, ref);
        }
        assertArrayEquals(kernel, viaOps);
        assertClose(ref, scalar, 96, "scalar fallback");
        assertClose(ref, kernel, 96, "kernel");
    }
}
