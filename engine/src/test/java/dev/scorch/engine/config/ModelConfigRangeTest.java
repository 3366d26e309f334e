package dev.scorch.engine.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * Every number of config.json the forward pass reads is range-checked when the file is read, the error naming the
 * file and the field: values that made NaN log-probs reported as success (rope_theta 0, rms_norm_eps -1, mscale or
 * routed_scaling_factor 1e308), silently dropped layers (n_shared_experts -1) or an unbounded allocation on the driver
 * (num_hidden_layers 10^9) are refused.
 */
class ModelConfigRangeTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private Path edited(String name, Consumer<ObjectNode> edit) throws Exception {
        ObjectNode root =
                (ObjectNode) JSON.readTree(ModelConfigTest.resource(name).toFile());
        edit.accept(root);
        Path dir = Files.createTempDirectory(tmp, name);
        Path file = dir.resolve("config.json");
        JSON.writeValue(file.toFile(), root);
        return file;
    }

    private static Consumer<ObjectNode> set(String field, double v) {
        return root -> root.put(field, v);
    }

    private static Consumer<ObjectNode> set(String field, long v) {
        return root -> root.put(field, v);
    }

    private static Consumer<ObjectNode> rope(String field, double v) {
        return root -> ((ObjectNode) root.get("rope_scaling")).put(field, v);
    }

    private static Consumer<ObjectNode> rope(String field, long v) {
        return root -> ((ObjectNode) root.get("rope_scaling")).put(field, v);
    }

    /** (config, edit, field named in the message, text the message holds). */
    static Stream<Arguments> outOfRange() {
        List<Arguments> a = new ArrayList<>();
        // NaN or infinite scores.
        a.add(Arguments.of("kimi-k2-instruct", set("rope_theta", 0.0), "rope_theta", "got 0.0"));
        a.add(Arguments.of("kimi-k2-instruct", set("rope_theta", -10000.0), "rope_theta", "got -10000.0"));
        a.add(Arguments.of("kimi-k2-instruct", set("rope_theta", 1e308), "rope_theta", "got 1.0E308"));
        a.add(Arguments.of("kimi-k2-instruct", set("rms_norm_eps", -1.0), "rms_norm_eps", "got -1.0"));
        a.add(Arguments.of("kimi-k2-instruct", set("rms_norm_eps", 0.0), "rms_norm_eps", "got 0.0"));
        a.add(Arguments.of("kimi-k2-instruct", set("rms_norm_eps", 1.0), "rms_norm_eps", "got 1.0"));
        a.add(Arguments.of(
                "kimi-k2-instruct", set("routed_scaling_factor", 1e308), "routed_scaling_factor", "got 1.0E308"));
        a.add(Arguments.of("kimi-k2-instruct", set("routed_scaling_factor", 0.0), "routed_scaling_factor", "got 0.0"));
        a.add(Arguments.of("kimi-k2-instruct", rope("mscale", 1e308), "mscale", "got 1.0E308"));
        a.add(Arguments.of("kimi-k2-instruct", rope("mscale", -1.0), "mscale", "got -1.0"));
        a.add(Arguments.of("kimi-k2-instruct", rope("mscale_all_dim", 1e308), "mscale_all_dim", "got 1.0E308"));
        a.add(Arguments.of("kimi-k2-instruct", rope("factor", 1e308), "factor", "got 1.0E308"));
        a.add(Arguments.of("kimi-k2-instruct", rope("factor", 0.5), "factor", "got 0.5"));
        a.add(Arguments.of("kimi-k2-instruct", rope("beta_fast", 0.0), "beta_fast", "got 0.0"));
        a.add(Arguments.of("kimi-k2-instruct", rope("beta_fast", -32.0), "beta_fast", "got -32.0"));
        a.add(Arguments.of("kimi-k2-instruct", rope("beta_slow", 0.0), "beta_slow", "got 0.0"));
        a.add(Arguments.of("kimi-k2-instruct", rope("beta_slow", 1e308), "beta_slow", "got 1.0E308"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                rope("original_max_position_embeddings", 0),
                "original_max_position_embeddings",
                "got 0"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                rope("original_max_position_embeddings", -4096),
                "original_max_position_embeddings",
                "got -4096"));
        a.add(Arguments.of("kimi-k2-instruct", set("qk_rope_head_dim", 63), "qk_rope_head_dim", "even"));
        // Silently changed models.
        a.add(Arguments.of("kimi-k2-instruct", set("n_shared_experts", -1), "n_shared_experts", "got -1"));
        a.add(Arguments.of("kimi-k2-instruct", set("moe_layer_freq", 0), "moe_layer_freq", "got 0"));
        a.add(Arguments.of("kimi-k2-instruct", set("first_k_dense_replace", -1), "first_k_dense_replace", "got -1"));
        a.add(Arguments.of("kimi-k2-instruct", set("first_k_dense_replace", 62), "first_k_dense_replace", "got 62"));
        a.add(Arguments.of("kimi-k2-instruct", set("n_routed_experts", -8), "n_routed_experts", "got -8"));
        a.add(Arguments.of("kimi-k2-instruct", set("num_key_value_heads", 0), "num_key_value_heads", "got 0"));
        a.add(Arguments.of(
                "kimi-k2-instruct", set("num_nextn_predict_layers", -1), "num_nextn_predict_layers", "got -1"));
        a.add(Arguments.of("kimi-k2-instruct", set("bos_token_id", -1), "bos_token_id", "got -1"));
        a.add(Arguments.of("kimi-k2-instruct", set("eos_token_id", 163840), "eos_token_id", "got 163840"));
        a.add(Arguments.of("kimi-k2-instruct", set("intermediate_size", -5), "intermediate_size", "got -5"));
        a.add(Arguments.of("kimi-k2-instruct", set("eos_token_id", 1L << 32), "eos_token_id", "integer"));
        // Sizes a config can ask the driver to allocate for, far above any real checkpoint.
        a.add(Arguments.of(
                "kimi-k2-instruct", set("num_hidden_layers", 1_000_000_000), "num_hidden_layers", "got 1000000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct", set("n_routed_experts", 1_000_000_000), "n_routed_experts", "got 1000000000"));
        a.add(Arguments.of("kimi-k2-instruct", set("vocab_size", 1_000_000_000), "vocab_size", "got 1000000000"));
        a.add(Arguments.of("kimi-k2-instruct", set("hidden_size", 1_000_000_000), "hidden_size", "got 1000000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct", set("intermediate_size", 1_000_000_000), "intermediate_size", "got 1000000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                set("moe_intermediate_size", 1_000_000_000),
                "moe_intermediate_size",
                "got 1000000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                set("num_attention_heads", 1_000_000_000),
                "num_attention_heads",
                "got 1000000000"));
        a.add(Arguments.of("kimi-k2-instruct", set("kv_lora_rank", 1_000_000_000), "kv_lora_rank", "got 1000000000"));
        a.add(Arguments.of("kimi-k2-instruct", set("q_lora_rank", 1_000_000_000), "q_lora_rank", "got 1000000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct", set("qk_nope_head_dim", 1_000_000_000), "qk_nope_head_dim", "got 1000000000"));
        a.add(Arguments.of("kimi-k2-instruct", set("v_head_dim", 1_000_000_000), "v_head_dim", "got 1000000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                set("max_position_embeddings", 2_000_000_000),
                "max_position_embeddings",
                "got 2000000000"));
        a.add(Arguments.of("kimi-k2-instruct", set("n_shared_experts", 1_000_000), "n_shared_experts", "got 1000000"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                (Consumer<ObjectNode>) root -> {
                    root.put("num_hidden_layers", 1000);
                    root.put("n_routed_experts", 4000);
                    root.put("num_experts_per_tok", 8);
                },
                "n_routed_experts",
                "tensors"));
        a.add(Arguments.of(
                "kimi-k2-instruct",
                (Consumer<ObjectNode>) root -> ((ObjectNode) root.get("quantization_config"))
                        .putArray("weight_block_size")
                        .add(128)
                        .add(1 << 30),
                "weight_block_size",
                "1073741824"));
        return a.stream();
    }

    @ParameterizedTest(name = "{2}: {3}")
    @MethodSource("outOfRange")
    void outOfRangeValueIsRefusedNamingFileAndField(String name, Consumer<ObjectNode> edit, String field, String got)
            throws Exception {
        Path file = edited(name, edit);
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().startsWith(file + ": ") || e.getMessage().startsWith(file + " "), e.getMessage());
        assertTrue(e.getMessage().contains("'" + field + "'"), e.getMessage());
        assertTrue(e.getMessage().contains(got), e.getMessage());
    }

    @Test
    void messageSaysTheRange() throws Exception {
        Path file = edited("kimi-k2-instruct", set("rope_theta", 0.0));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertEquals(file + ": field 'rope_theta' must be a finite number in [1.0, 1.0E12], got 0.0", e.getMessage());
    }

    @Test
    void infinityWrittenAsAHugeNumberIsRefused() throws Exception {
        Path file = edited("kimi-k2-instruct", root -> {});
        Files.writeString(file, Files.readString(file).replace("\"rms_norm_eps\":1.0E-6", "\"rms_norm_eps\":1e400"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("'rms_norm_eps'") && e.getMessage().contains("Infinity"), e.getMessage());
    }

    @Test
    void realCheckpointsPass() throws Exception {
        ModelConfig.read(ModelConfigTest.resource("kimi-k2-instruct"));
        ModelConfig.read(ModelConfigTest.resource("deepseek-v3"));
    }

    @Test
    void generationConfigDefaultsAreRangeChecked() throws Exception {
        Path dir = Files.createDirectories(tmp.resolve("gen"));
        Path file = dir.resolve("generation_config.json");
        for (String[] bad : new String[][] {
            {"\"temperature\": -0.5", "temperature"},
            {"\"temperature\": 1e400", "temperature"},
            {"\"top_p\": 1.5", "top_p"},
            {"\"top_p\": -0.1", "top_p"},
            {"\"top_k\": -3", "top_k"},
            {"\"max_new_tokens\": 0", "max_new_tokens"},
            {"\"eos_token_id\": [1, -2]", "eos_token_id"},
            {"\"bos_token_id\": -1", "bos_token_id"}
        }) {
            Files.writeString(file, "{" + bad[0] + "}");
            ConfigException e = assertThrows(ConfigException.class, () -> GenerationConfig.read(file), bad[0]);
            assertTrue(e.getMessage().startsWith(file + ": field '" + bad[1] + "'"), e.getMessage());
        }
    }
}
