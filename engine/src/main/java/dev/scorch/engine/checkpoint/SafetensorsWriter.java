package dev.scorch.engine.checkpoint;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedOutputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Writes one safetensors file: tensors in the order added, header padded with spaces to 8-byte alignment. A tensor's
 * bytes are held from {@link #add} until {@link #write}, or, for {@link #addStreamed}, made while the file is written
 * (tensors over a Java array's 2 GiB, such as Kimi K2's 163,840 × 7,168 BF16 embedding).
 */
public final class SafetensorsWriter {
    /** A tensor's bytes, written when the file is. */
    @FunctionalInterface
    public interface Bytes {
        void writeTo(OutputStream out) throws IOException;
    }

    private record Entry(String name, DType dtype, long[] shape, long length, Bytes data) {}

    private final List<Entry> entries = new ArrayList<>();
    private final Map<String, String> metadata;

    public SafetensorsWriter(Map<String, String> metadata) {
        this.metadata = metadata;
    }

    public SafetensorsWriter() {
        this(Map.of("format", "pt"));
    }

    /** Adds a tensor whose little-endian bytes are already encoded in {@code dtype}. */
    public SafetensorsWriter add(String name, DType dtype, long[] shape, byte[] data) {
        long numel = TensorInfo.numel(shape);
        if (numel * dtype.bytes() != data.length) {
            throw new IllegalArgumentException(
                    name + ": " + data.length + " bytes for " + dtype + " of " + numel + " elements");
        }
        entries.add(new Entry(name, dtype, shape.clone(), data.length, out -> out.write(data)));
        return this;
    }

    /**
     * Adds a tensor whose little-endian bytes in {@code dtype} source writes when the file is written: exactly
     * numel × dtype bytes, or the write fails.
     */
    public SafetensorsWriter addStreamed(String name, DType dtype, long[] shape, Bytes source) {
        entries.add(new Entry(name, dtype, shape.clone(), TensorInfo.numel(shape) * dtype.bytes(), source));
        return this;
    }

    /** Adds fp32 values encoded as {@code dtype} (F32, F16 is not written, BF16, F8_E4M3). */
    public SafetensorsWriter addFloats(String name, DType dtype, long[] shape, float[] values) {
        return add(name, dtype, shape, encode(dtype, values));
    }

    public static byte[] encode(DType dtype, float[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * dtype.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            switch (dtype) {
                case F32 -> b.putFloat(v);
                case BF16 -> b.putShort(NumberFormats.floatToBf16(v));
                case F8_E4M3 -> b.put(NumberFormats.floatToE4m3(v));
                default -> throw new IllegalArgumentException("cannot encode floats as " + dtype);
            }
        }
        return b.array();
    }

    public long dataBytes() {
        long n = 0;
        for (Entry e : entries) {
            n += e.length;
        }
        return n;
    }

    public List<String> names() {
        return entries.stream().map(Entry::name).toList();
    }

    public void write(Path file) throws IOException {
        ObjectMapper json = new ObjectMapper();
        ObjectNode header = json.createObjectNode();
        if (!metadata.isEmpty()) {
            ObjectNode meta = header.putObject("__metadata__");
            metadata.forEach(meta::put);
        }
        long offset = 0;
        for (Entry e : entries) {
            ObjectNode t = header.putObject(e.name);
            t.put("dtype", e.dtype.headerName());
            ArrayNode shape = t.putArray("shape");
            for (long d : e.shape) {
                shape.add(d);
            }
            ArrayNode offs = t.putArray("data_offsets");
            offs.add(offset);
            offs.add(offset + e.length);
            offset += e.length;
        }
        byte[] h = json.writeValueAsString(header).getBytes(StandardCharsets.UTF_8);
        int padded = (h.length + 7) / 8 * 8;
        byte[] headerBytes = new byte[padded];
        System.arraycopy(h, 0, headerBytes, 0, h.length);
        for (int i = h.length; i < padded; i++) {
            headerBytes[i] = ' ';
        }
        try (CountingStream out = new CountingStream(new BufferedOutputStream(Files.newOutputStream(file), 1 << 20))) {
            out.write(ByteBuffer.allocate(8)
                    .order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(padded)
                    .array());
            out.write(headerBytes);
            for (Entry e : entries) {
                long before = out.count;
                e.data.writeTo(out);
                if (out.count - before != e.length) {
                    throw new IllegalStateException(e.name + ": wrote " + (out.count - before) + " bytes, its "
                            + e.dtype + " " + java.util.Arrays.toString(e.shape) + " takes " + e.length);
                }
            }
        }
    }

    /** Counts the bytes written through it. */
    private static final class CountingStream extends FilterOutputStream {
        long count;

        CountingStream(OutputStream out) {
            super(out);
        }

        @Override
        public void write(int b) throws IOException {
            out.write(b);
            count++;
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
            count += len;
        }
    }
}
