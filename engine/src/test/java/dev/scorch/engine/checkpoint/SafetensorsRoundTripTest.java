package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** SafetensorsWriter -> SafetensorsFile for every dtype: bytes, values, shapes and metadata come back exactly. */
class SafetensorsRoundTripTest {
    @TempDir
    Path tmp;

    private static byte[] le(int n, java.util.function.Consumer<ByteBuffer> fill) {
        ByteBuffer b = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
        fill.accept(b);
        return b.array();
    }

    @Test
    void everyDtypeRoundTrips() throws Exception {
        float[] f32 = {
            0f,
            -0f,
            1f,
            -1.5f,
            3.1415927f,
            Float.MIN_VALUE,
            Float.MAX_VALUE,
            -1e-30f,
            123456.78f,
            Float.NEGATIVE_INFINITY,
            0.1f,
            2f / 3
        };
        // Exactly representable in BF16 (8 significant bits).
        float[] bf16 = {0f, 1f, -2f, 3.140625f, 0x1p-100f, -65280f, 0.5f, 1.0078125f};
        // Exactly representable in E4M3.
        float[] fp8 = {0f, 448f, -448f, 0x1p-9f, -7 * 0x1p-9f, 0x1p-6f, 1.125f, -240f, 3.5f, 0.0703125f};
        // F16 is written as raw bytes; these bit patterns and their values are known.
        short[] f16Bits = {0x3C00, (short) 0xC000, 0x7BFF, 0x0001, 0x0400, (short) 0x8000, 0x3555, 0x7C00};
        float[] f16Values = {1f, -2f, 65504f, 0x1p-24f, 0x1p-14f, -0f, 0.333251953125f, Float.POSITIVE_INFINITY};
        int[] i32 = {0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 163840};
        long[] i64 = {0, -1, Long.MAX_VALUE, Long.MIN_VALUE, 1L << 40, 7};

        SafetensorsWriter w = new SafetensorsWriter(Map.of("format", "pt", "producer", "scorch-test"));
        w.addFloats("f32", DType.F32, new long[] {3, 4}, f32);
        w.addFloats("bf16", DType.BF16, new long[] {2, 2, 2}, bf16);
        w.addFloats("fp8", DType.F8_E4M3, new long[] {10}, fp8);
        w.add("f16", DType.F16, new long[] {2, 4}, le(16, b -> {
            for (short s : f16Bits) {
                b.putShort(s);
            }
        }));
        w.add("i32", DType.I32, new long[] {6, 1}, le(24, b -> {
            for (int v : i32) {
                b.putInt(v);
            }
        }));
        w.add("i64", DType.I64, new long[] {3, 2}, le(48, b -> {
            for (long v : i64) {
                b.putLong(v);
            }
        }));
        w.add("scalar", DType.F32, new long[] {}, le(4, b -> b.putFloat(42.5f)));
        w.add("empty", DType.BF16, new long[] {0, 5}, new byte[0]);
        Path file = tmp.resolve("all.safetensors");
        w.write(file);

        SafetensorsFile sf = SafetensorsFile.open(file);
        assertEquals(
                List.of("f32", "bf16", "fp8", "f16", "i32", "i64", "scalar", "empty"),
                List.copyOf(sf.tensors().keySet()));
        assertEquals(Map.of("format", "pt", "producer", "scorch-test"), sf.metadata());

        Tensor t = sf.tensor("f32");
        assertEquals(DType.F32, t.dtype());
        assertArrayEquals(new long[] {3, 4}, t.shape());
        assertArrayEquals(f32, t.toFloatArray());
        assertEquals(f32[4], t.getFloat(4));

        t = sf.tensor("bf16");
        assertArrayEquals(new long[] {2, 2, 2}, t.shape());
        assertEquals(DType.BF16, t.dtype());
        assertArrayEquals(bf16, t.toFloatArray());

        t = sf.tensor("fp8");
        assertEquals(DType.F8_E4M3, t.dtype());
        assertArrayEquals(fp8, t.toFloatArray());
        assertEquals(10, t.info().byteSize());

        t = sf.tensor("f16");
        assertEquals(DType.F16, t.dtype());
        assertArrayEquals(new long[] {2, 4}, t.shape());
        float[] gotF16 = t.toFloatArray();
        for (int i = 0; i < f16Values.length; i++) {
            assertEquals(Float.floatToRawIntBits(f16Values[i]), Float.floatToRawIntBits(gotF16[i]), "f16[" + i + "]");
        }

        t = sf.tensor("i32");
        assertArrayEquals(new long[] {6, 1}, t.shape());
        ByteBuffer raw = t.bytes(0, 24);
        for (int i = 0; i < i32.length; i++) {
            assertEquals(i32[i], raw.getInt(4 * i));
        }
        assertEquals(163840f, t.getFloat(5));
        assertEquals(-1f, t.getFloat(2));

        t = sf.tensor("i64");
        raw = t.bytes(0, 48);
        for (int i = 0; i < i64.length; i++) {
            assertEquals(i64[i], raw.getLong(8 * i));
        }
        assertEquals(0x1p40f, t.getFloat(4));
        assertEquals(7f, t.getFloat(5));

        t = sf.tensor("scalar");
        assertEquals(0, t.shape().length);
        assertEquals(1, t.numel());
        assertEquals(42.5f, t.getFloat(0));

        t = sf.tensor("empty");
        assertEquals(0, t.numel());
        assertEquals(0, t.toFloatArray().length);
    }

    @Test
    void bf16EncodingRoundsAndDecodingIsExact() throws Exception {
        float[] in = {1f + 0x1p-8f, 1f + 3 * 0x1p-8f, 0.1f};
        Path file = tmp.resolve("r.safetensors");
        new SafetensorsWriter().addFloats("x", DType.BF16, new long[] {3}, in).write(file);
        float[] out = SafetensorsFile.open(file).tensor("x").toFloatArray();
        for (int i = 0; i < in.length; i++) {
            assertEquals(NumberFormats.bf16ToFloat(NumberFormats.floatToBf16(in[i])), out[i]);
        }
        assertEquals(1f, out[0]);
        assertEquals(1f + 0x1p-6f, out[1]);
    }

    @Test
    void headerIsEightByteAlignedAndSpacePadded() throws Exception {
        // Names of several lengths so that at least some unpadded headers are not multiples of 8.
        for (int extra = 0; extra < 8; extra++) {
            Path file = tmp.resolve("a" + extra + ".safetensors");
            new SafetensorsWriter()
                    .addFloats("t" + "x".repeat(extra), DType.F32, new long[] {2}, new float[] {1f, 2f})
                    .write(file);
            byte[] all = Files.readAllBytes(file);
            long headerLen =
                    ByteBuffer.wrap(all, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
            assertEquals(0, headerLen % 8, "header length " + headerLen);
            assertEquals(8 + headerLen + 8, all.length);
            // Padding is spaces; the JSON itself ends with '}'.
            int last = (int) (8 + headerLen - 1);
            while (all[last] == ' ') {
                last--;
            }
            assertEquals('}', all[last]);
            TensorInfo info =
                    SafetensorsFile.open(file).tensors().values().iterator().next();
            assertEquals(8 + headerLen, info.begin());
            assertEquals(0, info.begin() % 8);
        }
    }

    @Test
    void dataOffsetsFollowInsertionOrder() throws Exception {
        Path file = tmp.resolve("o.safetensors");
        new SafetensorsWriter()
                .addFloats("b", DType.BF16, new long[] {3}, new float[] {1, 2, 3})
                .addFloats("a", DType.F32, new long[] {2}, new float[] {4, 5})
                .write(file);
        SafetensorsFile sf = SafetensorsFile.open(file);
        TensorInfo b = sf.tensors().get("b");
        TensorInfo a = sf.tensors().get("a");
        assertEquals(6, b.byteSize());
        assertEquals(b.end(), a.begin());
        assertEquals(8, a.byteSize());
        assertEquals(Files.size(file), a.end());
        assertTrue(sf.metadata().containsKey("format"));
        assertArrayEquals(new float[] {4, 5}, sf.tensor("a").toFloatArray());
    }

    @Test
    void writerRefusesWrongByteCount() {
        SafetensorsWriter w = new SafetensorsWriter();
        assertThrows(IllegalArgumentException.class, () -> w.add("x", DType.F32, new long[] {2, 2}, new byte[15]));
        assertThrows(
                IllegalArgumentException.class, () -> w.addFloats("y", DType.F16, new long[] {1}, new float[] {1f}));
    }

    @Test
    void emptyMetadataWritesNoMetadataBlock() throws Exception {
        Path file = tmp.resolve("m.safetensors");
        new SafetensorsWriter(Map.of())
                .addFloats("x", DType.F32, new long[] {1}, new float[] {1f})
                .write(file);
        byte[] all = Files.readAllBytes(file);
        String header = new String(all, 8, all.length - 12, java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(!header.contains("__metadata__"), header);
        assertTrue(SafetensorsFile.open(file).metadata().isEmpty());
    }

    /** A streamed tensor is written when the file is, between the held ones, with the offsets of its declared size. */
    @Test
    void streamedTensorsRoundTripAndAWrongLengthFailsTheWrite() throws Exception {
        float[] held = {1f, -2f};
        float[] streamed = {0.5f, 3f, -0.25f, 8f, 1f, 2f};
        SafetensorsWriter w = new SafetensorsWriter();
        w.addFloats("a", DType.BF16, new long[] {2}, held);
        w.addStreamed("b", DType.BF16, new long[] {2, 3}, out -> {
            out.write(SafetensorsWriter.encode(DType.BF16, java.util.Arrays.copyOf(streamed, 4)));
            out.write(SafetensorsWriter.encode(DType.BF16, java.util.Arrays.copyOfRange(streamed, 4, 6)));
        });
        w.addFloats("c", DType.F32, new long[] {1}, new float[] {7f});
        assertEquals(4 + 12 + 4, w.dataBytes());
        Path file = tmp.resolve("streamed.safetensors");
        w.write(file);
        SafetensorsFile sf = SafetensorsFile.open(file);
        assertArrayEquals(held, sf.tensor("a").toFloatArray());
        assertArrayEquals(streamed, sf.tensor("b").toFloatArray());
        assertArrayEquals(new long[] {2, 3}, sf.tensor("b").shape());
        assertArrayEquals(new float[] {7f}, sf.tensor("c").toFloatArray());

        SafetensorsWriter shortOne = new SafetensorsWriter();
        shortOne.addStreamed("b", DType.BF16, new long[] {2, 3}, out -> out.write(new byte[10]));
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> shortOne.write(tmp.resolve("short.safetensors")));
        assertTrue(
                e.getMessage().contains("b: wrote 10 bytes") && e.getMessage().contains("takes 12"), e.getMessage());
    }
}
