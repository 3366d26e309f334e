package dev.scorch.engine.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.checkpoint.WeightLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** config.json parsing against the real Kimi-K2-Instruct and DeepSeek-V3 files, and the failures it must name. */
class ModelConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    static Path resource(String name) throws Exception {
        return Path.of(ModelConfigTest.class
                .getResource("/configs/" + name + "/config.json")
                .toURI());
    }

    /** Writes a copy of a resource config with {@code edit} applied and returns its path. */
    private Path edited(String name, Consumer<ObjectNode> edit) throws Exception {
        ObjectNode root = (ObjectNode) JSON.readTree(resource(name).toFile());
        edit.accept(root);
        Path dir = Files.createDirectories(tmp.resolve(name));
        Path file = dir.resolve("config.json");
        JSON.writeValue(file.toFile(), root);
        return file;
    }

    @Test
    void kimiK2Instruct() throws Exception {
        ModelConfig c = ModelConfig.read(resource("kimi-k2-instruct"));
        assertEquals("kimi_k2", c.modelType());
        assertEquals(List.of("DeepseekV3ForCausalLM"), c.architectures());
        assertEquals(163840, c.vocabSize());
        assertEquals(7168, c.hiddenSize());
        assertEquals(18432, c.intermediateSize());
        assertEquals(2048, c.moeIntermediateSize());
        assertEquals(61, c.numHiddenLayers());
        assertEquals(1, c.firstKDenseReplace());
        assertEquals(64, c.numAttentionHeads());
        assertEquals(64, c.numKeyValueHeads());
        assertEquals(1536, c.qLoraRank());
        assertTrue(c.hasQLora());
        assertEquals(512, c.kvLoraRank());
        assertEquals(128, c.qkNopeHeadDim());
        assertEquals(64, c.qkRopeHeadDim());
        assertEquals(192, c.qHeadDim());
        assertEquals(128, c.vHeadDim());
        assertEquals(384, c.nRoutedExperts());
        assertEquals(1, c.nSharedExperts());
        assertEquals(8, c.numExpertsPerTok());
        assertEquals(1, c.nGroup());
        assertEquals(1, c.topkGroup());
        assertEquals(1, c.moeLayerFreq());
        assertEquals(2.827, c.routedScalingFactor());
        assertTrue(c.normTopkProb());
        assertEquals("sigmoid", c.scoringFunc());
        assertEquals("noaux_tc", c.topkMethod());
        assertEquals("silu", c.hiddenAct());
        assertEquals(131072, c.maxPositionEmbeddings());
        assertEquals(1e-6, c.rmsNormEps());
        assertEquals(50000.0, c.ropeTheta());
        assertFalse(c.tieWordEmbeddings());
        assertEquals(163584, c.bosTokenId());
        assertEquals(List.of(163585), c.eosTokenIds());
        assertEquals(0, c.numNextnPredictLayers());
        assertEquals("bfloat16", c.torchDtype());

        RopeScaling r = c.ropeScaling();
        assertEquals("yarn", r.type());
        assertEquals(32.0, r.factor());
        assertEquals(1.0, r.betaFast());
        assertEquals(1.0, r.betaSlow());
        assertEquals(1.0, r.mscale());
        assertEquals(1.0, r.mscaleAllDim());
        assertEquals(4096, r.originalMaxPositionEmbeddings());

        QuantizationConfig q = c.quantization();
        assertTrue(c.isFp8());
        assertEquals("fp8", q.quantMethod());
        assertEquals("e4m3", q.fmt());
        assertEquals("dynamic", q.activationScheme());
        assertEquals(128, q.blockRows());
        assertEquals(128, q.blockCols());

        // Layer 0 is dense, 1..60 are MoE.
        assertFalse(c.isMoeLayer(0));
        assertTrue(c.isMoeLayer(1));
        assertTrue(c.isMoeLayer(60));

        // Computed independently from the config (embed + lm_head + 61 MLA blocks + 1 dense MLP + 60 MoE layers).
        assertEquals(1_026_408_232_448L, WeightLayout.parameters(c));
        assertEquals(32_861_500_928L, WeightLayout.activeParameters(c));
    }

    @Test
    void deepSeekV3() throws Exception {
        ModelConfig c = ModelConfig.read(resource("deepseek-v3"));
        assertEquals("deepseek_v3", c.modelType());
        assertEquals(129280, c.vocabSize());
        assertEquals(7168, c.hiddenSize());
        assertEquals(18432, c.intermediateSize());
        assertEquals(2048, c.moeIntermediateSize());
        assertEquals(61, c.numHiddenLayers());
        assertEquals(3, c.firstKDenseReplace());
        assertEquals(128, c.numAttentionHeads());
        assertEquals(128, c.numKeyValueHeads());
        assertEquals(1536, c.qLoraRank());
        assertEquals(512, c.kvLoraRank());
        assertEquals(128, c.qkNopeHeadDim());
        assertEquals(64, c.qkRopeHeadDim());
        assertEquals(128, c.vHeadDim());
        assertEquals(256, c.nRoutedExperts());
        assertEquals(1, c.nSharedExperts());
        assertEquals(8, c.numExpertsPerTok());
        assertEquals(8, c.nGroup());
        assertEquals(4, c.topkGroup());
        assertEquals(2.5, c.routedScalingFactor());
        assertEquals(10000.0, c.ropeTheta());
        assertEquals(163840, c.maxPositionEmbeddings());
        assertEquals(1, c.numNextnPredictLayers());
        assertEquals(0, c.bosTokenId());
        assertEquals(List.of(1), c.eosTokenIds());

        RopeScaling r = c.ropeScaling();
        assertEquals(40.0, r.factor());
        assertEquals(32.0, r.betaFast());
        assertEquals(1.0, r.betaSlow());
        assertEquals(1.0, r.mscale());
        assertEquals(1.0, r.mscaleAllDim());
        assertEquals(4096, r.originalMaxPositionEmbeddings());
        assertEquals(128, c.quantization().blockRows());

        assertFalse(c.isMoeLayer(2));
        assertTrue(c.isMoeLayer(3));

        // Published: 671B total in the main model (MTP layer excluded), 37B activated per token.
        long total = WeightLayout.parameters(c);
        long active = WeightLayout.activeParameters(c);
        assertEquals(671e9, total, 671e9 * 0.01);
        assertEquals(37e9, active, 37e9 * 0.03);
        // Exact values, computed independently from the config.
        assertEquals(671_026_419_200L, total);
        assertEquals(37_552_297_472L, active);

        // The MTP layer (model.layers.61.*) is not expected but is ignored, not unexpected.
        assertTrue(WeightLayout.ignored("model.layers.61.eh_proj.weight", c));
        assertFalse(WeightLayout.ignored("model.layers.60.mlp.gate.weight", c));
    }

    @Test
    void sharedExpertWidthAndMoeLayerFrequencyChangeTheLayout() throws Exception {
        // Two shared experts: one fused shared MLP of width 2 * 2048 in each of the 58 MoE layers.
        ModelConfig shared2 = ModelConfig.read(edited("deepseek-v3", root -> root.put("n_shared_experts", 2)));
        assertEquals(673_580_750_336L, WeightLayout.parameters(shared2));
        assertEquals(40_106_628_608L, WeightLayout.activeParameters(shared2));
        WeightLayout.Spec up = WeightLayout.of(shared2).stream()
                .filter(s -> s.name().equals("model.layers.3.mlp.shared_experts.up_proj.weight"))
                .findFirst()
                .orElseThrow();
        assertEquals(4096, up.shape()[0]);

        // moe_layer_freq 2: MoE only in layers >= 3 with an even index (29 of them), dense MLPs elsewhere.
        ModelConfig freq2 = ModelConfig.read(edited("deepseek-v3", root -> root.put("moe_layer_freq", 2)));
        assertFalse(freq2.isMoeLayer(3));
        assertTrue(freq2.isMoeLayer(4));
        assertFalse(freq2.isMoeLayer(59));
        assertEquals(354_236_135_680L, WeightLayout.parameters(freq2));
        assertEquals(37_499_074_816L, WeightLayout.activeParameters(freq2));
    }

    @Test
    void missingRequiredFieldNamesFieldAndFile() throws Exception {
        Path file = edited("kimi-k2-instruct", root -> root.remove("hidden_size"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("hidden_size"), e.getMessage());
        assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    }

    @Test
    void wrongArchitectureNamesArchitectures() throws Exception {
        Path file = edited("deepseek-v3", root -> root.putArray("architectures").add("LlamaForCausalLM"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("architectures"), e.getMessage());
        assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    }

    @Test
    void anArchitecturesEntryThatIsNotAStringIsRefusedNamingIt() throws Exception {
        Path file = edited("deepseek-v3", root -> root.putArray("architectures").add(7));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("architectures"), e.getMessage());
        assertTrue(e.getMessage().contains("must be a list of strings, got the entry 7"), e.getMessage());
        assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    }

    @Test
    void wrongModelTypeNamesModelType() throws Exception {
        Path file = edited("deepseek-v3", root -> root.put("model_type", "llama"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("model_type"), e.getMessage());
    }

    @Test
    void nonIntegerFieldIsRefused() throws Exception {
        Path file = edited("kimi-k2-instruct", root -> root.put("num_hidden_layers", "61"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("num_hidden_layers"), e.getMessage());
    }

    @Test
    void ropeScalingDefaults() throws Exception {
        Path file = edited("kimi-k2-instruct", root -> {
            ObjectNode rope = (ObjectNode) root.get("rope_scaling");
            rope.remove("beta_fast");
            rope.remove("mscale_all_dim");
            rope.remove("beta_slow");
            rope.remove("mscale");
            rope.remove("original_max_position_embeddings");
        });
        RopeScaling r = ModelConfig.read(file).ropeScaling();
        assertEquals(32.0, r.betaFast());
        assertEquals(0.0, r.mscaleAllDim());
        assertEquals(1.0, r.betaSlow());
        assertEquals(1.0, r.mscale());
        assertEquals(4096, r.originalMaxPositionEmbeddings());
        assertEquals(32.0, r.factor());
    }

    @Test
    void ropeScalingAcceptsRopeTypeKeyAndRefusesOthers() throws Exception {
        Path renamed = edited("kimi-k2-instruct", root -> {
            ObjectNode rope = (ObjectNode) root.get("rope_scaling");
            rope.remove("type");
            rope.put("rope_type", "yarn");
        });
        assertEquals("yarn", ModelConfig.read(renamed).ropeScaling().type());

        Path linear = edited("kimi-k2-instruct", root -> ((ObjectNode) root.get("rope_scaling")).put("type", "linear"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(linear));
        assertTrue(e.getMessage().contains("rope_scaling") && e.getMessage().contains("type"), e.getMessage());
    }

    @Test
    void noRopeScalingIsNull() throws Exception {
        Path file = edited("deepseek-v3", root -> root.remove("rope_scaling"));
        assertNull(ModelConfig.read(file).ropeScaling());
    }

    @Test
    void nullQLoraRankMeansPlainQProj() throws Exception {
        Path file = edited("deepseek-v3", root -> root.putNull("q_lora_rank"));
        ModelConfig c = ModelConfig.read(file);
        assertFalse(c.hasQLora());
        assertNull(c.qLoraRank());
        List<String> layer0 = WeightLayout.of(c).stream()
                .map(WeightLayout.Spec::name)
                .filter(n -> n.startsWith("model.layers.0.self_attn."))
                .collect(Collectors.toList());
        assertTrue(layer0.contains("model.layers.0.self_attn.q_proj.weight"), layer0.toString());
        assertFalse(layer0.contains("model.layers.0.self_attn.q_a_proj.weight"), layer0.toString());
        WeightLayout.Spec qProj = WeightLayout.of(c).stream()
                .filter(s -> s.name().equals("model.layers.0.self_attn.q_proj.weight"))
                .findFirst()
                .orElseThrow();
        assertEquals(List.of(128L * 192, 7168L), List.of(qProj.shape()[0], qProj.shape()[1]));
    }

    @Test
    void eosTokenIdAsList() throws Exception {
        Path file = edited(
                "kimi-k2-instruct",
                root -> root.putArray("eos_token_id").add(163585).add(163586));
        assertEquals(List.of(163585, 163586), ModelConfig.read(file).eosTokenIds());
    }

    @Test
    void nGroupMustDivideExperts() throws Exception {
        Path file = edited("deepseek-v3", root -> root.put("n_group", 7));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("n_group"), e.getMessage());
    }

    @Test
    void unsupportedQuantizationNamesField() throws Exception {
        Path file = edited(
                "deepseek-v3", root -> ((ObjectNode) root.get("quantization_config")).put("quant_method", "gptq"));
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(file));
        assertTrue(e.getMessage().contains("quant_method"), e.getMessage());
    }

    @Test
    void missingOrInvalidFile() throws Exception {
        Path missing = tmp.resolve("nope/config.json");
        ConfigException e = assertThrows(ConfigException.class, () -> ModelConfig.read(missing));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());

        Path broken = tmp.resolve("broken.json");
        Files.writeString(broken, "{\"vocab_size\": ");
        e = assertThrows(ConfigException.class, () -> ModelConfig.read(broken));
        assertTrue(e.getMessage().contains(broken.toString()), e.getMessage());

        Path array = tmp.resolve("array.json");
        Files.writeString(array, "[1, 2]");
        e = assertThrows(ConfigException.class, () -> ModelConfig.read(array));
        assertTrue(e.getMessage().contains(array.toString()), e.getMessage());
    }

    @Test
    void generationConfigReadsListAndFallsBackToModelConfig() throws Exception {
        Path dir = Files.createDirectories(tmp.resolve("gen"));
        Files.writeString(
                dir.resolve("generation_config.json"),
                "{\"bos_token_id\": 0, \"eos_token_id\": [1, 2], \"do_sample\": true, \"temperature\": 0.6, \"top_p\": 0.95}");
        ModelConfig model = ModelConfig.read(resource("deepseek-v3"));
        GenerationConfig g = GenerationConfig.forModel(dir, model);
        assertEquals(0, g.bosTokenId());
        assertEquals(List.of(1, 2), g.eosTokenIds());
        assertTrue(g.doSample());
        assertEquals(0.6, g.temperature());
        assertEquals(0.95, g.topP());
        assertNull(g.topK());

        // No generation_config.json: ids come from config.json.
        GenerationConfig fallback = GenerationConfig.forModel(tmp.resolve("empty"), model);
        assertNotNull(fallback);
        assertEquals(0, fallback.bosTokenId());
        assertEquals(List.of(1), fallback.eosTokenIds());
        assertFalse(fallback.doSample());
    }
}
