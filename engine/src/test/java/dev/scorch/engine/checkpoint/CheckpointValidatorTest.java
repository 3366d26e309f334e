package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The validator on a tiny demo model with one tensor removed, reshaped, retyped or added. */
class CheckpointValidatorTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    /** One tensor as stored: name, dtype, shape and raw bytes. */
    record Entry(String name, DType dtype, long[] shape, byte[] data) {}

    private Path demo(boolean fp8) throws Exception {
        Path dir = tmp.resolve(fp8 ? "fp8" : "bf16");
        new DemoModelWriter(DemoPreset.TINY, fp8, true, 5).write(dir);
        return dir;
    }

    /** Rewrites the shard holding {@code tensor} after {@code edit} changes its entries, and updates the index to match. */
    static void editShardOf(Path dir, String tensor, Consumer<List<Entry>> edit) throws Exception {
        Path indexFile = dir.resolve(Checkpoint.INDEX);
        ObjectNode index = (ObjectNode) JSON.readTree(indexFile.toFile());
        ObjectNode map = (ObjectNode) index.get("weight_map");
        String shardName = map.get(tensor).asText();
        Path shard = dir.resolve(shardName);

        SafetensorsFile sf = SafetensorsFile.open(shard);
        List<Entry> entries = new ArrayList<>();
        for (TensorInfo t : sf.tensors().values()) {
            ByteBuffer b = sf.tensor(t.name()).bytes(0, Math.toIntExact(t.byteSize()));
            byte[] data = new byte[b.remaining()];
            b.get(data);
            entries.add(new Entry(t.name(), t.dtype(), t.shape(), data));
        }
        edit.accept(entries);

        SafetensorsWriter w = new SafetensorsWriter();
        for (Entry e : entries) {
            w.add(e.name(), e.dtype(), e.shape(), e.data());
        }
        Path next = dir.resolve(shardName + ".new");
        w.write(next);
        Files.move(next, shard, StandardCopyOption.REPLACE_EXISTING);

        List<String> stale = new ArrayList<>();
        map.fields().forEachRemaining(f -> {
            if (f.getValue().asText().equals(shardName)) {
                stale.add(f.getKey());
            }
        });
        stale.forEach(map::remove);
        entries.forEach(e -> map.put(e.name(), shardName));
        JSON.writeValue(indexFile.toFile(), index);
    }

    static ValidationReport validate(Path dir) {
        return CheckpointValidator.validate(ModelConfig.read(dir.resolve("config.json")), Checkpoint.open(dir));
    }

    static void replace(List<Entry> entries, String name, java.util.function.UnaryOperator<Entry> f) {
        for (int i = 0; i < entries.size(); i++) {
            if (entries.get(i).name().equals(name)) {
                entries.set(i, f.apply(entries.get(i)));
                return;
            }
        }
        throw new AssertionError(name + " not in shard");
    }

    @Test
    void untouchedDemoIsValid() throws Exception {
        ValidationReport r = validate(demo(false));
        assertTrue(r.valid(), r.errors().toString());
        assertEquals(3, r.ignored().size());
        assertTrue(r.unexpected().isEmpty());
        r.orThrow();
    }

    @Test
    void missingTensorOfADeclaredLayer() throws Exception {
        Path dir = demo(false);
        String gone = "model.layers.1.mlp.experts.3.up_proj.weight";
        editShardOf(dir, gone, entries -> entries.removeIf(e -> e.name().equals(gone)));
        Checkpoint ckpt = Checkpoint.open(dir); // the index is consistent: only the validator can notice
        assertFalse(ckpt.has(gone));

        ValidationReport r = validate(dir);
        assertFalse(r.valid());
        assertEquals(1, r.errors().size(), r.errors().toString());
        String err = r.errors().get(0);
        assertTrue(err.contains("'" + gone + "'"), err);
        assertTrue(err.contains("layer 1"), err);
        assertTrue(err.contains("missing"), err);

        CheckpointException e = assertThrows(CheckpointException.class, r::orThrow);
        assertTrue(e.getMessage().contains(gone), e.getMessage());
    }

    @Test
    void wrongShapeNamesTensorAndShard() throws Exception {
        Path dir = demo(false);
        String name = "model.layers.2.self_attn.kv_a_proj_with_mqa.weight"; // [kv_lora 32 + rope 8, hidden 192]
        editShardOf(
                dir,
                name,
                entries -> replace(entries, name, e -> new Entry(e.name(), e.dtype(), new long[] {192, 40}, e.data())));
        ValidationReport r = validate(dir);
        assertEquals(1, r.errors().size(), r.errors().toString());
        String err = r.errors().get(0);
        Path shard = Checkpoint.open(dir).info(name).file();
        assertTrue(err.contains("'" + name + "'"), err);
        assertTrue(err.contains(shard.toString()), err);
        assertTrue(err.contains("[192, 40]") && err.contains("[40, 192]"), err);
    }

    @Test
    void integerDtypeIsAnError() throws Exception {
        Path dir = demo(false);
        String name = "model.norm.weight";
        editShardOf(
                dir,
                name,
                entries -> replace(entries, name, e -> new Entry(e.name(), DType.I32, e.shape(), new byte[192 * 4])));
        ValidationReport r = validate(dir);
        assertEquals(1, r.errors().size(), r.errors().toString());
        assertTrue(
                r.errors().get(0).contains("'" + name + "'")
                        && r.errors().get(0).contains("I32"),
                r.errors().get(0));
    }

    @Test
    void extraTensorsAreIgnoredOrUnexpected() throws Exception {
        Path dir = demo(false);
        String anchor = "model.norm.weight";
        editShardOf(dir, anchor, entries -> {
            entries.add(new Entry(
                    "model.layers.3.eh_proj.weight", DType.BF16, new long[] {2}, new byte[4])); // an MTP layer
            entries.add(new Entry(
                    "model.norm.weight_scale_inv", DType.F32, new long[] {1}, new byte[4])); // scale of a BF16 weight
            entries.add(new Entry("vision_tower.proj.weight", DType.BF16, new long[] {2}, new byte[4]));
        });
        ValidationReport r = validate(dir);
        assertTrue(r.valid(), r.errors().toString());
        assertTrue(
                r.ignored().contains("model.layers.3.eh_proj.weight"),
                r.ignored().toString());
        assertTrue(
                r.ignored().contains("model.norm.weight_scale_inv"), r.ignored().toString());
        assertEquals(List.of("vision_tower.proj.weight"), r.unexpected());
    }

    @Test
    void fp8WeightWithoutItsScale() throws Exception {
        Path dir = demo(true);
        String weight = "model.layers.0.mlp.down_proj.weight";
        String scale = weight + "_scale_inv";
        editShardOf(dir, scale, entries -> entries.removeIf(e -> e.name().equals(scale)));
        ValidationReport r = validate(dir);
        assertEquals(1, r.errors().size(), r.errors().toString());
        assertTrue(
                r.errors().get(0).contains("'" + scale + "'")
                        && r.errors().get(0).contains("missing"),
                r.errors().get(0));
    }

    @Test
    void fp8ScaleOfTheWrongShape() throws Exception {
        Path dir = demo(true);
        String scale = "model.layers.0.mlp.down_proj.weight_scale_inv"; // [192, 320] -> [2, 3]
        editShardOf(
                dir,
                scale,
                entries -> replace(entries, scale, e -> new Entry(e.name(), e.dtype(), new long[] {3, 2}, e.data())));
        ValidationReport r = validate(dir);
        assertEquals(1, r.errors().size(), r.errors().toString());
        String err = r.errors().get(0);
        assertTrue(err.contains("'" + scale + "'") && err.contains("[2, 3]"), err);
    }

    @Test
    void fp8OnlyForLinearWeights() throws Exception {
        Path dir = demo(true);
        String name = "model.layers.1.post_attention_layernorm.weight";
        editShardOf(
                dir,
                name,
                entries -> replace(entries, name, e -> new Entry(e.name(), DType.F8_E4M3, e.shape(), new byte[192])));
        ValidationReport r = validate(dir);
        assertEquals(1, r.errors().size(), r.errors().toString());
        assertTrue(
                r.errors().get(0).contains("'" + name + "'")
                        && r.errors().get(0).contains("linear"),
                r.errors().get(0));
    }

    @Test
    void fp8WeightsWithoutQuantizationConfig() throws Exception {
        Path dir = demo(true);
        Path cfg = dir.resolve("config.json");
        ObjectNode root = (ObjectNode) JSON.readTree(cfg.toFile());
        root.remove("quantization_config");
        JSON.writeValue(cfg.toFile(), root);
        ValidationReport r = validate(dir);
        assertFalse(r.valid());
        assertTrue(
                r.errors().stream().allMatch(e -> e.contains("quantization_config")),
                r.errors().get(0));
    }

    /**
     * A config that declares far more tensors than the checkpoint holds (within the config caps: 1000 layers of the tiny
     * model's 8 experts) is refused on the counts, in one error, before the list of expected tensors is made; inspect's
     * ModelInfo and a model load fail the same way, well within a generous limit.
     */
    @Test
    void declaredTensorsBeyondTheCheckpointAreRefusedOnTheCount() throws Exception {
        Path dir = demo(false);
        Path cfg = dir.resolve("config.json");
        ObjectNode root = (ObjectNode) JSON.readTree(cfg.toFile());
        root.put("num_hidden_layers", 1000);
        JSON.writeValue(cfg.toFile(), root);
        int held = Checkpoint.open(dir).tensorCount();
        ValidationReport r = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
                java.time.Duration.ofSeconds(30), () -> validate(dir));
        assertEquals(
                1,
                r.errors().size(),
                r.errors().size() + " errors, first " + r.errors().get(0));
        String e = r.errors().get(0);
        assertTrue(e.startsWith(cfg + ": num_hidden_layers 1000"), e);
        assertTrue(
                e.contains("declares " + dev.scorch.engine.checkpoint.WeightLayout.count(ModelConfig.read(cfg))
                        + " tensors"),
                e);
        assertTrue(e.contains("holds " + held), e);
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(30), () -> {
            dev.scorch.engine.model.ModelInfo info = dev.scorch.engine.model.ModelInfo.of(dir);
            assertEquals(List.of(e), info.validation().errors());
            CheckpointException thrown =
                    assertThrows(CheckpointException.class, () -> dev.scorch.engine.model.DeepseekV3Model.load(dir));
            assertTrue(thrown.getMessage().contains(e), thrown.getMessage());
        });
    }

    /** num_hidden_layers 10^9 (it built the expected-tensor list until the driver ran out of memory): refused as read. */
    @Test
    void aBillionLayersFailAtOnceNamingTheField() throws Exception {
        Path dir = demo(false);
        Path cfg = dir.resolve("config.json");
        ObjectNode root = (ObjectNode) JSON.readTree(cfg.toFile());
        root.put("num_hidden_layers", 1_000_000_000);
        JSON.writeValue(cfg.toFile(), root);
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(30), () -> {
            var e = assertThrows(
                    dev.scorch.engine.config.ConfigException.class, () -> dev.scorch.engine.model.ModelInfo.of(dir));
            assertEquals(
                    cfg + ": field 'num_hidden_layers' must be an integer in [1, 1024], got 1000000000",
                    e.getMessage());
            assertThrows(
                    dev.scorch.engine.config.ConfigException.class,
                    () -> dev.scorch.engine.model.DeepseekV3Model.load(dir));
        });
    }
}
