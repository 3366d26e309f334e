package dev.scorch.engine.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * compressed-tensors quantization_config as Kimi publishes it (K2-Thinking at the top level, K2.5/K2.6 under
 * text_config), its ignore/targets matching as compressed-tensors' match_name does, and the refusal, naming file, field
 * and what Scorch reads, of every scheme Scorch does not run.
 */
class CompressedTensorsConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    /**
     * Kimi-K2-Thinking's quantization_config as its config.json publishes it (transcribed; see docs/checkpoints.md,
     * "Checkpoint formats", for where it was checked).
     */
    static ObjectNode kimiThinkingQuantization() throws Exception {
        return (ObjectNode) JSON.readTree("""
        {"config_groups": {"group_0": {"input_activations": null, "output_activations": null, "targets": ["Linear"],
          "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 32, "num_bits": 4,
            "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": true, "type": "int"}}},
         "format": "pack-quantized",
         "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*"],
         "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}""");
    }

    /** llm-compressor's FP8_BLOCK scheme: float-quantized, 128x128 weight blocks, dynamic per-group FP8 activations. */
    static ObjectNode fp8BlockQuantization() throws Exception {
        return (ObjectNode) JSON.readTree("""
        {"config_groups": {"group_0": {"format": "float-quantized",
          "input_activations": {"dynamic": true, "group_size": 128, "num_bits": 8, "strategy": "group", "symmetric": true, "type": "float"},
          "output_activations": null, "targets": ["Linear"],
          "weights": {"actorder": null, "block_structure": [128, 128], "dynamic": false, "group_size": null, "num_bits": 8,
            "observer": "static_minmax", "observer_kwargs": {}, "strategy": "block", "symmetric": true, "type": "float"}}},
         "format": "float-quantized", "ignore": ["re:.*gate$", "lm_head", "re:.*kv_a_proj_with_mqa$", "re:.*q_a_proj$", "model.embed_tokens"],
         "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}""");
    }

    /** Kimi-K2-Instruct's config.json with quantization_config replaced by q, edited, written to a fresh folder. */
    private Path withQuantization(ObjectNode q, Consumer<ObjectNode> edit) throws Exception {
        ObjectNode root = (ObjectNode)
                JSON.readTree(ModelConfigTest.resource("kimi-k2-instruct").toFile());
        root.set("quantization_config", q);
        edit.accept(q);
        Path file = Files.createTempDirectory(tmp, "ct").resolve("config.json");
        JSON.writeValue(file.toFile(), root);
        return file;
    }

    private static ObjectNode group(ObjectNode q) {
        return (ObjectNode) q.get("config_groups").get("group_0");
    }

    private static ObjectNode weights(ObjectNode q) {
        return (ObjectNode) group(q).get("weights");
    }

    @Test
    void kimiK2ThinkingQuantizesTheRoutedExpertsOnly() throws Exception {
        QuantizationConfig q = ModelConfig.read(withQuantization(kimiThinkingQuantization(), x -> {}))
                .quantization();
        assertEquals("compressed-tensors", q.quantMethod());
        assertEquals(QuantizationConfig.Scheme.INT4_GROUP, q.scheme());
        assertEquals("pack-quantized", q.format());
        assertEquals(32, q.groupSize());
        assertEquals("INT4 group 32 (compressed-tensors pack-quantized)", q.describe());
        assertEquals(
                List.of(
                        "lm_head",
                        "re:.*self_attn.*",
                        "re:.*shared_experts.*",
                        "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"),
                q.ignore().entries());
        assertTrue(q.quantizes("model.layers.1.mlp.experts.7.down_proj", true));
        assertTrue(q.quantizes("model.layers.60.mlp.experts.383.gate_proj", true));
        assertFalse(q.quantizes("model.layers.1.mlp.shared_experts.down_proj", true));
        assertFalse(q.quantizes("model.layers.0.mlp.gate_proj", true)); // the dense MLP of layer 0
        assertFalse(q.quantizes("model.layers.5.self_attn.kv_a_proj_with_mqa", true));
        assertFalse(q.quantizes("lm_head", true));
        // The router (MoEGate) and the embedding are no nn.Linear: the Linear target does not reach them.
        assertFalse(q.quantizes("model.layers.1.mlp.gate", false));
        assertFalse(q.quantizes("model.embed_tokens", false));
    }

    /** match_name: "re:P" is re.match (anchored at the start only), other entries equal the name; "Linear" matches by class. */
    @Test
    void ignoreEntriesMatchAsCompressedTensorsMatchesNames() throws Exception {
        QuantizationConfig q = ModelConfig.read(withQuantization(kimiThinkingQuantization(), x -> {
                    ArrayNode ignore = x.putArray("ignore");
                    ignore.add("re:layers\\.1\\.")
                            .add("re:model\\.layers\\.2\\.")
                            .add("model.layers.3.mlp.experts.0.up_proj")
                            .add("lm_head");
                }))
                .quantization();
        assertTrue(q.quantizes("model.layers.1.mlp.experts.0.up_proj", true), "re: is anchored at the start");
        assertFalse(q.quantizes("model.layers.2.mlp.experts.0.up_proj", true), "re: need not match the whole name");
        assertFalse(q.quantizes("model.layers.3.mlp.experts.0.up_proj", true));
        assertTrue(q.quantizes("model.layers.3.mlp.experts.0.up_proj_x", true), "plain entries are whole names");
        assertTrue(q.quantizes("model.layers.3.mlp.experts.0", true));
        assertTrue(q.quantizes("language_model.lm_head", true), "an exact name does not match under a prefix");
        assertFalse(q.quantizes("model.layers.4.mlp.experts.0.up_proj", false), "not a Linear, not named by targets");
        assertTrue(q.targets().matches("anything", true));
        assertFalse(q.targets().matches("anything", false));
    }

    /** K2.5 and K2.6 nest the text model's config, and its quantization_config, under text_config. */
    @Test
    void k25WrapperReadsTheTextModelFromTextConfig() throws Exception {
        ObjectNode text = (ObjectNode)
                JSON.readTree(ModelConfigTest.resource("kimi-k2-instruct").toFile());
        text.set("quantization_config", kimiThinkingQuantization());
        ((ArrayNode) text.get("quantization_config").get("ignore"))
                .removeAll()
                .add("re:.*self_attn.*")
                .add("re:.*shared_experts.*")
                .add("re:.*mlp\\.(gate|up|gate_up|down)_proj.*")
                .add("re:.*lm_head.*")
                .add("re:vision_tower.*")
                .add("re:mm_projector.*");
        text.remove("architectures");
        ObjectNode root = JSON.createObjectNode();
        root.putArray("architectures").add("KimiK25ForConditionalGeneration");
        root.put("model_type", "kimi_k25");
        root.set("text_config", text);
        root.putObject("vision_config").put("patch_size", 14);
        Path file = Files.createTempDirectory(tmp, "k25").resolve("config.json");
        JSON.writeValue(file.toFile(), root);

        ModelConfig c = ModelConfig.read(file);
        assertEquals("KimiK25ForConditionalGeneration", c.architecture());
        assertEquals("language_model.", c.weightPrefix());
        assertEquals(
                "language_model.model.layers.1.mlp.experts.0.up_proj.weight",
                c.checkpointName("model.layers.1.mlp.experts.0.up_proj.weight"));
        assertEquals(7168, c.hiddenSize());
        assertEquals(384, c.nRoutedExperts());
        assertTrue(c.isInt4());
        QuantizationConfig q = c.quantization();
        assertTrue(q.quantizes("language_model.model.layers.1.mlp.experts.0.up_proj", true));
        assertFalse(q.quantizes("language_model.lm_head", true));
        assertFalse(q.quantizes("language_model.model.layers.1.mlp.shared_experts.up_proj", true));
        assertFalse(q.quantizes("mm_projector.proj.0", true));
        assertFalse(q.quantizes("vision_tower.encoder.blocks.0.wqkv", true));

        // A top-level quantization_config (a re-export's) wins over the text_config's it left behind.
        root.set("quantization_config", fp8BlockQuantization());
        JSON.writeValue(file.toFile(), root);
        assertEquals(
                QuantizationConfig.Scheme.FP8_BLOCK,
                ModelConfig.read(file).quantization().scheme());

        // Errors in the text model's fields name text_config.
        text.put("hidden_size", -1);
        JSON.writeValue(file.toFile(), root);
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains(file + " text_config: field 'hidden_size'"), e.getMessage());
        text.put("hidden_size", 7168);
        root.remove("text_config");
        JSON.writeValue(file.toFile(), root);
        e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("'text_config' is required"), e.getMessage());
        root.set("text_config", text);
        root.put("model_type", "kimi_vl");
        JSON.writeValue(file.toFile(), root);
        e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("'model_type'") && e.getMessage().contains("kimi_k25"), e.getMessage());
        root.put("model_type", "kimi_k25");
        root.put("tie_word_embeddings", true);
        JSON.writeValue(file.toFile(), root);
        e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("'tie_word_embeddings'"), e.getMessage());
    }

    @Test
    void fp8BlockExportMapsOntoTheFp8Path() throws Exception {
        ModelConfig c = ModelConfig.read(withQuantization(fp8BlockQuantization(), x -> {}));
        QuantizationConfig q = c.quantization();
        assertTrue(c.isFp8());
        assertEquals(QuantizationConfig.Scheme.FP8_BLOCK, q.scheme());
        assertEquals(128, q.blockRows());
        assertEquals(128, q.blockCols());
        assertEquals("_scale", q.fp8ScaleSuffix());
        assertEquals("dynamic", q.activationScheme());
        assertEquals("FP8 E4M3 128x128 blocks (compressed-tensors float-quantized)", q.describe());
        assertTrue(q.quantizes("model.layers.1.self_attn.kv_b_proj", true));
        assertFalse(q.quantizes("model.layers.1.self_attn.kv_a_proj_with_mqa", true));
        assertFalse(q.quantizes("model.layers.1.mlp.gate", false));
        // The older "RxC" string form of block_structure, and naive-quantized (the same compressor) read the same.
        QuantizationConfig older = ModelConfig.read(withQuantization(fp8BlockQuantization(), x -> {
                    weights(x).put("block_structure", "64x32");
                    x.put("format", "naive-quantized");
                    group(x).remove("format");
                }))
                .quantization();
        assertEquals(64, older.blockRows());
        assertEquals(32, older.blockCols());
        // DeepSeek's own FP8 config reads as before.
        QuantizationConfig deepseek =
                ModelConfig.read(ModelConfigTest.resource("kimi-k2-instruct")).quantization();
        assertEquals("_scale_inv", deepseek.fp8ScaleSuffix());
        assertNull(deepseek.ignore());
        assertFalse(deepseek.quantizes("model.layers.1.mlp.experts.0.up_proj", true));
    }

    private static Consumer<ObjectNode> w(String field, Object v) {
        return q -> put(weights(q), field, v);
    }

    private static void put(ObjectNode o, String field, Object v) {
        if (v == null) {
            o.putNull(field);
        } else if (v instanceof String s) {
            o.put(field, s);
        } else if (v instanceof Integer i) {
            o.put(field, i);
        } else if (v instanceof Boolean b) {
            o.put(field, b);
        } else {
            o.set(field, JSON.valueToTree(v));
        }
    }

    /** (what, base config, edit, texts the message must hold besides the file). */
    static Stream<Arguments> refused() {
        List<Arguments> a = new ArrayList<>();
        String supported = "pack-quantized";
        for (String method : new String[] {"awq", "gptq", "mxfp4", "bitsandbytes", "modelopt", "quark"}) {
            a.add(Arguments.of(
                    "quant_method " + method,
                    false,
                    (Consumer<ObjectNode>) q -> q.put("quant_method", method),
                    List.of("'quant_method'", method, supported, "float-quantized", "\"fp8\"")));
        }
        for (String format : new String[] {
            "mxfp4-pack-quantized", "nvfp4-pack-quantized", "int-quantized", "marlin-24", "dense", "sparse-bitmask"
        }) {
            a.add(Arguments.of(
                    "format " + format,
                    false,
                    (Consumer<ObjectNode>) q -> q.put("format", format),
                    List.of("'format'", format, supported, "float-quantized")));
        }
        a.add(Arguments.of(
                "group format mxfp4",
                false,
                (Consumer<ObjectNode>) q -> group(q).put("format", "mxfp4-pack-quantized"),
                List.of("group_0", "'format'", "mxfp4-pack-quantized")));
        a.add(Arguments.of("int8 packed", false, w("num_bits", 8), List.of("'num_bits'", "8", "INT4")));
        a.add(Arguments.of("fp4 packed", false, w("type", "float"), List.of("'type'", "float")));
        a.add(Arguments.of(
                "asymmetric", false, w("symmetric", false), List.of("'symmetric'", "asymmetric", "weight_zero_point")));
        a.add(Arguments.of(
                "per-channel int4",
                false,
                (Consumer<ObjectNode>) q -> {
                    weights(q).put("strategy", "channel");
                    weights(q).putNull("group_size");
                },
                List.of("'strategy'", "channel")));
        a.add(Arguments.of(
                "actorder group", false, w("actorder", "group"), List.of("'actorder'", "group", "weight_g_idx")));
        a.add(Arguments.of("actorder true", false, w("actorder", true), List.of("'actorder'", "true")));
        a.add(Arguments.of("group_size 0", false, w("group_size", 0), List.of("'group_size'", "0")));
        a.add(Arguments.of("group_size -2", false, w("group_size", -2), List.of("'group_size'", "-2")));
        a.add(Arguments.of(
                "group_size huge", false, w("group_size", 1 << 20), List.of("'group_size'", String.valueOf(1 << 20))));
        a.add(Arguments.of("group_size text", false, w("group_size", "32"), List.of("'group_size'", "integer")));
        a.add(Arguments.of("num_bits huge", false, w("num_bits", 1000), List.of("'num_bits'", "1000")));
        a.add(Arguments.of("dynamic weights", false, w("dynamic", true), List.of("'dynamic'", "true")));
        a.add(Arguments.of(
                "two groups",
                false,
                (Consumer<ObjectNode>) q -> ((ObjectNode) q.get("config_groups")).set("group_1", group(q).deepCopy()),
                List.of("'config_groups'", "2 groups", "group_1")));
        a.add(Arguments.of(
                "no groups",
                false,
                (Consumer<ObjectNode>) q -> ((ObjectNode) q.get("config_groups")).removeAll(),
                List.of("'config_groups'", "0 groups")));
        a.add(Arguments.of(
                "groups missing",
                false,
                (Consumer<ObjectNode>) q -> q.remove("config_groups"),
                List.of("'config_groups'", "required")));
        a.add(Arguments.of(
                "status frozen",
                false,
                (Consumer<ObjectNode>) q -> q.put("quantization_status", "frozen"),
                List.of("'quantization_status'", "frozen")));
        a.add(Arguments.of(
                "kv cache scheme",
                false,
                (Consumer<ObjectNode>) q -> q.putObject("kv_cache_scheme").put("num_bits", 8),
                List.of("'kv_cache_scheme'")));
        a.add(Arguments.of(
                "sparsity",
                false,
                (Consumer<ObjectNode>) q -> q.putObject("sparsity_config").put("format", "sparse-24-bitmask"),
                List.of("'sparsity_config'")));
        a.add(Arguments.of(
                "output activations",
                false,
                (Consumer<ObjectNode>)
                        q -> group(q).putObject("output_activations").put("num_bits", 8),
                List.of("'output_activations'")));
        a.add(Arguments.of(
                "static input activations",
                false,
                (Consumer<ObjectNode>) q -> group(q).putObject("input_activations")
                        .put("num_bits", 8)
                        .put("dynamic", false),
                List.of("'input_activations'", "static")));
        a.add(Arguments.of(
                "weights missing",
                false,
                (Consumer<ObjectNode>) q -> group(q).remove("weights"),
                List.of("'weights'")));
        a.add(Arguments.of(
                "targets empty",
                false,
                (Consumer<ObjectNode>) q -> group(q).putArray("targets"),
                List.of("'targets'")));
        a.add(Arguments.of(
                "ignore bad regex",
                false,
                (Consumer<ObjectNode>) q -> q.putArray("ignore").add("lm_head").add("re:(["),
                List.of("'ignore'", "entry 1", "re:([")));
        a.add(Arguments.of(
                "ignore empty regex",
                false,
                (Consumer<ObjectNode>) q -> q.putArray("ignore").add("re:"),
                List.of("'ignore'", "empty")));
        a.add(Arguments.of(
                "ignore not a list",
                false,
                (Consumer<ObjectNode>) q -> q.put("ignore", "lm_head"),
                List.of("'ignore'", "list")));
        a.add(Arguments.of(
                "ignore entry a number",
                false,
                (Consumer<ObjectNode>) q -> q.putArray("ignore").add(3),
                List.of("'ignore'", "3")));
        a.add(Arguments.of(
                "ignore entry too long",
                false,
                (Consumer<ObjectNode>) q -> q.putArray("ignore").add("x".repeat(5000)),
                List.of("'ignore'", "5000")));
        a.add(Arguments.of(
                "fp8 per-channel",
                true,
                (Consumer<ObjectNode>) q -> {
                    weights(q).put("strategy", "channel");
                    weights(q).remove("block_structure");
                },
                List.of("'strategy'", "channel", "block")));
        a.add(Arguments.of(
                "fp8 no block",
                true,
                (Consumer<ObjectNode>) q -> weights(q).remove("block_structure"),
                List.of("'block_structure'", "required")));
        a.add(Arguments.of(
                "fp8 zero block",
                true,
                w("block_structure", List.of(0, 128)),
                List.of("'block_structure'", "[0,128]")));
        a.add(Arguments.of(
                "fp8 one side", true, w("block_structure", List.of(128)), List.of("'block_structure'", "[128]")));
        a.add(Arguments.of(
                "fp8 huge block", true, w("block_structure", List.of(128, 1 << 20)), List.of("'block_structure'")));
        a.add(Arguments.of(
                "fp8 bad string", true, w("block_structure", "128by128"), List.of("'block_structure'", "128by128")));
        a.add(Arguments.of("fp4 float-quantized", true, w("num_bits", 4), List.of("'num_bits'", "4", "FP8")));
        a.add(Arguments.of("int8 float-quantized", true, w("type", "int"), List.of("'type'", "int")));
        return a.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refused")
    void unsupportedSchemesAreRefusedNamingFileFieldAndWhatIsRead(
            String what, boolean fp8, Consumer<ObjectNode> edit, List<String> texts) throws Exception {
        Path file = withQuantization(fp8 ? fp8BlockQuantization() : kimiThinkingQuantization(), edit);
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file), what);
        assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
        for (String t : texts) {
            assertTrue(e.getMessage().contains(t), what + ": message should hold '" + t + "': " + e.getMessage());
        }
    }

    /** A pattern that backtracks without end fails naming the entry within a generous time limit instead of hanging. */
    @Test
    void runawayPatternFailsInsteadOfHanging() throws Exception {
        QuantizationConfig q = ModelConfig.read(withQuantization(
                        kimiThinkingQuantization(), x -> x.putArray("ignore").add("re:((.*)*)*y")))
                .quantization();
        ConfigException e = assertTimeoutPreemptively(
                Duration.ofSeconds(30),
                () -> assertThrows(
                        ConfigException.class,
                        () -> q.quantizes("model.layers.12.mlp.experts.117.gate_proj_and_some_more", true)));
        assertTrue(e.getMessage().contains("'ignore'") && e.getMessage().contains("re:((.*)*)*y"), e.getMessage());
        assertTrue(e.getMessage().contains("model.layers.12.mlp.experts.117.gate_proj_and_some_more"), e.getMessage());
    }
}
