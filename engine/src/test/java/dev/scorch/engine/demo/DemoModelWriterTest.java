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
import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.WeightLayout;
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

  @TempDir Path tmp;

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
    List<String> shards = names.stream().filter(n -> n.endsWith(".safetensors")).collect(Collectors.toList());
    assertTrue(names.contains("config.json"), names.toString());
    assertTrue(names.contains("generation_config.json"), names.toString());
    assertTrue(names.contains(Checkpoint.INDEX), names.toString());
    assertTrue(shards.size() >= 2, shards.toString());
    for (int i = 1; i <= shards.size(); i++) {
      assertTrue(shards.contains(String.format("model-%05d-of-%05d.safetensors", i, shards.size())), shards.toString());
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
    assertEquals(inv.stream().sorted().toList(), report.ignored().stream().sorted().toList());

    // Every expected tensor is BF16 except the router bias (F32); the index's total_size is the sum of tensor bytes.
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
      if (f.endsWith(".safetensors") && !java.util.Arrays.equals(Files.readAllBytes(a.resolve(f)), Files.readAllBytes(c.resolve(f)))) {
        differing++;
      }
    }
    assertEquals(files(a).stream().filter(f -> f.endsWith(".safetensors")).count(), differing, "every shard depends on the seed");
    // Same tensor, different seed: different values.
    String t = "model.layers.1.mlp.experts.0.gate_proj.weight";
    assertFalse(java.util.Arrays.equals(Checkpoint.open(a).tensor(t).toFloatArray(), Checkpoint.open(c).tensor(t).toFloatArray()));
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
    for (String name : List.of("model.layers.0.mlp.down_proj.weight", "model.layers.0.self_attn.q_a_proj.weight",
        "model.layers.2.mlp.experts.5.up_proj.weight", "model.layers.1.self_attn.kv_b_proj.weight")) {
      assertCloseToBf16(fp8.tensor(name), fp8.tensor(name + "_scale_inv"), bf16.tensor(name));
    }
    // Tensors that stay BF16 are identical in both.
    assertArrayEquals(bf16.tensor("model.embed_tokens.weight").toFloatArray(), fp8.tensor("model.embed_tokens.weight").toFloatArray());
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
      assertArrayEquals(new long[] {(long) p.numAttentionHeads() * (p.qkNopeHeadDim() + p.qkRopeHeadDim()), p.hiddenSize()},
          ckpt.info(a + "q_proj.weight").shape());
    }
    ValidationReport report = CheckpointValidator.validate(config, ckpt);
    assertTrue(report.valid(), report.errors().toString());
    assertEquals(List.of(), report.unexpected());
  }

  @Test
  void presetsByName() {
    assertEquals(DemoPreset.TINY, DemoPreset.named("tiny"));
    assertEquals(DemoPreset.SMALL, DemoPreset.named("small"));
    IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> DemoPreset.named("huge"));
    assertNotNull(e.getMessage());
  }
}
