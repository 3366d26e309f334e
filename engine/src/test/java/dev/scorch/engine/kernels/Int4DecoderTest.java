package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.DType;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fast INT4 decoders (RowDecoder's Java vectors, row by row and staged; the native decoders' AVX-512 and AVX2 builds,
 * from a staged copy and in place in the mapping) give the bits of the format's definition, q × scale computed here by a
 * plain loop over the test's own words and scales, for every nibble and every scale: all 65,536 BF16 scales, and F16 and
 * F32 scales of every kind (subnormal, infinite, NaN, products that overflow), over shapes and offsets with tails.
 * NaNs compare as NaN (floatToIntBits), as everywhere in the kernels' tests.
 */
class Int4DecoderTest {
    @TempDir
    Path dir;

    private static void assertSameBits(float[] want, int wantOff, float[] got, int gotOff, int n, String what) {
        for (int i = 0; i < n; i++) {
            if (Float.floatToIntBits(want[wantOff + i]) != Float.floatToIntBits(got[gotOff + i])) {
                assertEquals(
                        want[wantOff + i],
                        got[gotOff + i],
                        what + " at " + i + " (bits " + Integer.toHexString(Float.floatToRawIntBits(want[wantOff + i]))
                                + " wanted, " + Integer.toHexString(Float.floatToRawIntBits(got[gotOff + i]))
                                + " got)");
                assertTrue(false, what + " at " + i + ": bits differ");
            }
        }
    }

    /** The whole weight by the format's definition. */
    private static float[] expected(int[] packed, float[] scales, int out, int in, int group) {
        float[] w = new float[out * in];
        for (int r = 0; r < out; r++) {
            for (int j = 0; j < in; j++) {
                w[r * in + j] = Int4Weights.dequantize(packed, scales, in, group, r, j);
            }
        }
        return w;
    }

    @Test
    void everyNibbleTimesEveryBf16ScaleInEveryDecoder() throws IOException {
        // 2048 rows of 32 groups of 32: scale pattern p (0 .. 65535) is group p % 32 of row p / 32. Input j of row r
        // holds
        // nibble (j + r) % 16, so every group holds every nibble twice and every nibble sits at every place of a word.
        int group = 32;
        int in = 1024;
        int groups = in / group;
        int out = 65536 / groups;
        int words = in / 8;
        int[] packed = Int4Weights.everyNibble(out, in);
        int[] bits = new int[out * groups];
        float[] scales = new float[bits.length];
        for (int p = 0; p < bits.length; p++) {
            bits[p] = p;
            scales[p] = Int4Weights.scale(p, DType.BF16);
        }
        Linear w = Int4Weights.writeBits(dir.resolve("all-bf16.safetensors"), out, in, group, packed, bits, DType.BF16);
        float[] want = expected(packed, scales, out, in, group);

        float[] got = new float[out * in];
        for (int r = 0; r < out; r++) {
            w.row(r, 0, in, got, r * in);
        }
        assertSameBits(want, 0, got, 0, got.length, "Linear.row (the reference)");

        RowDecoder decoder = new RowDecoder(in, 64, in);
        java.util.Arrays.fill(got, 0f);
        for (int r = 0; r < out; r++) {
            decoder.decode(w, r, 0, in, got, r * in);
        }
        assertSameBits(want, 0, got, 0, got.length, "Java vectors, row by row");

        // 128-bit vectors (fewer than 8 lanes) do not decode INT4: rows go through Linear.row, and nothing is staged.
        assertEquals(RowDecoder.L >= 8, RowDecoder.int4InRegisters(w));
        if (!RowDecoder.int4InRegisters(w)) {
            assertTrue(!decoder.stage(w, 0, 64, 0, in), "not staged without vectors");
            return;
        }
        java.util.Arrays.fill(got, 0f);
        for (int r0 = 0; r0 < out; r0 += 64) {
            assertTrue(decoder.stage(w, r0, 64, 0, in), "staged");
            float[] block = new float[64 * in];
            decoder.decodeStagedRows(64, 0, in, block, false);
            System.arraycopy(block, 0, got, r0 * in, block.length);
        }
        assertSameBits(want, 0, got, 0, got.length, "Java vectors, staged");

        if (!NativeCpu.available()) {
            return;
        }
        for (boolean inPlace : new boolean[] {false, true}) {
            java.util.Arrays.fill(got, 0f);
            float[] block = new float[64 * in];
            for (int r0 = 0; r0 < out; r0 += 64) {
                assertTrue(decoder.stage(w, r0, 64, 0, in, inPlace), "staged");
                assertEquals(inPlace && NativeCpu.mappedReadsGuarded(), decoder.stagedInPlace());
                decoder.decodeStagedRows(64, 0, in, block, true);
                System.arraycopy(block, 0, got, r0 * in, block.length);
            }
            assertSameBits(
                    want,
                    0,
                    got,
                    0,
                    got.length,
                    "native, " + (inPlace ? "in place" : "staged copy")
                            + (NativeCpu.avx512() ? " (AVX-512)" : " (AVX2)"));
        }
        // Both builds straight on the arrays, whichever the CPU picks.
        for (boolean avx512 : new boolean[] {false, true}) {
            java.util.Arrays.fill(got, 0f);
            NativeCpu.int4Rows(packed, 0, words, out, in, scales, 0, groups, 0, group, got, avx512);
            assertSameBits(
                    want,
                    0,
                    got,
                    0,
                    got.length,
                    "native " + (avx512 && NativeCpu.avx512() ? "AVX-512" : "AVX2") + " build");
        }
    }

    /** Random words and scale patterns of scaleType, with the special values every row meets. */
    private Linear randomWeight(Random rnd, int out, int in, int group, DType scaleType, int[] packed, float[] scales)
            throws IOException {
        int groups = (in + group - 1) / group;
        int[] specials = scaleType == DType.F32
                ? new int[] {
                    0,
                    0x80000000,
                    1,
                    0x80000001,
                    0x007fffff,
                    0x7f7fffff,
                    0xff7fffff,
                    0x7f800000,
                    0xff800000,
                    0x7fc00000,
                    0x7f800001,
                    0x3f800000
                }
                : new int[] {
                    0, 0x8000, 1, 0x8001, 0x03ff, 0x7bff, 0x7f7f, 0xfbff, 0x7c00, 0xfc00, 0x7f80, 0x7e00, 0x7fc0,
                    0x3f80, 0x3c00
                };
        int[] bits = new int[out * groups];
        for (int i = 0; i < bits.length; i++) {
            int special = specials[i % specials.length];
            bits[i] = rnd.nextInt(3) == 0 ? special : scaleType == DType.F32 ? rnd.nextInt() : rnd.nextInt(1 << 16);
            scales[i] = Int4Weights.scale(bits[i], scaleType);
        }
        for (int i = 0; i < packed.length; i++) {
            packed[i] = rnd.nextInt();
        }
        // The padding nibbles of a row's last word (in not a multiple of 8) are whatever the file holds: random here
        // too.
        return Int4Weights.writeBits(
                dir.resolve(out + "x" + in + "-" + group + scaleType + ".safetensors"),
                out,
                in,
                group,
                packed,
                bits,
                scaleType);
    }

    @Test
    void oddShapesOffsetsGroupsAndScaleTypes() throws IOException {
        // {out, in, group}: in not a multiple of 8, of the group or of the vector width; groups of 32 and 128 (the real
        // ones),
        // 24 and 8 (vectors that cannot fill a group, or start inside a word after one); K past one stage of 1024.
        int[][] shapes = {
            {9, 100, 32}, {9, 100, 128}, {7, 1300, 32}, {7, 1300, 128}, {5, 37, 24}, {6, 300, 8}, {3, 5, 32}
        };
        Random rnd = new Random(25);
        for (DType scaleType : new DType[] {DType.BF16, DType.F16, DType.F32}) {
            for (int[] s : shapes) {
                int out = s[0];
                int in = s[1];
                int group = s[2];
                int[] packed = new int[out * ((in + 7) / 8)];
                float[] scales = new float[out * ((in + group - 1) / group)];
                Linear w = randomWeight(rnd, out, in, group, scaleType, packed, scales);
                float[] want = expected(packed, scales, out, in, group);
                String shape = scaleType + " scales, " + out + "x" + in + " in groups of " + group;
                rowSegments(w, want, shape);
                if (RowDecoder.int4InRegisters(w)) {
                    stagedBlocks(w, want, shape);
                }
            }
        }
    }

    /** RowDecoder.decode of segments from every kind of k0: a word's first input or not, a group's first or not. */
    private static void rowSegments(Linear w, float[] want, String shape) {
        int in = w.in();
        RowDecoder decoder = new RowDecoder(in);
        float[] got = new float[in + 3];
        for (int r = 0; r < w.out(); r++) {
            for (int k0 : new int[] {0, 1, 3, 8, 16, 24, 31, 32, 40, 64, 99, 128, 256, 1024, 1299}) {
                for (int n : new int[] {in - k0, 1, 7, 8, 17, 33, 256}) {
                    if (k0 >= in || n < 1 || k0 + n > in) {
                        continue;
                    }
                    decoder.decode(w, r, k0, n, got, 3);
                    assertSameBits(
                            want,
                            r * in + k0,
                            got,
                            3,
                            n,
                            shape + ": decode row " + r + " [" + k0 + ", " + (k0 + n) + ")");
                }
            }
        }
    }

    /** Blocks staged (copied, and in place for the native decoders) and decoded in K blocks, as PackedGemm stages them. */
    private static void stagedBlocks(Linear w, float[] want, String shape) {
        int in = w.in();
        int out = w.out();
        List<int[]> blocks = new ArrayList<>(); // {first row, rows, first input, inputs}
        blocks.add(new int[] {0, out, 0, Math.min(in, 1024)}); // whole rows (in one copy) where in <= 1024
        blocks.add(new int[] {1, out - 1, 0, Math.min(in, 1024)});
        if (in > 8) {
            blocks.add(new int[] {1, out - 1, 8, Math.min(in - 8, 1024)});
            blocks.add(new int[] {0, 2, 3, Math.min(in - 3, 1024)}); // not a word's first input: Java decoding only
        }
        if (in > 1024) {
            blocks.add(new int[] {2, out - 2, 1024, in - 1024});
        }
        RowDecoder decoder = new RowDecoder(256, out, 1024);
        for (int[] b : blocks) {
            for (boolean inPlace : new boolean[] {false, true}) {
                assertTrue(decoder.stage(w, b[0], b[1], b[2], b[3], inPlace), shape + " stages");
                boolean inMapping = inPlace && NativeCpu.mappedReadsGuarded() && b[2] % 8 == 0;
                assertEquals(inMapping, decoder.stagedInPlace(), shape + " in place");
                // K blocks of up to 256 inputs from the stage's first, and one of 5 from 16 inputs in (a group's middle
                // for 24 and 32).
                List<int[]> kBlocks = new ArrayList<>();
                for (int k0 = b[2]; k0 < b[2] + b[3]; k0 += 256) {
                    kBlocks.add(new int[] {k0, Math.min(256, b[2] + b[3] - k0)});
                }
                if (b[3] > 21) {
                    kBlocks.add(new int[] {b[2] + 16, 5});
                }
                for (int[] kb : kBlocks) {
                    String what = shape + ": rows " + b[0] + " + " + b[1] + ", staged from " + b[2]
                            + (inMapping ? " in place" : "") + ", K block [" + kb[0] + ", " + (kb[0] + kb[1]) + ")";
                    float[] got = new float[b[1] * kb[1]];
                    if (!inMapping) {
                        for (int j = 0; j < b[1]; j++) {
                            decoder.decodeStaged(j, kb[0], kb[1], got, j * kb[1]);
                            assertSameBits(
                                    want,
                                    (b[0] + j) * in + kb[0],
                                    got,
                                    j * kb[1],
                                    kb[1],
                                    what + ", Java, row " + (b[0] + j));
                        }
                    }
                    if (NativeCpu.available()) {
                        java.util.Arrays.fill(got, 0f);
                        decoder.decodeStagedRows(b[1], kb[0], kb[1], got, true);
                        for (int j = 0; j < b[1]; j++) {
                            assertSameBits(
                                    want,
                                    (b[0] + j) * in + kb[0],
                                    got,
                                    j * kb[1],
                                    kb[1],
                                    what + ", native, row " + (b[0] + j));
                        }
                    }
                }
            }
        }
    }
}
