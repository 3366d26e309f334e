package dev.scorch.engine.checkpoint;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One safetensors file: an 8-byte little-endian header length, a JSON header, then the data. Every header
 * field is bound-checked before anything is mapped, so a hostile file yields a {@link CheckpointException}
 * naming the file and tensor, never a JVM crash or an unbounded allocation.
 */
public final class SafetensorsFile {
    /** The Hugging Face safetensors library refuses headers over 100 MB; so do we. */
    public static final long MAX_HEADER_BYTES = 100_000_000L;

    /** Trailing text and a key given twice (which entry would count is ambiguous) are refused. */
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private final Path path;
    private final Map<String, TensorInfo> tensors;
    private final Map<String, String> metadata;
    private MappedFile mapped;

    private SafetensorsFile(Path path, Map<String, TensorInfo> tensors, Map<String, String> metadata) {
        this.path = path;
        this.tensors = tensors;
        this.metadata = metadata;
    }

    public static SafetensorsFile open(Path path) {
        if (!Files.isRegularFile(path)) {
            throw new CheckpointException(path + ": safetensors file is missing");
        }
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < 8) {
                throw new CheckpointException(
                        path + ": " + size + " bytes is too short for a safetensors header length");
            }
            ByteBuffer lenBuf = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(ch, lenBuf, 0);
            long headerLen = lenBuf.getLong(0);
            if (headerLen < 2 || headerLen > size - 8) {
                throw new CheckpointException(path + ": header length " + Long.toUnsignedString(headerLen)
                        + " runs past the end of the file (" + size + " bytes)");
            }
            if (headerLen > MAX_HEADER_BYTES) {
                throw new CheckpointException(
                        path + ": header length " + headerLen + " exceeds the " + MAX_HEADER_BYTES + "-byte limit");
            }
            ByteBuffer header = ByteBuffer.allocate((int) headerLen);
            readFully(ch, header, 8);
            long dataStart = 8 + headerLen;
            return parse(path, new String(header.array(), StandardCharsets.UTF_8), dataStart, size - dataStart);
        } catch (IOException e) {
            throw new CheckpointException(path + ": cannot read: " + e.getMessage(), e);
        }
    }

    private static void readFully(FileChannel ch, ByteBuffer buf, long pos) throws IOException {
        while (buf.hasRemaining()) {
            int n = ch.read(buf, pos + buf.position());
            if (n < 0) {
                throw new IOException("unexpected end of file");
            }
        }
    }

    private static SafetensorsFile parse(Path path, String headerText, long dataStart, long dataSize) {
        JsonNode root;
        try {
            root = JSON.readTree(headerText);
        } catch (JsonProcessingException e) {
            // names a key given twice (which entry would count is ambiguous), else where the JSON breaks
            throw new CheckpointException(
                    path + ": header " + dev.scorch.engine.config.JsonErrors.describe(e) + "; refused");
        }
        if (root == null || !root.isObject()) {
            throw new CheckpointException(path + ": header is not a JSON object");
        }
        Map<String, TensorInfo> tensors = new LinkedHashMap<>();
        Map<String, String> metadata = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = root.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            String name = e.getKey();
            JsonNode v = e.getValue();
            if (name.equals("__metadata__")) {
                if (!v.isObject()) {
                    throw new CheckpointException(path + ": __metadata__ is not an object");
                }
                v.fields()
                        .forEachRemaining(
                                m -> metadata.put(m.getKey(), m.getValue().asText()));
                continue;
            }
            tensors.put(name, tensorInfo(path, name, v, dataStart, dataSize));
        }
        checkNoOverlap(path, tensors);
        return new SafetensorsFile(path, Collections.unmodifiableMap(tensors), Collections.unmodifiableMap(metadata));
    }

    private static TensorInfo tensorInfo(Path path, String name, JsonNode v, long dataStart, long dataSize) {
        String where = path + ": tensor '" + name + "'";
        if (!v.isObject()) {
            throw new CheckpointException(where + ": header entry is not an object");
        }
        JsonNode dt = v.get("dtype");
        if (dt == null || !dt.isTextual()) {
            throw new CheckpointException(where + ": missing dtype");
        }
        DType dtype = DType.fromHeader(dt.asText())
                .orElseThrow(() -> new CheckpointException(where + ": unsupported dtype " + dt.asText()));
        JsonNode sh = v.get("shape");
        if (sh == null || !sh.isArray()) {
            throw new CheckpointException(where + ": missing shape");
        }
        long[] shape = new long[sh.size()];
        long numel = 1;
        for (int i = 0; i < shape.length; i++) {
            JsonNode d = sh.get(i);
            if (!d.canConvertToLong() || !d.isIntegralNumber() || d.asLong() < 0) {
                throw new CheckpointException(where + ": bad shape " + sh);
            }
            shape[i] = d.asLong();
            try {
                numel = Math.multiplyExact(numel, shape[i]);
            } catch (ArithmeticException ex) {
                throw new CheckpointException(where + ": shape " + sh + " overflows");
            }
        }
        JsonNode off = v.get("data_offsets");
        if (off == null
                || !off.isArray()
                || off.size() != 2
                || !off.get(0).isIntegralNumber()
                || !off.get(1).isIntegralNumber()
                || !off.get(0).canConvertToLong()
                || !off.get(1).canConvertToLong()) {
            throw new CheckpointException(where + ": data_offsets must be two integers");
        }
        long begin = off.get(0).asLong();
        long end = off.get(1).asLong();
        if (begin < 0 || end < begin || end > dataSize) {
            throw new CheckpointException(where + ": data_offsets [" + begin + ", " + end
                    + "] outside the data section of " + dataSize + " bytes");
        }
        long expected;
        try {
            expected = Math.multiplyExact(numel, dtype.bytes());
        } catch (ArithmeticException ex) {
            throw new CheckpointException(where + ": byte size overflows");
        }
        if (end - begin != expected) {
            throw new CheckpointException(where + ": " + dtype + " " + sh + " needs " + expected
                    + " bytes but data_offsets span " + (end - begin));
        }
        return new TensorInfo(name, dtype, shape, path, dataStart + begin, dataStart + end);
    }

    private static void checkNoOverlap(Path path, Map<String, TensorInfo> tensors) {
        List<TensorInfo> sorted = new ArrayList<>(tensors.values());
        sorted.sort(Comparator.comparingLong(TensorInfo::begin).thenComparingLong(TensorInfo::end));
        // Compare each non-empty tensor with the previous non-empty one: an empty tensor between them must not hide an
        // overlap.
        TensorInfo a = null;
        for (TensorInfo b : sorted) {
            if (b.byteSize() == 0) {
                continue;
            }
            if (a != null && b.begin() < a.end()) {
                throw new CheckpointException(
                        path + ": tensors '" + a.name() + "' and '" + b.name() + "' overlap in the data section");
            }
            a = b;
        }
    }

    public Path path() {
        return path;
    }

    public Map<String, TensorInfo> tensors() {
        return tensors;
    }

    public Map<String, String> metadata() {
        return metadata;
    }

    /** Maps the file on first use; headers can be checked without mapping anything. */
    public synchronized MappedFile mapped() {
        if (mapped == null) {
            mapped = MappedFile.map(path);
        }
        return mapped;
    }

    /** The mapping where the file has been mapped, else null. */
    public synchronized MappedFile mappedOrNull() {
        return mapped;
    }

    public Tensor tensor(String name) {
        TensorInfo info = tensors.get(name);
        if (info == null) {
            throw new CheckpointException(path + ": no tensor '" + name + "'");
        }
        return new Tensor(info, mapped());
    }
}
