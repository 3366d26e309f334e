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
import dev.scorch.engine.demo.Fp8Blocks;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The fast GEMM against its scalar fallback (bitwise) and the plain reference (within fp32 rounding), per weight dtype. */
class GemmTest {
    @TempDir
    Path dir;

    static float[] randn(int n, long seed) {
        Random r = new Random(seed);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) r.nextGaussian();
        }
        return v;
    }

    Linear linear(DType dtype, int out, int in, long seed) throws IOException {
        return linear(dtype, out, in, seed, 128, dtype == DType.I32 ? 32 : 128);
    }

    /**
     * FP8 weights quantized in blocks of blockRows x blockCols; I32 stands for INT4 (compressed-tensors' packed words) in
     * groups of blockCols inputs; other dtypes ignore the block.
     */
    Linear linear(DType dtype, int out, int in, long seed, int blockRows, int blockCols) throws IOException {
        if (dtype == DType.I32) {
            return Int4Weights.random(dir, out, in, blockCols, seed);
        }
        float[] w = randn(out * in, seed);
        SafetensorsWriter sw = new SafetensorsWriter();
        if (dtype == DType.F8_E4M3) {
            Fp8Blocks q = Fp8Blocks.quantize(w, out, in, blockRows, blockCols);
            sw.add("w", DType.F8_E4M3, new long[] {out, in}, q.codes());
            sw.addFloats("w_scale_inv", DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
        } else {
            sw.addFloats("w", dtype, new long[] {out, in}, w);
        }
        Path f = dir.resolve(dtype + "-" + out + "x" + in + "-" + blockCols + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return dtype == DType.F8_E4M3
                ? new Linear(sf.tensor("w"), sf.tensor("w_scale_inv"), blockRows, blockCols)
                : new Linear(sf.tensor("w"));
    }

    @Test
    void packedEqualsScalarBitwiseAndReferenceClosely() throws IOException {
        // Shapes with tails everywhere: M not a multiple of the tile, N not of the weight group, K not of the K
        // block; M past one block of rows and past one transposed chunk; K past one staged block (rows staged in
        // parts).
        // With two threads: 1100 rows are a chunk of two blocks, one per thread, then a chunk of three tiles, two owned
        // and
        // one shared; 700 rows are two owned blocks; 300 rows against 1300 weight rows are two shared blocks.
        int[][] shapes = {
            {1, 1, 1},
            {3, 17, 5},
            {7, 33, 300},
            {13, 100, 513},
            {64, 130, 260},
            {1100, 13, 300},
            {700, 29, 70},
            {300, 1300, 20},
            {5, 20, 1300}
        };
        for (DType dtype : new DType[] {DType.F32, DType.BF16, DType.F8_E4M3, DType.I32}) {
            for (int[] s : shapes) {
                int m = s[0];
                int n = s[1];
                int k = s[2];
                Linear w = linear(dtype, n, k, 31L * n + k);
                float[] x = randn(m * k, m + 7L * k);
                float[] fast = new float[m * n];
                float[] other = new float[m * n];
                float[] javaKernel = new float[m * n];
                float[] nativeKernel = new float[m * n];
                float[] scalar = new float[m * n];
                float[] ref = new float[m * n];
                try (Parallel p = new Parallel(2)) {
                    PackedGemm.matmul(x, m, w, fast, p, PackedGemm.PRECISION);
                    // The micro-kernel this JVM does not pick (2 x 6 from JDK 21, 2 x 4 on 17) gives the same bits.
                    PackedGemm.matmul(x, m, new Linear[] {w}, new float[][] {other}, p, PackedGemm.NR == 6 ? 4 : 6);
                    // The 2 x 6 tile in Java and, where it runs, the native kernel's tile (2 x 6 with AVX2, 2 x 12 with
                    // AVX-512).
                    PackedGemm.matmul(x, m, new Linear[] {w}, new float[][] {javaKernel}, p, 6, false);
                    if (PackedGemm.NATIVE) {
                        PackedGemm.matmul(
                                x, m, new Linear[] {w}, new float[][] {nativeKernel}, p, PackedGemm.NATIVE_NR, true);
                    }
                    ScalarGemm.matmul(x, m, w, scalar, p);
                }
                PackedGemm.reference(x, m, w, ref);
                String what = dtype + " " + m + "x" + n + "x" + k;
                assertArrayEquals(scalar, fast, what + ": packed vs scalar fallback");
                assertArrayEquals(scalar, other, what + ": the other micro-kernel vs scalar fallback");
                assertArrayEquals(scalar, javaKernel, what + ": the Java 2 x 6 kernel vs scalar fallback");
                if (PackedGemm.NATIVE) {
                    assertArrayEquals(scalar, nativeKernel, what + ": the native kernel vs scalar fallback");
                }
                for (int i = 0; i < ref.length; i++) {
                    assertEquals(ref[i], fast[i], 1e-4 * Math.sqrt(k) + 1e-5 * Math.abs(ref[i]), what + " at " + i);
                }
            }
        }
    }

    @Test
    void fp8BlocksThatStraddleTheKBlocksDecodeAlike() throws IOException {
        // Scale blocks of 96 inputs: K blocks of 256 start inside one (at 64 and 32 of it), and K = 1300 is staged in
        // parts.
        Linear w = linear(DType.F8_E4M3, 50, 1300, 11, 24, 96);
        float[] x = randn(40 * 1300, 12);
        float[] javaKernel = new float[40 * 50];
        float[] nativeKernel = new float[40 * 50];
        float[] scalar = new float[40 * 50];
        try (Parallel p = new Parallel(2)) {
            PackedGemm.matmul(x, 40, new Linear[] {w}, new float[][] {javaKernel}, p, 6, false);
            PackedGemm.matmul(
                    x,
                    40,
                    new Linear[] {w},
                    new float[][] {nativeKernel},
                    p,
                    PackedGemm.NATIVE ? PackedGemm.NATIVE_NR : 6,
                    PackedGemm.NATIVE);
            ScalarGemm.matmul(x, 40, w, scalar, p);
        }
        assertArrayEquals(scalar, javaKernel, "Java decoding");
        assertArrayEquals(scalar, nativeKernel, "native decoding where it loads");
    }

    @Test
    void int4GroupsThatStraddleTheKBlocksDecodeAlike() throws IOException {
        // Groups of 128 and of 24 (a K block of 256 starts 16 inputs into a group, and a group starts inside a vector),
        // K = 1300
        // staged in parts and not a multiple of 8 (the last word is partial).
        for (int group : new int[] {128, 24}) {
            Linear w = linear(DType.I32, 50, 1300, 11, 0, group);
            float[] x = randn(40 * 1300, 12);
            float[] javaKernel = new float[40 * 50];
            float[] nativeKernel = new float[40 * 50];
            float[] scalar = new float[40 * 50];
            float[] ref = new float[40 * 50];
            try (Parallel p = new Parallel(2)) {
                PackedGemm.matmul(x, 40, new Linear[] {w}, new float[][] {javaKernel}, p, 6, false);
                PackedGemm.matmul(
                        x,
                        40,
                        new Linear[] {w},
                        new float[][] {nativeKernel},
                        p,
                        PackedGemm.NATIVE ? PackedGemm.NATIVE_NR : 6,
                        PackedGemm.NATIVE);
                ScalarGemm.matmul(x, 40, w, scalar, p);
            }
            PackedGemm.reference(x, 40, w, ref);
            assertArrayEquals(scalar, javaKernel, "Java decoding, groups of " + group);
            assertArrayEquals(scalar, nativeKernel, "native decoding where it loads, groups of " + group);
            for (int i = 0; i < ref.length; i++) {
                assertEquals(
                        ref[i],
                        scalar[i],
                        1e-4 * Math.sqrt(1300) + 1e-5 * Math.abs(ref[i]),
                        "groups of " + group + " at " + i);
            }
        }
    }

    @Test
    void theNativeKernelLoadsWhereTheBuildCarriesIt() {
        // A jar built on x86-64 Linux with a C compiler carries the library; it must then load, unless the CPU lacks
        // AVX2.
        boolean carried = NativeCpu.class.getResource("native/libscorch_cpu.so") != null;
        boolean x86Linux = System.getProperty("os.name").startsWith("Linux")
                && System.getProperty("os.arch").equals("amd64");
        if (carried && x86Linux && !"false".equals(System.getProperty("scorch.native"))) {
            assertTrue(NativeCpu.available() || NativeCpu.status().contains("lacks AVX2"), NativeCpu.status());
        }
        // xᵀ's buffers hold exactly the floats asked for, whatever the allocation's place in its first line.
        for (int n : new int[] {0, 1, 15, 16, 17, 1000}) {
            assertEquals(n * Float.BYTES, NativeCpu.alignedFloats(n).capacity(), "floats " + n);
        }
        for (int mr : nativeTiles()) {
            int nr = NativeCpu.nr(mr);
            ByteBuffer xt = NativeCpu.alignedFloats(mr * 8);
            float[] wb = new float[nr * 8];
            ByteBuffer c = NativeCpu.alignedFloats(nr * mr);
            float[] y = new float[mr * nr];
            NativeCpu.kernelBlock(mr, xt, 0, 1, 8, 0, 8, wb, 1, c, mr, true, null, 0, 0, 0, 0, 0);
            NativeCpu.kernelBlock(mr, xt, 0, 1, 8, 0, 8, wb, 1, c, mr, true, y, 0, mr, nr, 0, nr);
            assertThrows(
                    IndexOutOfBoundsException.class,
                    () -> NativeCpu.kernelBlock(mr, xt, 1, 1, 8, 0, 8, wb, 1, c, mr, true, null, 0, 0, 0, 0, 0));
            assertThrows(
                    IndexOutOfBoundsException.class,
                    () -> NativeCpu.kernelBlock(mr, xt, 0, 1, 8, 0, 8, wb, 2, c, mr, true, null, 0, 0, 0, 0, 0));
            assertThrows(
                    IndexOutOfBoundsException.class,
                    () -> NativeCpu.kernelBlock(mr, xt, 0, 1, 8, 4, 8, wb, 1, c, mr, true, null, 0, 0, 0, 0, 0));
            assertThrows(
                    IndexOutOfBoundsException.class,
                    () -> NativeCpu.kernelBlock(mr, xt, 0, 1, 8, 0, 8, wb, 1, c, mr, true, y, 1, mr, nr, 0, nr));
            assertThrows(
                    IndexOutOfBoundsException.class,
                    () -> NativeCpu.kernelBlock(mr, xt, 0, 1, 8, 0, 8, wb, 1, c, mr, true, y, 0, mr, nr, 1, nr));
            // The transpose: 3 rows of 8 inputs into one tile.
            float[] x = new float[3 * 8];
            NativeCpu.transposeTile(mr, x, 0, 3, 8, xt, 0);
            assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.transposeTile(mr, x, 1, 3, 8, xt, 0));
            assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.transposeTile(mr, x, 0, 3, 8, xt, 1));
            assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.transposeTile(mr, x, 0, mr + 1, 0, xt, 0));
        }
        if (NativeCpu.available()) {
            ByteBuffer xt = NativeCpu.alignedFloats(32 * 8);
            float[] wb = new float[12 * 8];
            ByteBuffer c = NativeCpu.alignedFloats(12 * 32);
            // No tile of 24 rows; 32 only where the CPU has AVX-512.
            assertThrows(
                    IllegalArgumentException.class,
                    () -> NativeCpu.kernelBlock(24, xt, 0, 1, 8, 0, 8, wb, 1, c, 24, true, null, 0, 0, 0, 0, 0));
            if (!NativeCpu.avx512()) {
                assertThrows(
                        IllegalArgumentException.class,
                        () -> NativeCpu.kernelBlock(32, xt, 0, 1, 8, 0, 8, wb, 1, c, 32, true, null, 0, 0, 0, 0, 0));
            }
            // The decoders: 2 rows of 8 at stride 10 (18 raw values), scales 2 per row for blocks of 8 from lead 0.
            short[] halves = new short[18];
            byte[] codes = new byte[18];
            float[] scales = new float[4];
            float[] dst = new float[16];
            NativeCpu.bf16Rows(halves, 0, 10, 2, 8, dst);
            NativeCpu.fp8Rows(codes, 0, 10, 2, 8, scales, 2, 0, 8, dst);
            assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.bf16Rows(halves, 1, 10, 2, 8, dst));
            assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.bf16Rows(halves, 0, 10, 2, 9, dst));
            assertThrows(
                    IndexOutOfBoundsException.class, () -> NativeCpu.fp8Rows(codes, 0, 10, 2, 8, scales, 3, 0, 8, dst));
            assertThrows(
                    IndexOutOfBoundsException.class, () -> NativeCpu.fp8Rows(codes, 0, 10, 2, 8, scales, 2, 4, 8, dst));
            assertThrows(
                    IndexOutOfBoundsException.class, () -> NativeCpu.fp8Rows(codes, 0, 10, 3, 8, scales, 1, 0, 8, dst));
        }
    }

    @Test
    void nativeDecodersGiveTheJavaDecodersBitsForEveryCode() throws IOException {
        // 5 rows of 300 inputs (past the last 16- and 8-input step: 300 = 18 x 16 + 8 + 4), each row holding every FP8
        // code
        // (NaN 0x7f and 0xff, subnormals, both zeros) in its own order, FP8 scales per 2 rows x 32 inputs; BF16 rows of
        // every
        // kind of half (NaN, infinities, subnormals) from a seeded draw.
        int rows = 5;
        int k = 300;
        byte[] codes = new byte[rows * k];
        short[] halves = new short[rows * k];
        Random r = new Random(5);
        for (int j = 0; j < rows; j++) {
            for (int i = 0; i < k; i++) {
                codes[j * k + i] = (byte) (i * 7 + j * 31);
                halves[j * k + i] = (short) r.nextInt(1 << 16);
            }
        }
        float[] scaleInv = new float[3 * 10];
        for (int i = 0; i < scaleInv.length; i++) {
            scaleInv[i] = (float) Math.scalb(1.0 + i / 7.0, i % 9 - 6);
        }
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.add("fp8", DType.F8_E4M3, new long[] {rows, k}, codes);
        sw.addFloats("fp8_scale_inv", DType.F32, new long[] {3, 10}, scaleInv);
        ByteBuffer bf16 = ByteBuffer.allocate(2 * halves.length).order(ByteOrder.LITTLE_ENDIAN);
        bf16.asShortBuffer().put(halves);
        sw.add("bf16", DType.BF16, new long[] {rows, k}, bf16.array());
        Path f = dir.resolve("codes.safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        Linear[] weights = {
            new Linear(sf.tensor("fp8"), sf.tensor("fp8_scale_inv"), 2, 32), new Linear(sf.tensor("bf16"))
        };
        if (!NativeCpu.available()) {
            return;
        }
        RowDecoder decoder = new RowDecoder(k, rows, k);
        for (Linear w : weights) {
            assertTrue(decoder.stage(w, 0, rows, 0, k), w.name() + " staged");
            float[] java = new float[rows * k];
            float[] nativeRows = new float[rows * k];
            decoder.decodeStagedRows(rows, 0, k, java, false);
            decoder.decodeStagedRows(rows, 0, k, nativeRows, true);
            for (int i = 0; i < java.length; i++) {
                assertEquals(Float.floatToIntBits(java[i]), Float.floatToIntBits(nativeRows[i]), w.name() + " at " + i);
            }
        }
    }

    /** The native kernels' tile heights (rows of x) this CPU runs: 16 (AVX2), and 32 where it has AVX-512; none without. */
    static int[] nativeTiles() {
        return !NativeCpu.available() ? new int[0] : NativeCpu.avx512() ? new int[] {16, 32} : new int[] {16};
    }

    @Test
    void eachNativeKernelIsOneFmaChainPerOutputInOrder() {
        // Every tile this CPU runs, whichever one PackedGemm picks here (an AVX-512 machine checks the AVX2 kernel
        // too),
        // over 2 K blocks (the second adds to the first's sums) into y: each output must be the scalar FMA chain over
        // k.
        // 3 tiles, 2 groups; the last tile's rows and the last group's weight rows are cut short in y.
        int kDim = 40;
        for (int mr : nativeTiles()) {
            int nr = NativeCpu.nr(mr);
            int tiles = 3;
            int groups = 2;
            int mb = 2 * mr + 5;
            int nn = nr + 1;
            int nDim = nn + 3;
            int n0 = 2;
            int rowBase = 1;
            float[] x = randn((rowBase + mb) * kDim, mr);
            float[] w = randn(groups * nr * kDim, mr + 1);
            ByteBuffer xt = NativeCpu.alignedFloats(tiles * mr * kDim);
            for (int t = 0; t < tiles; t++) {
                NativeCpu.transposeTile(
                        mr, x, (rowBase + t * mr) * kDim, Math.min(mr, mb - t * mr), kDim, xt, t * mr * kDim);
            }
            ByteBuffer c = NativeCpu.alignedFloats(groups * nr * tiles * mr);
            float[] y = new float[(rowBase + mb) * nDim];
            int[] k0s = {0, 24};
            for (int k0 : k0s) {
                int kc = k0 == 0 ? 24 : kDim - 24;
                float[] wb = new float[groups * nr * kc];
                for (int j = 0; j < groups * nr; j++) {
                    System.arraycopy(w, j * kDim + k0, wb, j * kc, kc);
                }
                NativeCpu.kernelBlock(
                        mr,
                        xt,
                        0,
                        tiles,
                        kDim,
                        k0,
                        kc,
                        wb,
                        groups,
                        c,
                        tiles * mr,
                        k0 == 0,
                        k0 == 0 ? null : y,
                        rowBase,
                        mb,
                        nDim,
                        n0,
                        nn);
            }
            for (int i = 0; i < mb; i++) {
                for (int j = 0; j < nDim; j++) {
                    float expected = 0f;
                    if (j >= n0 && j < n0 + nn) {
                        for (int k = 0; k < kDim; k++) {
                            expected = Math.fma(x[(rowBase + i) * kDim + k], w[(j - n0) * kDim + k], expected);
                        }
                    }
                    assertEquals(
                            Float.floatToIntBits(expected),
                            Float.floatToIntBits(y[(rowBase + i) * nDim + j]),
                            "tile of " + mr + " rows: y[" + i + ", " + j + "]");
                }
            }
        }
    }

    @Test
    void weightsSharingAnInputGiveTheBitsOfTheirOwnCalls() throws IOException {
        Linear a = linear(DType.BF16, 40, 300, 1);
        Linear b = linear(DType.F8_E4M3, 77, 300, 2);
        Linear c = linear(DType.I32, 50, 300, 4); // an INT4 expert's gate_proj beside its up_proj
        float[] x = randn(300 * 300, 3);
        float[] ya = new float[300 * 40];
        float[] yb = new float[300 * 77];
        float[] yc = new float[300 * 50];
        float[] aloneA = new float[300 * 40];
        float[] aloneB = new float[300 * 77];
        float[] aloneC = new float[300 * 50];
        try (Parallel p = new Parallel(2)) {
            PackedGemm.matmul(x, 300, new Linear[] {a, b, c}, new float[][] {ya, yb, yc}, p, PackedGemm.PRECISION);
            PackedGemm.matmul(x, 300, a, aloneA, p, PackedGemm.PRECISION);
            PackedGemm.matmul(x, 300, b, aloneB, p, PackedGemm.PRECISION);
            PackedGemm.matmul(x, 300, c, aloneC, p, PackedGemm.PRECISION);
        }
        assertArrayEquals(aloneA, ya, "first weight");
        assertArrayEquals(aloneB, yb, "second weight");
        assertArrayEquals(aloneC, yc, "third weight (INT4)");
    }

    @Test
    void aRowGivesTheSameBitsAloneOrInsideABatch() throws IOException {
        for (DType dtype : new DType[] {DType.BF16, DType.I32}) {
            Linear w = linear(dtype, 70, 600, 5);
            float[] x = randn(9 * 600, 9);
            float[] all = new float[9 * 70];
            float[] one = new float[70];
            try (Parallel p2 = new Parallel(2);
                    Parallel p1 = new Parallel(1)) {
                PackedGemm.matmul(x, 9, w, all, p2, PackedGemm.PRECISION);
                for (int row = 0; row < 9; row++) {
                    PackedGemm.matmul(
                            java.util.Arrays.copyOfRange(x, row * 600, (row + 1) * 600),
                            1,
                            w,
                            one,
                            p1,
                            PackedGemm.PRECISION);
                    assertArrayEquals(
                            one, java.util.Arrays.copyOfRange(all, row * 70, (row + 1) * 70), dtype + " row " + row);
                }
            }
        }
    }

    @Test
    void fp8RowsAreCodesTimesTheirBlockScale() throws IOException {
        Linear w = linear(DType.F8_E4M3, 130, 260, 77);
        float[] orig = randn(130 * 260, 77);
        Fp8Blocks q = Fp8Blocks.quantize(orig, 130, 260, 128, 128);
        float[] row = new float[260];
        for (int r : new int[] {0, 127, 128, 129}) {
            w.row(r, 0, 260, row, 0);
            for (int c : new int[] {0, 127, 128, 255, 256, 259}) {
                float expected =
                        NumberFormats.e4m3ToFloat(q.codes()[r * 260 + c]) * q.scaleInv()[(r / 128) * 3 + c / 128];
                assertEquals(expected, row[c], 0f, "W[" + r + "," + c + "]");
                // And close to the value before quantisation: 3 mantissa bits, relative to the block's largest value.
                assertTrue(Math.abs(row[c] - orig[r * 260 + c]) <= q.scaleInv()[(r / 128) * 3 + c / 128] * 448 / 16);
            }
        }
    }

    /** Staged blocks decode to the bits of row by row decoding: whole rows in one copy, parts of rows, a block inside them. */
    @Test
    void stagedBlocksDecodeLikeRows() throws IOException {
        for (DType dtype : new DType[] {DType.BF16, DType.F8_E4M3, DType.I32}) {
            Linear w = linear(dtype, 30, 1300, 5);
            RowDecoder staging = new RowDecoder(300, 12, 1300);
            RowDecoder plain = new RowDecoder(300);
            // {first row, rows, first input, inputs}: whole rows; a part at the end; a part in the middle.
            for (int[] b : new int[][] {{0, 12, 0, 1300}, {17, 12, 1024, 276}, {3, 5, 256, 512}}) {
                assertEquals(
                        staged(w),
                        staging.stage(w, b[0], b[1], b[2], b[3]),
                        dtype + " stages where its vectors decode");
                if (!staged(w)) {
                    continue;
                }
                for (int j = 0; j < b[1]; j++) {
                    for (int k0 = b[2]; k0 < b[2] + b[3]; k0 += 256) {
                        int n = Math.min(256, b[2] + b[3] - k0);
                        float[] want = new float[n + 2];
                        float[] got = new float[n + 2];
                        plain.decode(w, b[0] + j, k0, n, want, 2);
                        staging.decodeStaged(j, k0, n, got, 2);
                        assertArrayEquals(want, got, dtype + " row " + (b[0] + j) + " from input " + k0);
                    }
                }
            }
        }
        Linear f32 = linear(DType.F32, 4, 8, 1);
        assertTrue(
                !new RowDecoder(8, 4, 8).stage(f32, 0, 4, 0, 8),
                "F32 rows are not staged: they decode through Linear.row");
    }

    /** Whether RowDecoder stages blocks of w (with the vector widths of this JVM: 128-bit vectors do not take FP8 or INT4). */
    static boolean staged(Linear w) {
        return w.dtype() == DType.BF16 && RowDecoder.H != null
                || RowDecoder.fp8InRegisters(w)
                || RowDecoder.int4InRegisters(w);
    }

    /** Blocks the native decoders read in place in the mapping give the bits of blocks copied out of it first. */
    @Test
    void blocksStagedInPlaceDecodeLikeCopiedOnes() throws IOException {
        assumeTrue(NativeCpu.available(), "the native decoders: " + NativeCpu.status());
        for (DType dtype : new DType[] {DType.BF16, DType.F8_E4M3, DType.I32}) {
            Linear w = linear(dtype, 30, 1300, 6);
            if (!staged(w)) {
                continue;
            }
            RowDecoder inPlace = new RowDecoder(300, 12, 1300);
            RowDecoder copied = new RowDecoder(300, 12, 1300);
            for (int[] b : new int[][] {{0, 12, 0, 1300}, {17, 12, 1024, 276}, {3, 5, 256, 512}, {29, 1, 0, 1300}}) {
                assertTrue(
                        inPlace.stage(w, b[0], b[1], b[2], b[3], true) && inPlace.stagedInPlace(),
                        dtype + " stays in place");
                assertTrue(
                        copied.stage(w, b[0], b[1], b[2], b[3], false) && !copied.stagedInPlace(),
                        dtype + " is copied");
                for (int k0 = b[2]; k0 < b[2] + b[3]; k0 += 256) {
                    int n = Math.min(256, b[2] + b[3] - k0);
                    float[] want = new float[b[1] * n];
                    float[] got = new float[b[1] * n];
                    copied.decodeStagedRows(b[1], k0, n, want, true);
                    inPlace.decodeStagedRows(b[1], k0, n, got, true);
                    assertArrayEquals(want, got, dtype + " rows " + b[0] + " + " + b[1] + " from input " + k0);
                }
            }
        }
    }
}
