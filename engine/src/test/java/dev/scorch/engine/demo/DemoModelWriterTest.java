package dev.scorch.engine.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.Tensor;
import dev.scorch.engine.checkpoint.TensorInfo;
import dev.scorch.engine.checkpoint.ValidationReport;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.config.ModelConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The demo-model maker: layout, validity, determinism, the FP8 variant and the no-q-LoRA variant. */
class DemoModelWriterTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private Path write(String name, boolean fp8, boolean qLora, long seed) throws Exception {
        Path dir = tmp.resolve(name);
        new DemoModelWriter(DemoPreset.TINY, fp8, qLora, seed).write(dir);
        return dir;
    }

    private static List<String> files(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    @Test
    void tinyPresetWritesAValidShardedCheckpoint() throws Exception {
        Path dir = write("tiny", false, true, 1);
        List<String> names = files(dir);
        List<String> shards =
                names.stream().filter(n -> n.endsWith(".safetensors")).collect(Collectors.toList());
        assertTrue(names.contains("config.json"), names.toString());
        assertTrue(names.contains("generation_config.json"), names.toString());
        assertTrue(names.contains(Checkpoint.INDEX), names.toString());
        assertTrue(shards.size() >= 2, shards.toString());
        for (int i = 1; i <= shards.size(); i++) {
            assertTrue(
                    shards.contains(String.format("model-%05d-of-%05d.safetensors", i, shards.size())),
                    shards.toString());
        }
        assertFalse(names.contains(".partial"), "temporary folder left behind");

        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        DemoPreset p = DemoPreset.TINY;
        assertEquals("kimi_k2", config.modelType());
        assertEquals(p.vocabSize(), config.vocabSize());
        assertEquals(p.hiddenSize(), config.hiddenSize());
        assertEquals(p.numHiddenLayers(), config.numHiddenLayers());
        assertEquals(p.nRoutedExperts(), config.nRoutedExperts());
        assertEquals(p.qLoraRank(), config.qLoraRank());
        assertFalse(config.isFp8());

        Checkpoint ckpt = Checkpoint.open(dir);
        assertEquals(shards.size(), ckpt.shards().size());
        ValidationReport report = CheckpointValidator.validate(config, ckpt);
        assertTrue(report.valid(), report.errors().toString());
        assertEquals(List.of(), report.unexpected());
        List<String> inv = new ArrayList<>();
        for (int i = 0; i < p.numHiddenLayers(); i++) {
            inv.add("model.layers." + i + ".self_attn.rotary_emb.inv_freq");
        }
        assertEquals(
                inv.stream().sorted().toList(),
                report.ignored().stream().sorted().toList());

        // Every expected tensor is BF16 except the router bias (F32); the index's total_size is the sum of tensor
        // bytes.
        long bytes = 0;
        for (String n : ckpt.names()) {
            bytes += ckpt.info(n).byteSize();
        }
        for (WeightLayout.Spec s : WeightLayout.of(config)) {
            DType want = s.kind() == WeightLayout.Kind.ROUTER_BIAS ? DType.F32 : DType.BF16;
            assertEquals(want, ckpt.info(s.name()).dtype(), s.name());
        }
        JsonNode index = JSON.readTree(dir.resolve(Checkpoint.INDEX).toFile());
        assertEquals(bytes, index.get("metadata").get("total_size").asLong());

        // Norm weights are near 1, linear weights near 0 with std 1/sqrt(in).
        float[] norm = ckpt.tensor("model.layers.0.input_layernorm.weight").toFloatArray();
        double mean = 0;
        for (float v : norm) {
            mean += v / norm.length;
        }
        assertEquals(1.0, mean, 0.05);

        GenerationConfig g = GenerationConfig.forModel(dir, config);
        assertEquals(p.vocabSize() - 2, g.bosTokenId());
        assertEquals(List.of(p.vocabSize() - 1), g.eosTokenIds());
    }

    @Test
    void shardingFollowsTheIndex() throws Exception {
        Path dir = write("tiny", false, true, 1);
        JsonNode map = JSON.readTree(dir.resolve(Checkpoint.INDEX).toFile()).get("weight_map");
        Checkpoint ckpt = Checkpoint.open(dir);
        int n = 0;
        for (Iterator<Map.Entry<String, JsonNode>> it = map.fields(); it.hasNext(); n++) {
            Map.Entry<String, JsonNode> e = it.next();
            TensorInfo info = ckpt.info(e.getKey());
            assertEquals(e.getValue().asText(), info.file().getFileName().toString(), e.getKey());
        }
        // Every tensor of every shard is in the index.
        int inShards = ckpt.shards().stream().mapToInt(s -> s.tensors().size()).sum();
        assertEquals(inShards, n);
    }

    @Test
    void sameSeedIsByteIdenticalDifferentSeedIsNot() throws Exception {
        Path a = write("a", false, true, 1234);
        Path b = write("b", false, true, 1234);
        Path c = write("c", false, true, 1235);
        assertEquals(files(a), files(b));
        for (String f : files(a)) {
            assertArrayEquals(Files.readAllBytes(a.resolve(f)), Files.readAllBytes(b.resolve(f)), f);
        }
        assertEquals(files(a), files(c));
        assertArrayEquals(Files.readAllBytes(a.resolve("config.json")), Files.readAllBytes(c.resolve("config.json")));
        int differing = 0;
        for (String f : files(a)) {
            if (f.endsWith(".safetensors")
                    && !java.util.Arrays.equals(Files.readAllBytes(a.resolve(f)), Files.readAllBytes(c.resolve(f)))) {
                differing++;
            }
        }
        assertEquals(
                files(a).stream().filter(f -> f.endsWith(".safetensors")).count(),
                differing,
                "every shard depends on the seed");
        // Same tensor, different seed: different values.
        String t = "model.layers.1.mlp.experts.0.gate_proj.weight";
        assertFalse(java.util.Arrays.equals(
                Checkpoint.open(a).tensor(t).toFloatArray(),
                Checkpoint.open(c).tensor(t).toFloatArray()));
    }

    @Test
    void fp8VariantQuantisesLinearWeightsInBlocks() throws Exception {
        Path fp8Dir = write("fp8", true, true, 7);
        Path bf16Dir = write("bf16", false, true, 7);
        ModelConfig config = ModelConfig.read(fp8Dir.resolve("config.json"));
        assertTrue(config.isFp8());
        assertEquals(128, config.quantization().blockRows());
        assertEquals(128, config.quantization().blockCols());

        Checkpoint fp8 = Checkpoint.open(fp8Dir);
        Checkpoint bf16 = Checkpoint.open(bf16Dir);
        ValidationReport report = CheckpointValidator.validate(config, fp8);
        assertTrue(report.valid(), report.errors().toString());
        assertEquals(List.of(), report.unexpected());

        int linear = 0;
        for (WeightLayout.Spec s : WeightLayout.of(config)) {
            TensorInfo info = fp8.info(s.name());
            if (s.kind() == WeightLayout.Kind.LINEAR) {
                linear++;
                assertEquals(DType.F8_E4M3, info.dtype(), s.name());
                TensorInfo scale = fp8.info(s.scaleName());
                assertEquals(DType.F32, scale.dtype(), s.scaleName());
                long[] want = {(s.shape()[0] + 127) / 128, (s.shape()[1] + 127) / 128};
                assertArrayEquals(want, scale.shape(), s.scaleName());
            } else {
                assertFalse(info.dtype() == DType.F8_E4M3, s.name());
                assertFalse(fp8.has(s.scaleName()), s.scaleName());
            }
        }
        assertTrue(linear > 0);

        // Dense down_proj [192, 320] and q_a_proj [64, 192] have partial blocks; experts' up_proj is [96, 192].
        for (String name : List.of(
                "model.layers.0.mlp.down_proj.weight",
                "model.layers.0.self_attn.q_a_proj.weight",
                "model.layers.2.mlp.experts.5.up_proj.weight",
                "model.layers.1.self_attn.kv_b_proj.weight")) {
            assertCloseToBf16(fp8.tensor(name), fp8.tensor(name + "_scale_inv"), bf16.tensor(name));
        }
        // Tensors that stay BF16 are identical in both.
        assertArrayEquals(
                bf16.tensor("model.embed_tokens.weight").toFloatArray(),
                fp8.tensor("model.embed_tokens.weight").toFloatArray());
    }

    /** Dequantised FP8 agrees with the BF16 demo of the same seed to within FP8 precision. */
    private static void assertCloseToBf16(Tensor w, Tensor scaleInv, Tensor ref) {
        assertArrayEquals(ref.shape(), w.shape());
        int rows = w.dim(0);
        int cols = w.dim(1);
        float[] codes = w.toFloatArray();
        float[] scales = scaleInv.toFloatArray();
        float[] want = ref.toFloatArray();
        int sc = scaleInv.dim(1);
        float[] amax = new float[scales.length];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int b = (r / 128) * sc + c / 128;
                amax[b] = Math.max(amax[b], Math.abs(want[r * cols + c]));
            }
        }
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int b = (r / 128) * sc + c / 128;
                float deq = codes[r * cols + c] * scales[b];
                float x = want[r * cols + c];
                double err = Math.abs(deq - x);
                String where = w.name() + "[" + r + "][" + c + "]: " + deq + " vs " + x;
                assertTrue(err < amax[b] / 16, where);
                // Tighter: half an E4M3 ulp of the value (plus BF16 rounding of the reference), or the subnormal step.
                assertTrue(err <= Math.abs(x) * (1.0 / 16 + 1.0 / 128) + scales[b] * 0x1p-10, where);
            }
        }
    }

    /** k2-layers: Kimi K2's published widths, only the layer and expert counts cut; out-of-range counts refused. */
    @Test
    void k2LayersPresetHasKimiK2Widths() {
        DemoPreset p = DemoPreset.named("k2-layers");
        assertEquals(
                List.of(163840, 7168, 64, 1536, 512, 128, 64, 128, 18432, 2048, 8, 1, 1, 1),
                List.of(
                        p.vocabSize(),
                        p.hiddenSize(),
                        p.numAttentionHeads(),
                        p.qLoraRank(),
                        p.kvLoraRank(),
                        p.qkNopeHeadDim(),
                        p.qkRopeHeadDim(),
                        p.vHeadDim(),
                        p.intermediateSize(),
                        p.moeIntermediateSize(),
                        p.numExpertsPerTok(),
                        p.nSharedExperts(),
                        p.nGroup(),
                        p.topkGroup()));
        assertEquals(List.of(3, 1, 16), List.of(p.numHiddenLayers(), p.firstKDenseReplace(), p.nRoutedExperts()));
        DemoPreset full = DemoPreset.k2Layers(61, 384);
        assertEquals(List.of(61, 384), List.of(full.numHiddenLayers(), full.nRoutedExperts()));
        for (int[] bad : new int[][] {{1, 16}, {62, 16}, {3, 7}, {3, 385}}) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
                    IllegalArgumentException.class, () -> DemoPreset.k2Layers(bad[0], bad[1]));
            assertTrue(e.getMessage().startsWith("k2-layers: --"), e.getMessage());
        }
    }

    /**
     * k2-layers' tokenizer loads (its ids fit the bound a tokenizer file is held to) and takes text; tiny and small keep
     * BOS/EOS at their last two ids, the ids their checkpoints and the README's scores were made with.
     */
    @Test
    void k2LayersTokenizerLoadsAndSmallPresetsKeepTheirIds() throws Exception {
        DemoPreset k2 = DemoPreset.named("k2-layers");
        Path dir = tmp.resolve("k2-tokenizer");
        Files.createDirectories(dir);
        new DemoModelWriter(k2, false, true, 1).writeTokenizer(dir);
        dev.scorch.engine.tokenizer.Tokenizer tok =
                dev.scorch.engine.tokenizer.Tokenizers.load(dir).orElseThrow();
        assertEquals(65_536, tok.bosTokenId());
        assertEquals(List.of(65_537), tok.eosTokenIds());
        int[] ids = tok.encode("The quick brown fox", false);
        assertTrue(ids.length > 0);
        assertEquals("The quick brown fox", tok.decode(ids, true));
        assertEquals(List.of(510, 511), List.of(DemoPreset.TINY.bosTokenId(), DemoPreset.TINY.eosTokenId()));
        assertEquals(List.of(32766, 32767), List.of(DemoPreset.SMALL.bosTokenId(), DemoPreset.SMALL.eosTokenId()));
    }

    @Test
    void withoutQLoraWritesPlainQProj() throws Exception {
        Path dir = write("noqlora", false, false, 1);
        JsonNode cfg = JSON.readTree(dir.resolve("config.json").toFile());
        assertTrue(cfg.has("q_lora_rank"));
        assertTrue(cfg.get("q_lora_rank").isNull());

        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        assertFalse(config.hasQLora());
        Checkpoint ckpt = Checkpoint.open(dir);
        DemoPreset p = DemoPreset.TINY;
        for (int i = 0; i < p.numHiddenLayers(); i++) {
            String a = "model.layers." + i + ".self_attn.";
            assertTrue(ckpt.has(a + "q_proj.weight"));
            assertFalse(ckpt.has(a + "q_a_proj.weight"));
            assertFalse(ckpt.has(a + "q_b_proj.weight"));
            assertFalse(ckpt.has(a + "q_a_layernorm.weight"));
            assertArrayEquals(
                    new long[] {(long) p.numAttentionHeads() * (p.qkNopeHeadDim() + p.qkRopeHeadDim()), p.hiddenSize()},
                    ckpt.info(a + "q_proj.weight").shape());
        }
        ValidationReport report = CheckpointValidator.validate(config, ckpt);
        assertTrue(report.valid(), report.errors().toString());
        assertEquals(List.of(), report.unexpected());
    }

    private Path write(String name, DemoModelWriter.Weights weights, boolean wrap, long seed) throws Exception {
        Path dir = tmp.resolve(name);
        new DemoModelWriter(DemoPreset.TINY, weights, true, wrap, seed).write(dir);
        return dir;
    }

    /**
     * --int4: Kimi-K2-Thinking's quantization_config as published, the routed experts (and only they) as the INT4 triple
     * whose decoding is the BF16 demo's weights to within a quantisation step, deterministic like the other presets.
     */
    @Test
    void int4VariantPacksTheRoutedExpertsOnly() throws Exception {
        Path dir = write("int4", DemoModelWriter.Weights.INT4, false, 7);
        Path bf16Dir = write("bf16", false, true, 7);
        JsonNode q = JSON.readTree(dir.resolve("config.json").toFile()).get("quantization_config");
        assertEquals("compressed-tensors", q.get("quant_method").asText());
        assertEquals("pack-quantized", q.get("format").asText());
        assertEquals("compressed", q.get("quantization_status").asText());
        assertEquals(
                "[\"lm_head\",\"re:.*self_attn.*\",\"re:.*shared_experts.*\",\"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\"]",
                q.get("ignore").toString());
        JsonNode w = q.get("config_groups").get("group_0").get("weights");
        assertEquals(4, w.get("num_bits").asInt());
        assertEquals(32, w.get("group_size").asInt());
        assertEquals("group", w.get("strategy").asText());
        assertTrue(w.get("symmetric").asBoolean());
        assertEquals(
                "[\"Linear\"]",
                q.get("config_groups").get("group_0").get("targets").toString());

        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        assertTrue(config.isInt4());
        assertFalse(config.isFp8());
        Checkpoint ckpt = Checkpoint.open(dir);
        Checkpoint bf16 = Checkpoint.open(bf16Dir);
        ValidationReport report = CheckpointValidator.validate(config, ckpt);
        assertTrue(report.valid(), report.errors().toString());
        assertEquals(List.of(), report.unexpected());
        int experts = 0;
        for (WeightLayout.Spec s : WeightLayout.of(config)) {
            if (s.routedExpert()) {
                experts++;
                assertFalse(ckpt.has(s.name()), s.name());
                assertEquals(DType.I32, ckpt.info(s.name() + "_packed").dtype());
                assertArrayEquals(
                        new long[] {s.shape()[0], s.shape()[1] / 8},
                        ckpt.info(s.name() + "_packed").shape());
                assertEquals(DType.BF16, ckpt.info(s.name() + "_scale").dtype());
                assertArrayEquals(
                        new long[] {s.shape()[0], s.shape()[1] / 32},
                        ckpt.info(s.name() + "_scale").shape());
                assertEquals(DType.I64, ckpt.info(s.name() + "_shape").dtype());
                assertArrayEquals(s.shape(), ckpt.tensor(s.name() + "_shape").toLongArray());
            } else {
                assertFalse(ckpt.has(s.name() + "_packed"), s.name());
                assertArrayEquals(
                        bf16.tensor(s.name()).toFloatArray(),
                        ckpt.tensor(s.name()).toFloatArray(),
                        s.name());
            }
        }
        assertEquals(2 * 8 * 3, experts); // two MoE layers of 8 experts
        // The routed experts decode, nibble by nibble, to the BF16 demo's weights within half a quantisation step (and
        // the
        // BF16 rounding of the reference).
        String e = "model.layers.2.mlp.experts.5.down_proj.weight"; // [192, 96]: three groups a row
        Tensor packed = ckpt.tensor(e + "_packed");
        float[] scales = ckpt.tensor(e + "_scale").toFloatArray();
        float[] ref = bf16.tensor(e).toFloatArray();
        int rows = 192;
        int cols = 96;
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                java.nio.ByteBuffer word =
                        packed.bytes(4L * (r * (cols / 8) + c / 8), 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                int q4 = ((word.getInt(0) >>> (4 * (c % 8))) & 0xF) - 8;
                float scale = scales[r * (cols / 32) + c / 32];
                float x = ref[r * cols + c];
                assertTrue(
                        Math.abs(q4 * scale - x) <= 0.5 * scale + Math.abs(x) * 0x1p-8,
                        e + "[" + r + "][" + c + "]: " + q4 + " x " + scale + " vs " + x);
            }
        }
        Path again = write("int4-again", DemoModelWriter.Weights.INT4, false, 7);
        for (String f : files(dir)) {
            assertArrayEquals(Files.readAllBytes(dir.resolve(f)), Files.readAllBytes(again.resolve(f)), f);
        }
    }

    /**
     * --wrap k25: K2.5's layout around the same tensors, byte for byte: config under text_config with the quantization_config
     * nested, every text tensor under language_model., vision_tower.* and mm_projector.* beside them and ignored.
     */
    @Test
    void k25WrapperHoldsTheSameTextTensorsUnderItsPrefix() throws Exception {
        Path plain = write("int4", DemoModelWriter.Weights.INT4, false, 3);
        Path wrapped = write("int4-k25", DemoModelWriter.Weights.INT4, true, 3);
        JsonNode root = JSON.readTree(wrapped.resolve("config.json").toFile());
        assertEquals(
                "[\"KimiK25ForConditionalGeneration\"]",
                root.get("architectures").toString());
        assertEquals("kimi_k25", root.get("model_type").asText());
        assertFalse(root.has("quantization_config"));
        assertEquals(
                "compressed-tensors",
                root.get("text_config")
                        .get("quantization_config")
                        .get("quant_method")
                        .asText());
        assertEquals(
                DemoPreset.TINY.hiddenSize(),
                root.get("text_config").get("hidden_size").asInt());

        ModelConfig config = ModelConfig.read(wrapped.resolve("config.json"));
        assertEquals("language_model.", config.weightPrefix());
        assertEquals("KimiK25ForConditionalGeneration", config.architecture());
        assertTrue(config.isInt4());
        Checkpoint a = Checkpoint.open(plain);
        Checkpoint b = Checkpoint.open(wrapped);
        int text = 0;
        for (String n : a.names()) {
            text++;
            TensorInfo x = a.info(n);
            TensorInfo y = b.info("language_model." + n);
            assertEquals(x.dtype(), y.dtype(), n);
            assertArrayEquals(x.shape(), y.shape(), n);
            assertEquals(
                    a.tensor(n).bytes(0, (int) x.byteSize()),
                    b.tensor("language_model." + n).bytes(0, (int) y.byteSize()),
                    n);
        }
        List<String> vision = new ArrayList<>();
        b.names().forEach(n -> {
            if (!n.startsWith("language_model.")) {
                vision.add(n);
            }
        });
        assertEquals(text + vision.size(), b.tensorCount());
        assertEquals(7, vision.size(), vision.toString());
        assertTrue(
                vision.stream().allMatch(n -> n.startsWith("vision_tower.") || n.startsWith("mm_projector.")),
                vision.toString());
        ValidationReport report = CheckpointValidator.validate(config, b);
        assertTrue(report.valid(), report.errors().toString());
        assertEquals(List.of(), report.unexpected());
        assertTrue(report.ignored().containsAll(vision), report.ignored().toString());
        assertEquals(
                vision.size() + DemoPreset.TINY.numHiddenLayers(),
                report.ignored().size(),
                report.ignored().toString());
    }

    /** --fp8-ct: compressed-tensors FP8 blocks with weight_scale, every linear but the ignore list's (gate, q_a_proj, kv_a_proj_with_mqa, lm_head). */
    @Test
    void fp8CtVariantQuantisesTheLinearsItsIgnoreListLeaves() throws Exception {
        Path dir = write("fp8ct", DemoModelWriter.Weights.FP8_CT, false, 7);
        Path bf16Dir = write("bf16", false, true, 7);
        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        assertTrue(config.isFp8());
        assertEquals("compressed-tensors", config.quantization().quantMethod());
        Checkpoint ckpt = Checkpoint.open(dir);
        Checkpoint bf16 = Checkpoint.open(bf16Dir);
        ValidationReport report = CheckpointValidator.validate(config, ckpt);
        assertTrue(report.valid(), report.errors().toString());
        assertEquals(List.of(), report.unexpected());
        List<String> plain = new ArrayList<>();
        for (WeightLayout.Spec s : WeightLayout.of(config)) {
            if (ckpt.info(s.name()).dtype() == DType.F8_E4M3) {
                assertFalse(ckpt.has(s.name() + "_scale_inv"));
                assertArrayEquals(
                        new long[] {(s.shape()[0] + 127) / 128, (s.shape()[1] + 127) / 128},
                        ckpt.info(s.name() + "_scale").shape());
            } else if (s.linearClass()) {
                plain.add(s.module().replaceAll("\\.[0-9]+\\.", ".N."));
            }
        }
        assertEquals(
                List.of("model.layers.N.self_attn.q_a_proj", "model.layers.N.self_attn.kv_a_proj_with_mqa", "lm_head"),
                plain.stream().distinct().toList());
        String name = "model.layers.1.self_attn.kv_b_proj.weight";
        assertCloseToBf16(ckpt.tensor(name), ckpt.tensor(name + "_scale"), bf16.tensor(name));
    }

    @Test
    void presetsByName() {
        assertEquals(DemoPreset.TINY, DemoPreset.named("tiny"));
        assertEquals(DemoPreset.SMALL, DemoPreset.named("small"));
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
                IllegalArgumentException.class, () -> DemoPreset.named("huge"));
        assertNotNull(e.getMessage());
    }
}
