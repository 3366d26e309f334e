package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * NativeCpu's bound checks (the C side trusts them) on arguments whose int sums and products overflow: each must be
 * refused, not wrapped to a small or negative number that passes. The checks are called directly, so nothing reaches
 * the native code whatever they say.
 */
class NativeCpuBoundsTest {
    private static final int MAX = Integer.MAX_VALUE;

    /** A kernel block that fits: 2 tiles of 16 rows, K 64 in one block, 2 groups of 6 weight rows, y of 32 x 12. */
    private static void block(
            int xtOff,
            int tiles,
            int kDim,
            int k0,
            int kc,
            int groups,
            int mPad,
            int yLength,
            int rowBase,
            int mb,
            int nDim,
            int n0,
            int nn) {
        NativeCpu.checkKernelBlock(
                16,
                true,
                2L * 64 * 16,
                (long) kDim * 16,
                xtOff,
                tiles,
                kDim,
                k0,
                kc,
                2 * 6 * 64,
                groups,
                true,
                2L * 6 * 32,
                mPad,
                yLength,
                rowBase,
                mb,
                nDim,
                n0,
                nn);
    }

    @Test
    void aBlockThatFitsPasses() {
        assertDoesNotThrow(() -> block(0, 2, 64, 0, 64, 2, 32, 32 * 12, 0, 32, 12, 0, 12));
        assertDoesNotThrow(() -> block(0, 2, 64, 0, 64, 2, 32, -1, 0, 0, 0, 0, 0));
    }

    @Test
    void overflowingKBlockIsRefused() {
        // k0 + kc wraps negative, below kDim.
        assertThrows(IndexOutOfBoundsException.class, () -> block(0, 2, 64, MAX - 10, 64, 2, 32, -1, 0, 0, 0, 0, 0));
    }

    @Test
    void overflowingTileRowsAreRefused() {
        // tiles * 16 wraps to 0, so any mPad passes it; the xt check alone does not catch it when kDim is 0.
        int tiles = 1 << 28;
        assertThrows(IndexOutOfBoundsException.class, () -> block(0, tiles, 0, 0, 0, 0, 32, -1, 0, 0, 0, 0, 0));
    }

    @Test
    void overflowingYRowsAreRefused() {
        // rowBase + mb wraps negative: (long) of the wrapped sum times nDim is below y's length.
        assertThrows(
                IndexOutOfBoundsException.class, () -> block(0, 2, 64, 0, 64, 2, 32, 32 * 12, MAX - 4, 32, 12, 0, 12));
    }

    @Test
    void overflowingYColumnsAreRefused() {
        // n0 + nn wraps negative, below nDim.
        assertThrows(
                IndexOutOfBoundsException.class, () -> block(0, 2, 64, 0, 64, 2, 32, 32 * 12, 0, 32, 12, MAX - 4, 12));
    }

    @Test
    void fp8ScalesCoverage() {
        assertTrue(NativeCpu.scalesCover(2, 0, 256, 128));
        assertFalse(NativeCpu.scalesCover(2, 8, 256, 128));
        // lead + n + bc - 1 wraps negative: the quotient is negative, so any blocksPerRow would pass.
        assertFalse(NativeCpu.scalesCover(1, 120, MAX - 100, 128));
        assertFalse(NativeCpu.scalesCover(0, 0, MAX, 1 << 30));
    }

    @Test
    void int4ScalesCoverage() {
        // 2 rows of 64 inputs from place 16 of groups of 32: 3 scales a row.
        assertTrue(NativeCpu.int4ScalesFit(6, 0, 3, 2, 16, 64, 32));
        assertTrue(NativeCpu.int4ScalesFit(7, 1, 3, 2, 16, 64, 32));
        assertFalse(NativeCpu.int4ScalesFit(6, 1, 3, 2, 16, 64, 32), "the last row's last scale past the array");
        assertFalse(NativeCpu.int4ScalesFit(6, 0, 2, 2, 16, 64, 32), "rows' scales overlap");
        assertFalse(NativeCpu.int4ScalesFit(6, 0, 3, 2, 32, 64, 32), "lead outside its group");
        assertFalse(NativeCpu.int4ScalesFit(6, 0, 3, 2, -1, 64, 32));
        assertFalse(NativeCpu.int4ScalesFit(6, -1, 3, 2, 0, 64, 32));
        assertFalse(NativeCpu.int4ScalesFit(6, 0, 3, 2, 0, 64, 0), "no group");
        // lead + n + group - 1 wraps negative in int: the quotient would be negative and pass any scalesPerRow.
        assertFalse(NativeCpu.int4ScalesFit(MAX, 0, 1, 1, 120, MAX - 100, 128));
        // scaleOff + (rows - 1) * scalesPerRow wraps negative in int.
        assertFalse(NativeCpu.int4ScalesFit(100, 10, 1 << 30, 3, 0, 1, 1 << 30));
        assertEquals(1, NativeCpu.int4Words(1));
        assertEquals((MAX + 7L) / 8, NativeCpu.int4Words(MAX), "n + 7 does not wrap");
    }

    @Test
    void int4RowsOutOfTheirArraysAreRefused() {
        // Refused before the native call, so these run (and pass) without the library too. 2 rows of 20 inputs (3
        // words) at
        // stride 4 words: 7 words; scales 1 a row in groups of 32.
        int[] src = new int[7];
        float[] scales = new float[2];
        float[] dst = new float[40];
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4Rows(src, 1, 4, 2, 20, scales, 0, 1, 0, 32, dst),
                "src from 1");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4Rows(src, 0, 2, 2, 20, scales, 0, 1, 0, 32, dst),
                "stride under a row's words");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4Rows(src, 0, 4, 2, 20, scales, 1, 1, 0, 32, dst),
                "scales from 1");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4Rows(src, 0, 4, 2, 20, scales, 0, 1, 16, 32, dst),
                "a second group");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4Rows(src, 0, 4, 2, 20, scales, 0, 1, 0, 32, new float[39]),
                "dst");
        // so + (rows - 1) * srcStride wraps negative in int.
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4Rows(src, 5, MAX / 2 + 1, 3, 1, new float[3], 0, 1, 0, 1, dst));
        if (NativeCpu.available()) {
            assertDoesNotThrow(() -> NativeCpu.int4Rows(src, 0, 4, 2, 20, scales, 0, 1, 0, 32, dst));
        }
    }

    @Test
    void int4RowsInPlaceOutOfTheirMappingsAreRefused(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        // A 4 KiB mapping: 2 rows of 64 inputs (8 words) at stride 8 words from byte 0, BF16 scales (2 a row) from byte
        // 64.
        java.nio.file.Path f = dir.resolve("w.bin");
        java.nio.file.Files.write(f, new byte[4096]);
        java.nio.MappedByteBuffer map;
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(f)) {
            map = ch.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, 4096);
        }
        float[] scratch = new float[4];
        float[] dst = new float[128];
        dev.scorch.engine.checkpoint.DType bf16 = dev.scorch.engine.checkpoint.DType.BF16;
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4RowsMapped(map, 4096 - 63, 8, 2, 64, map, 64, bf16, 2, 0, 32, scratch, dst),
                "words past the mapping");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4RowsMapped(map, 0, 8, 2, 64, map, 4096 - 7, bf16, 2, 0, 32, scratch, dst),
                "scales past the mapping");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4RowsMapped(map, 0, 8, 2, 64, map, 64, bf16, 2, 0, 32, new float[3], dst),
                "scratch for 3 scales");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4RowsMapped(map, 0, 8, 2, 64, map, 64, bf16, 1, 0, 32, scratch, dst),
                "rows' scales overlap");
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4RowsMapped(
                        map, 0, 8, 2, 64, map, 64, dev.scorch.engine.checkpoint.DType.I32, 2, 0, 32, scratch, dst),
                "I32 scales");
        // byteOffset + 4 * (rows - 1) * stride wraps in int arithmetic.
        assertThrows(
                IndexOutOfBoundsException.class,
                () -> NativeCpu.int4RowsMapped(map, 0, MAX / 2, 3, 1, map, 64, bf16, 1, 0, 1, scratch, dst));
        if (NativeCpu.available()) {
            assertEquals(0, NativeCpu.int4RowsMapped(map, 0, 8, 2, 64, map, 64, bf16, 2, 0, 32, scratch, dst));
        }
    }

    @Test
    void alignedBufferTooLargeForOneBufferIsRefused() {
        // n * 4 wraps negative in int arithmetic.
        assertThrows(IllegalArgumentException.class, () -> NativeCpu.alignedFloats(1 << 30));
        assertTrue(NativeCpu.alignedFloats(100).capacity() == 400);
    }
}
