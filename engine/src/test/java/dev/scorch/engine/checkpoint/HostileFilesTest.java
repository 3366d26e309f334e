package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/**
 * Malformed and malicious safetensors files and model folders: each must fail with a CheckpointException whose
 * message names the file (and the tensor where there is one), never with an OOM, a JVM crash or a stray exception.
 */
class HostileFilesTest {
    @TempDir
    Path tmp;

    /** A safetensors file with the given header text (padded to 8 bytes) followed by {@code dataLen} zero bytes. */
    static Path raw(Path file, String header, int dataLen) throws Exception {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        int padded = (h.length + 7) / 8 * 8;
        ByteBuffer b = ByteBuffer.allocate(8 + padded + dataLen).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(padded).put(h);
        for (int i = h.length; i < padded; i++) {
            b.put((byte) ' ');
        }
        Files.write(file, b.array());
        return file;
    }

    /** A file whose first 8 bytes claim {@code headerLen}, followed by {@code rest}. */
    private Path withHeaderLength(String name, long headerLen, byte[] rest) throws Exception {
        ByteBuffer b = ByteBuffer.allocate(8 + rest.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(headerLen).put(rest);
        Path file = tmp.resolve(name);
        Files.write(file, b.array());
        return file;
    }

    private static CheckpointException fails(Executable open, String... mustName) {
        CheckpointException e = assertThrows(CheckpointException.class, open);
        for (String s : mustName) {
            assertTrue(e.getMessage().contains(s), () -> "message should name '" + s + "': " + e.getMessage());
        }
        return e;
    }

    private CheckpointException openFails(Path file, String... mustName) {
        String[] all = new String[mustName.length + 1];
        all[0] = file.toString();
        System.arraycopy(mustName, 0, all, 1, mustName.length);
        return fails(() -> SafetensorsFile.open(file), all);
    }

    // ---- single-file structure ----

    @Test
    void headerLengthPastEndOfFile() throws Exception {
        Path f = withHeaderLength("past.safetensors", 1000, "{\"a\":1}".getBytes(StandardCharsets.UTF_8));
        openFails(f, "1000");
    }

    @Test
    void fileShorterThanEightBytes() throws Exception {
        Path f = tmp.resolve("short.safetensors");
        Files.write(f, new byte[] {1, 2, 3, 4, 5});
        openFails(f);
        Path empty = tmp.resolve("empty.safetensors");
        Files.write(empty, new byte[0]);
        openFails(empty);
    }

    @Test
    void hugeHeaderLengthIsACleanError() throws Exception {
        byte[] rest = "{}      ".getBytes(StandardCharsets.UTF_8);
        openFails(withHeaderLength("huge1.safetensors", 0x7FFF_FFFF_FFFF_FFF8L, rest));
        openFails(withHeaderLength("huge2.safetensors", Long.MAX_VALUE, rest));
        openFails(withHeaderLength("huge3.safetensors", 1L << 62, rest));
        // Negative as a signed long: a parser that trusts it would allocate or seek nonsense.
        openFails(withHeaderLength("huge4.safetensors", -1L, rest), "18446744073709551615");
        openFails(withHeaderLength("huge5.safetensors", 0, rest));
    }

    @Test
    void headerOverTheSizeLimitIsRefusedWithoutReadingIt() throws Exception {
        // Sparse: the file is big enough for the claimed header, which is over the 100 MB limit.
        Path f = tmp.resolve("bigheader.safetensors");
        try (RandomAccessFile r = new RandomAccessFile(f.toFile(), "rw")) {
            r.setLength(SafetensorsFile.MAX_HEADER_BYTES + 64);
            r.write(ByteBuffer.allocate(8)
                    .order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(SafetensorsFile.MAX_HEADER_BYTES + 8)
                    .array());
        }
        openFails(f, "limit");
    }

    @Test
    void headerIsNotJson() throws Exception {
        openFails(raw(tmp.resolve("nojson.safetensors"), "this is not json {", 0), "JSON");
        // A valid object followed by more text is not a header either (trailing spaces are padding and fine).
        openFails(raw(tmp.resolve("trailing.safetensors"), "{} garbage", 0), "JSON");
    }

    /** The driver's check: a checkpoint file linked out of the folder is refused by name, its content unread. */
    @Test
    void fileLinkedOutOfTheModelFolderIsRefused() throws Exception {
        Path model = tmp.resolve("linked-model");
        new dev.scorch.engine.demo.DemoModelWriter(dev.scorch.engine.demo.DemoPreset.TINY, false, true, 3).write(model);
        Path secret = Files.writeString(tmp.resolve("passwd"), "rootsecret:x:0:0:root:/root:/bin/bash\n");
        for (String name : new String[] {"tokenizer_config.json", "config.json"}) {
            Path f = model.resolve(name);
            Path kept = Files.move(f, tmp.resolve(name + ".kept"));
            Files.createSymbolicLink(f, secret);
            CheckpointException e = fails(() -> dev.scorch.engine.model.ModelInfo.of(model), f.toString(), "outside");
            assertTrue(!e.getMessage().contains("rootsecret"), e.getMessage());
            fails(() -> ModelManifest.of(model), f.toString(), "outside");
            Files.delete(f);
            Files.move(kept, f);
        }
        dev.scorch.engine.model.ModelInfo.of(model).validation().orThrow();
    }

    @Test
    void duplicateKeyIsRefusedAsAmbiguous() throws Exception {
        String t = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
        String u = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}";
        openFails(
                raw(tmp.resolve("dup.safetensors"), "{\"a.weight\":" + t + ",\"a.weight\":" + u + "}", 8),
                "a.weight",
                "twice");
        openFails(
                raw(
                        tmp.resolve("dupmeta.safetensors"),
                        "{\"__metadata__\":{\"format\":\"pt\",\"format\":\"np\"},\"a.weight\":" + t + "}",
                        4),
                "format",
                "twice");
    }

    @Test
    void headerIsAJsonArray() throws Exception {
        openFails(raw(tmp.resolve("array.safetensors"), "[1, 2, 3]", 0), "object");
        openFails(raw(tmp.resolve("string.safetensors"), "\"x\"", 0), "object");
    }

    @Test
    void overlappingDataOffsets() throws Exception {
        Path f = raw(
                tmp.resolve("overlap.safetensors"),
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        + "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                12);
        openFails(f, "'a'", "'b'", "overlap");
    }

    @Test
    void overlapHiddenBehindAnEmptyTensor() throws Exception {
        // Sorted by start: a [0,16), e [4,4) (empty), c [8,16): c overlaps a although its neighbour e is empty.
        Path f = raw(
                tmp.resolve("overlap2.safetensors"),
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                        + "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                        + "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                16);
        openFails(f, "'a'", "'c'", "overlap");
    }

    @Test
    void dataOffsetsOutOfRange() throws Exception {
        openFails(
                raw(
                        tmp.resolve("range1.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                        8),
                "'t'",
                "data_offsets");
        openFails(
                raw(
                        tmp.resolve("range2.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}",
                        8),
                "'t'");
        openFails(
                raw(
                        tmp.resolve("range3.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}",
                        8),
                "'t'");
        openFails(
                raw(
                        tmp.resolve("range4.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775800,9223372036854775804]}}",
                        8),
                "'t'");
        openFails(
                raw(
                        tmp.resolve("range5.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999999]}}",
                        8),
                "'t'");
        openFails(
                raw(
                        tmp.resolve("range6.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}",
                        8),
                "'t'");
        openFails(
                raw(tmp.resolve("range7.safetensors"), "{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 8),
                "'t'",
                "data_offsets");
    }

    @Test
    void dtypeShapeByteSizeMismatch() throws Exception {
        openFails(
                raw(
                        tmp.resolve("size1.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                        8),
                "'t'",
                "12");
        openFails(
                raw(
                        tmp.resolve("size2.safetensors"),
                        "{\"t\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
                        16),
                "'t'");
    }

    @Test
    void unknownDtype() throws Exception {
        openFails(
                raw(
                        tmp.resolve("dtype1.safetensors"),
                        "{\"t\":{\"dtype\":\"F8_E5M2\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                        4),
                "'t'",
                "F8_E5M2");
        openFails(
                raw(tmp.resolve("dtype2.safetensors"), "{\"t\":{\"dtype\":7,\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
                "'t'",
                "dtype");
        openFails(
                raw(tmp.resolve("dtype3.safetensors"), "{\"t\":{\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
                "'t'",
                "dtype");
    }

    @Test
    void negativeOrBrokenShape() throws Exception {
        openFails(
                raw(
                        tmp.resolve("shape1.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[-1,4],\"data_offsets\":[0,16]}}",
                        16),
                "'t'",
                "shape");
        openFails(
                raw(
                        tmp.resolve("shape2.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
                        4),
                "'t'",
                "shape");
        openFails(
                raw(
                        tmp.resolve("shape3.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,4]}}",
                        4),
                "'t'");
        // numel fits in a long but numel * 4 bytes does not.
        openFails(
                raw(
                        tmp.resolve("shape4.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}",
                        4),
                "'t'");
        openFails(
                raw(
                        tmp.resolve("shape5.safetensors"),
                        "{\"t\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}",
                        16),
                "'t'",
                "shape");
    }

    @Test
    void badEntriesAndMetadata() throws Exception {
        openFails(raw(tmp.resolve("entry.safetensors"), "{\"t\": 5}", 0), "'t'");
        openFails(raw(tmp.resolve("meta.safetensors"), "{\"__metadata__\": [1]}", 0), "__metadata__");
    }

    @Test
    void missingFileAndUnknownTensor() throws Exception {
        Path missing = tmp.resolve("missing.safetensors");
        openFails(missing, "missing");
        Path ok = raw(
                tmp.resolve("ok.safetensors"), "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
        SafetensorsFile sf = SafetensorsFile.open(ok);
        fails(() -> sf.tensor("nope"), ok.toString(), "'nope'");
    }

    @Test
    void tensorReadsAreBoundsChecked() throws Exception {
        Path ok = raw(
                tmp.resolve("ok.safetensors"), "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
        Tensor t = SafetensorsFile.open(ok).tensor("t");
        assertThrows(IndexOutOfBoundsException.class, () -> t.getFloat(2));
        assertThrows(IndexOutOfBoundsException.class, () -> t.toFloat(-1, new float[1], 0, 1));
        assertThrows(IndexOutOfBoundsException.class, () -> t.bytes(4, 8));
        assertEquals(0f, t.getFloat(1));
    }

    // ---- model folders ----

    private Path goodShard(Path dir, String name, String... tensors) throws Exception {
        SafetensorsWriter w = new SafetensorsWriter();
        for (String t : tensors) {
            w.addFloats(t, DType.F32, new long[] {2}, new float[] {1, 2});
        }
        Path f = dir.resolve(name);
        w.write(f);
        return f;
    }

    private Path modelDir(String index) throws Exception {
        Path dir = Files.createDirectories(tmp.resolve("model"));
        goodShard(dir, "model-00001-of-00001.safetensors", "a", "b");
        Files.writeString(dir.resolve(Checkpoint.INDEX), index);
        return dir;
    }

    @Test
    void validIndexOpens() throws Exception {
        Path dir = modelDir("{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00001.safetensors\","
                + "\"b\":\"model-00001-of-00001.safetensors\"}}");
        Checkpoint c = Checkpoint.open(dir);
        assertTrue(c.has("a") && c.has("b"));
        assertEquals(1, c.shards().size());
        assertEquals(2f, c.tensor("b").getFloat(1));
    }

    @Test
    void shardNamedInIndexIsMissing() throws Exception {
        Path dir = modelDir(
                "{\"weight_map\":{\"a\":\"model-00001-of-00001.safetensors\",\"c\":\"model-00002-of-00002.safetensors\"}}");
        fails(() -> Checkpoint.open(dir), Checkpoint.INDEX, "model-00002-of-00002.safetensors", "'c'", "missing");
    }

    @Test
    void indexEntryOutsideTheModelFolder() throws Exception {
        // The target files exist and are valid, so only the path check can refuse them.
        goodShard(tmp, "evil.safetensors", "a");
        Path dir = modelDir("{\"weight_map\":{\"a\":\"../evil.safetensors\"}}");
        fails(() -> Checkpoint.open(dir), Checkpoint.INDEX, "../evil.safetensors", "'a'", "outside");

        Path abs = goodShard(Files.createDirectories(tmp.resolve("elsewhere")), "abs.safetensors", "a")
                .toAbsolutePath();
        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"weight_map\":{\"a\":\"" + abs + "\"}}");
        fails(() -> Checkpoint.open(dir), Checkpoint.INDEX, abs.toString(), "'a'", "outside");

        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"weight_map\":{\"a\":\"sub/../../evil.safetensors\"}}");
        fails(() -> Checkpoint.open(dir), "'a'", "outside");

        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"weight_map\":{\"a\":\".\"}}");
        fails(() -> Checkpoint.open(dir), "'a'", "outside");
    }

    @Test
    void tensorNamedInIndexButAbsentFromShard() throws Exception {
        Path dir = modelDir(
                "{\"weight_map\":{\"a\":\"model-00001-of-00001.safetensors\",\"zz\":\"model-00001-of-00001.safetensors\"}}");
        fails(
                () -> Checkpoint.open(dir),
                dir.resolve("model-00001-of-00001.safetensors").toAbsolutePath().toString(),
                "'zz'");
    }

    @Test
    void brokenIndex() throws Exception {
        Path dir = modelDir("{not json");
        fails(() -> Checkpoint.open(dir), Checkpoint.INDEX);
        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"metadata\":{}}");
        fails(() -> Checkpoint.open(dir), Checkpoint.INDEX, "weight_map");
        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"weight_map\":{\"a\":3}}");
        fails(() -> Checkpoint.open(dir), Checkpoint.INDEX, "'a'");
    }

    @Test
    void hostileShardInsideAFolderNamesTheShard() throws Exception {
        Path dir = modelDir("{\"weight_map\":{\"a\":\"bad.safetensors\"}}");
        Path bad = withHeaderLength("model/bad.safetensors", Long.MAX_VALUE, new byte[8]);
        fails(() -> Checkpoint.open(dir), bad.getFileName().toString());
    }

    @Test
    void pickleOnlyFolderIsRefused() throws Exception {
        Path dir = Files.createDirectories(tmp.resolve("pickle"));
        Files.write(dir.resolve("pytorch_model.bin"), new byte[] {(byte) 0x80, 2, 'c'});
        Files.writeString(dir.resolve("config.json"), "{}");
        CheckpointException e = fails(() -> Checkpoint.open(dir), "pytorch_model.bin", "safetensors");
        assertTrue(e.getMessage().toLowerCase().contains("convert"), e.getMessage());
    }

    @Test
    void emptyOrMissingFolder() throws Exception {
        Path dir = Files.createDirectories(tmp.resolve("empty"));
        fails(() -> Checkpoint.open(dir), dir.toString());
        Path missing = tmp.resolve("no-such-dir");
        fails(() -> Checkpoint.open(missing), missing.toString());
    }

    @Test
    void unindexedShardsWithDuplicateTensors() throws Exception {
        Path dir = Files.createDirectories(tmp.resolve("dups"));
        goodShard(dir, "one.safetensors", "a", "b");
        goodShard(dir, "two.safetensors", "b", "c");
        fails(() -> Checkpoint.open(dir), "two.safetensors", "'b'", "one.safetensors");

        Path ok = Files.createDirectories(tmp.resolve("single"));
        goodShard(ok, Checkpoint.SINGLE, "a", "b");
        Checkpoint c = Checkpoint.open(ok);
        assertTrue(c.has("a") && c.has("b"));
        fails(() -> c.tensor("zz"), "'zz'");
        fails(() -> c.info("zz"), "'zz'");
    }
}
