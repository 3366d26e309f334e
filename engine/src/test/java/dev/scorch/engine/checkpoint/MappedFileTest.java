package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Chunked mapping: slices across chunk borders on a tiny chunk size, and a real file past the 2 GiB mark. */
class MappedFileTest {
    @TempDir
    Path tmp;

    private static byte pattern(long i) {
        return (byte) (i * 7 + 3 + (i >> 8));
    }

    private Path patternFile(int size) throws Exception {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = pattern(i);
        }
        Path f = tmp.resolve("pattern.bin");
        Files.write(f, b);
        return f;
    }

    @Test
    void everySliceUpToTheOverlapIsExactAcrossChunkBorders() throws Exception {
        int size = 300; // chunks start at 0, 64, 128, 192, 256; the last one is partial
        MappedFile m = MappedFile.map(patternFile(size), 64, 16);
        assertEquals(size, m.size());
        assertEquals(16, m.maxSlice());
        for (long off = 0; off < size; off++) {
            for (int len = 0; len <= 16 && off + len <= size; len++) {
                ByteBuffer s = m.slice(off, len);
                assertEquals(len, s.remaining(), "slice(" + off + ", " + len + ")");
                for (int k = 0; k < len; k++) {
                    assertEquals(pattern(off + k), s.get(k), "slice(" + off + ", " + len + ")[" + k + "]");
                }
            }
        }
    }

    @Test
    void slicesAreLittleEndianAtBorders() throws Exception {
        MappedFile m = MappedFile.map(patternFile(300), 64, 16);
        for (long off : new long[] {60, 61, 62, 63, 64, 124, 127, 252, 255, 292}) {
            ByteBuffer s = m.slice(off, 8);
            long want = 0;
            for (int k = 7; k >= 0; k--) {
                want = (want << 8) | (pattern(off + k) & 0xFF);
            }
            assertEquals(want, s.getLong(0), "offset " + off);
            assertEquals(ByteOrder.LITTLE_ENDIAN, s.order());
        }
    }

    /** The allocation-free bulk reads give what a slice gives, at chunk borders; unaligned 16/32-bit reads decline. */
    @Test
    void bulkReadsMatchSlices() throws Exception {
        MappedFile m = MappedFile.map(patternFile(300), 64, 16);
        for (long off : new long[] {0, 60, 62, 64, 124, 126, 128, 252, 284}) {
            byte[] bytes = new byte[8];
            m.getBytes(off, bytes, 0, 8);
            short[] shorts = new short[4];
            assertTrue(m.getShorts(off, shorts, 0, 4), "even offset " + off);
            ByteBuffer s = m.slice(off, 8);
            for (int k = 0; k < 8; k++) {
                assertEquals(s.get(k), bytes[k], "byte " + k + " at " + off);
            }
            for (int k = 0; k < 4; k++) {
                assertEquals(s.getShort(2 * k), shorts[k], "short " + k + " at " + off);
            }
            float[] floats = new float[3];
            if (off % 4 == 0) {
                assertTrue(m.getFloats(off, floats, 1, 2));
                assertEquals(Float.floatToRawIntBits(s.getFloat(0)), Float.floatToRawIntBits(floats[1]));
                assertEquals(Float.floatToRawIntBits(s.getFloat(4)), Float.floatToRawIntBits(floats[2]));
            } else {
                assertFalse(m.getFloats(off, floats, 0, 2), "offset " + off + " is not 4-aligned");
            }
        }
        assertFalse(m.getShorts(61, new short[2], 0, 2), "odd offsets go through slices");
        assertThrows(IndexOutOfBoundsException.class, () -> m.getBytes(296, new byte[8], 0, 8));
    }

    @Test
    void longSlicesAndBadRanges() throws Exception {
        MappedFile m = MappedFile.map(patternFile(300), 64, 16);
        // Longer than the overlap but inside one chunk's mapping: fine.
        assertEquals(80, m.slice(64, 80).remaining());
        // Longer than the overlap and crossing the end of a chunk's mapping: refused, naming the file.
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> m.slice(60, 30));
        assertEquals(true, e.getMessage().contains(m.path().toString()));
        assertThrows(IndexOutOfBoundsException.class, () -> m.slice(295, 6));
        assertThrows(IndexOutOfBoundsException.class, () -> m.slice(-1, 2));
        assertThrows(IndexOutOfBoundsException.class, () -> m.slice(0, -1));
        assertThrows(IllegalArgumentException.class, () -> MappedFile.map(m.path(), Integer.MAX_VALUE, 16));
        assertThrows(IllegalArgumentException.class, () -> MappedFile.map(m.path(), 0, 16));
    }

    @Test
    void exactMultipleOfChunkAndEmptyFile() throws Exception {
        MappedFile m = MappedFile.map(patternFile(128), 64, 16);
        assertEquals(pattern(127), m.slice(127, 1).get(0));
        assertEquals(pattern(112), m.slice(112, 16).get(0));
        Path empty = tmp.resolve("empty.bin");
        Files.write(empty, new byte[0]);
        MappedFile e = MappedFile.map(empty, 64, 16);
        assertEquals(0, e.size());
        assertEquals(0, e.slice(0, 0).remaining());
    }

    @Test
    void tensorDecodesAcrossChunkBordersOfASmallMapping() throws Exception {
        // 40 F32 values and 30 BF16 values: both tensors straddle several 64-byte chunk borders.
        float[] a = new float[40];
        float[] b = new float[30];
        for (int i = 0; i < a.length; i++) {
            a[i] = i * 1.25f - 7;
        }
        for (int i = 0; i < b.length; i++) {
            b[i] = -i * 0.5f;
        }
        Path f = tmp.resolve("t.safetensors");
        new SafetensorsWriter()
                .addFloats("a", DType.F32, new long[] {40}, a)
                .addFloats("b", DType.BF16, new long[] {5, 6}, b)
                .write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        MappedFile small = MappedFile.map(f, 64, 16);
        assertArrayEquals(a, new Tensor(sf.tensors().get("a"), small).toFloatArray());
        assertArrayEquals(b, new Tensor(sf.tensors().get("b"), small).toFloatArray());
        float[] part = new float[13];
        new Tensor(sf.tensors().get("a"), small).toFloat(11, part, 0, 13);
        for (int i = 0; i < 13; i++) {
            assertEquals(a[11 + i], part[i]);
        }
    }

    @Test
    void sparseFilePastTwoGiB() throws Exception {
        long size = (1L << 31) + (200L << 20); // 2.2 GiB, sparse
        Assumptions.assumeTrue(
                Files.getFileStore(tmp).getUsableSpace() > size + (64L << 20), "not enough space for a 2.2 GiB file");
        // Tensor 'border' straddles the 2 GiB mark (a default 1 GiB chunk border too); 'far' lies wholly past it.
        long dataStartGuess = 256; // header is padded to exactly this
        long borderBegin = (1L << 31) - dataStartGuess - 8;
        long farBegin = (1L << 31) + (100L << 20);
        String header = "{\"border\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[" + borderBegin + ","
                + (borderBegin + 16) + "]}," + "\"far\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":["
                + farBegin + "," + (farBegin + 12) + "]}}";
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        byte[] padded = new byte[(int) dataStartGuess - 8];
        java.util.Arrays.fill(padded, (byte) ' ');
        System.arraycopy(h, 0, padded, 0, h.length);

        Path f = tmp.resolve("big.safetensors");
        try {
            try (RandomAccessFile r = new RandomAccessFile(f.toFile(), "rw")) {
                r.setLength(size);
                r.write(ByteBuffer.allocate(8)
                        .order(ByteOrder.LITTLE_ENDIAN)
                        .putLong(padded.length)
                        .array());
                r.write(padded);
                r.seek(dataStartGuess + borderBegin);
                r.write(SafetensorsWriter.encode(DType.F32, new float[] {1.5f, -2f, 3.25f, 1e-3f}));
                r.seek(dataStartGuess + farBegin);
                r.write(SafetensorsWriter.encode(DType.BF16, new float[] {1, 2, 3, -4, 0.5f, 65536}));
            }
            SafetensorsFile sf = SafetensorsFile.open(f);
            TensorInfo border = sf.tensors().get("border");
            assertEquals((1L << 31) - 8, border.begin());
            assertArrayEquals(
                    new float[] {1.5f, -2f, 3.25f, 1e-3f}, sf.tensor("border").toFloatArray());
            Tensor far = sf.tensor("far");
            assertEquals(dataStartGuess + farBegin, far.info().begin());
            assertArrayEquals(new long[] {2, 3}, far.shape());
            assertArrayEquals(new float[] {1, 2, 3, -4, 0.5f, 65536}, far.toFloatArray());
            assertEquals(-4f, far.getFloat(3));
            assertEquals(size, sf.mapped().size());
        } finally {
            Files.deleteIfExists(f);
        }
    }
}
