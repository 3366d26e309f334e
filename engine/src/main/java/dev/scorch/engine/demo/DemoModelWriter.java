package dev.scorch.engine.demo;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.WeightLayout;
import dev.scorch.engine.tokenizer.BpeTrainer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeMap;

/**
 * Writes a deterministic random-weight checkpoint in the Hugging Face layout of the real Kimi K2 files:
 * config.json (real key set), BF16 (or FP8 E4M3 + 128x128 weight_scale_inv) shards with
 * model.safetensors.index.json, generation_config.json, and a small learned BPE tokenizer. Each tensor's values depend only on the seed and
 * its name, so sharding never changes them.
 */
public final class DemoModelWriter {
  public static final int FP8_BLOCK = 128;
  private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private final DemoPreset preset;
  private final boolean fp8;
  private final boolean qLora;
  private final long seed;

  public DemoModelWriter(DemoPreset preset, boolean fp8, boolean qLora, long seed) {
    this.preset = preset;
    this.fp8 = fp8;
    this.qLora = qLora;
    this.seed = seed;
  }

  public ModelConfig write(Path dir) throws IOException {
    Files.createDirectories(dir);
    ObjectNode cfg = configJson();
    JSON.writeValue(dir.resolve("config.json").toFile(), cfg);
    JSON.writeValue(dir.resolve("generation_config.json").toFile(), generationConfigJson());
    ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
    writeShards(dir, config);
    writeTokenizer(dir);
    return config;
  }

  private void writeShards(Path dir, ModelConfig config) throws IOException {
    int done = 0; // shards written so far
    SafetensorsWriter current = new SafetensorsWriter();
    List<WeightLayout.Spec> specs = WeightLayout.of(config);
    // Kimi K2 files carry each layer's rotary inv_freq buffer, which the model ignores; so do ours.
    List<WeightLayout.Spec> withBuffers = new ArrayList<>();
    for (WeightLayout.Spec s : specs) {
      withBuffers.add(s);
      if (s.name().endsWith("self_attn.kv_a_layernorm.weight")) {
        withBuffers.add(new WeightLayout.Spec(s.name().replace("kv_a_layernorm.weight", "rotary_emb.inv_freq"),
            new long[] {config.qkRopeHeadDim() / 2}, WeightLayout.Kind.NORM, s.layer()));
      }
    }
    TreeMap<String, Integer> shardOf = new TreeMap<>();
    long total = 0;
    Path tmp = dir.resolve(".partial");
    Files.createDirectories(tmp);
    for (WeightLayout.Spec s : withBuffers) {
      if (current.dataBytes() > 0 && current.dataBytes() + s.numel() * 2 > preset.maxShardBytes()) {
        current.write(tmp.resolve("shard-" + ++done));
        current = new SafetensorsWriter();
      }
      total += addTensor(current, s, config);
      for (String n : current.names()) {
        shardOf.put(n, done + 1);
      }
    }
    current.write(tmp.resolve("shard-" + ++done));
    int n = done;
    ObjectNode index = JSON.createObjectNode();
    index.putObject("metadata").put("total_size", total);
    ObjectNode map = index.putObject("weight_map");
    shardOf.forEach((name, i) -> map.put(name, shardName(i, n)));
    for (int i = 1; i <= n; i++) {
      Files.move(tmp.resolve("shard-" + i), dir.resolve(shardName(i, n)), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }
    Files.delete(tmp);
    JSON.writeValue(dir.resolve(Checkpoint.INDEX).toFile(), index);
  }

  /**
   * A small byte-level BPE tokenizer learned from a built-in English text (so the demo model takes text
   * rows): the 256 bytes, the learned merges, and BOS/EOS at the ids config.json names.
   */
  private void writeTokenizer(Path dir) throws IOException {
    String corpus;
    try (var in = DemoModelWriter.class.getResourceAsStream("corpus.txt")) {
      corpus = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    }
    int bos = preset.vocabSize() - 2;
    List<String> merges = BpeTrainer.train(corpus, Math.min(bos - 256, 2000));
    BpeTrainer.write(dir, merges, bos, preset.vocabSize() - 1, "<|bos|>", "<|eos|>");
  }

  static String shardName(int i, int n) {
    return String.format("model-%05d-of-%05d.safetensors", i, n);
  }

  /** Adds one tensor (and its FP8 scales); returns the bytes added. */
  private long addTensor(SafetensorsWriter w, WeightLayout.Spec s, ModelConfig config) {
    SplittableRandom rnd = new SplittableRandom(seed * 0x9E3779B97F4A7C15L ^ s.name().hashCode() * 0xC2B2AE3D27D4EB4FL);
    float[] v = new float[Math.toIntExact(s.numel())];
    long[] shape = s.shape();
    if (s.name().endsWith("rotary_emb.inv_freq")) {
      int half = v.length;
      for (int i = 0; i < half; i++) {
        v[i] = (float) (1.0 / Math.pow(config.ropeTheta(), 2.0 * i / (2 * half)));
      }
      w.addFloats(s.name(), DType.BF16, shape, v);
      return v.length * 2L;
    }
    double std = switch (s.kind()) {
      case EMBEDDING -> 1.0;
      case NORM -> 0.1;
      case LINEAR, ROUTER -> 1.0 / Math.sqrt(shape[1]);
      case ROUTER_BIAS -> 0.05;
      case LM_HEAD -> 2.5 / Math.sqrt(shape[1]);
    };
    double mean = s.kind() == WeightLayout.Kind.NORM ? 1.0 : 0.0;
    for (int i = 0; i < v.length; i++) {
      v[i] = (float) (mean + std * rnd.nextGaussian());
    }
    if (s.kind() == WeightLayout.Kind.ROUTER_BIAS) {
      w.addFloats(s.name(), DType.F32, shape, v);
      return v.length * 4L;
    }
    if (fp8 && s.kind() == WeightLayout.Kind.LINEAR) {
      Fp8Blocks q = Fp8Blocks.quantize(v, (int) shape[0], (int) shape[1], FP8_BLOCK, FP8_BLOCK);
      w.add(s.name(), DType.F8_E4M3, shape, q.codes());
      w.addFloats(s.scaleName(), DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
      return v.length + q.scaleInv().length * 4L;
    }
    w.addFloats(s.name(), DType.BF16, shape, v);
    return v.length * 2L;
  }

  private ObjectNode configJson() {
    DemoPreset p = preset;
    ObjectNode c = JSON.createObjectNode();
    c.putArray("architectures").add(ModelConfig.ARCHITECTURE);
    c.put("attention_bias", false);
    c.put("attention_dropout", 0.0);
    ObjectNode autoMap = c.putObject("auto_map");
    autoMap.put("AutoConfig", "configuration_deepseek.DeepseekV3Config");
    autoMap.put("AutoModel", "modeling_deepseek.DeepseekV3Model");
    autoMap.put("AutoModelForCausalLM", "modeling_deepseek.DeepseekV3ForCausalLM");
    c.put("aux_loss_alpha", 0.001);
    c.put("bos_token_id", p.vocabSize() - 2);
    c.put("eos_token_id", p.vocabSize() - 1);
    c.put("first_k_dense_replace", p.firstKDenseReplace());
    c.put("hidden_act", "silu");
    c.put("hidden_size", p.hiddenSize());
    c.put("initializer_range", 0.02);
    c.put("intermediate_size", p.intermediateSize());
    c.put("kv_lora_rank", p.kvLoraRank());
    c.put("max_position_embeddings", p.maxPositionEmbeddings());
    c.put("model_type", "kimi_k2");
    c.put("moe_intermediate_size", p.moeIntermediateSize());
    c.put("moe_layer_freq", 1);
    c.put("n_group", p.nGroup());
    c.put("n_routed_experts", p.nRoutedExperts());
    c.put("n_shared_experts", p.nSharedExperts());
    c.put("norm_topk_prob", true);
    c.put("num_attention_heads", p.numAttentionHeads());
    c.put("num_experts_per_tok", p.numExpertsPerTok());
    c.put("num_hidden_layers", p.numHiddenLayers());
    c.put("num_key_value_heads", p.numAttentionHeads());
    c.put("num_nextn_predict_layers", 0);
    c.put("pretraining_tp", 1);
    if (qLora) {
      c.put("q_lora_rank", p.qLoraRank());
    } else {
      c.putNull("q_lora_rank");
    }
    c.put("qk_nope_head_dim", p.qkNopeHeadDim());
    c.put("qk_rope_head_dim", p.qkRopeHeadDim());
    if (fp8) {
      ObjectNode q = c.putObject("quantization_config");
      q.put("activation_scheme", "dynamic");
      q.put("fmt", "e4m3");
      q.put("quant_method", "fp8");
      q.putArray("weight_block_size").add(FP8_BLOCK).add(FP8_BLOCK);
    }
    c.put("rms_norm_eps", 1e-6);
    c.put("rope_theta", 50000.0);
    c.put("routed_scaling_factor", 2.827);
    ObjectNode rope = c.putObject("rope_scaling");
    rope.put("beta_fast", 1.0);
    rope.put("beta_slow", 1.0);
    rope.put("factor", p.ropeFactor());
    rope.put("mscale", 1.0);
    rope.put("mscale_all_dim", 1.0);
    rope.put("original_max_position_embeddings", p.originalMaxPositionEmbeddings());
    rope.put("type", "yarn");
    c.put("scoring_func", "sigmoid");
    c.put("seq_aux", true);
    c.put("tie_word_embeddings", false);
    c.put("topk_group", p.topkGroup());
    c.put("topk_method", "noaux_tc");
    c.put("torch_dtype", "bfloat16");
    c.put("transformers_version", "4.48.3");
    c.put("use_cache", true);
    c.put("v_head_dim", p.vHeadDim());
    c.put("vocab_size", p.vocabSize());
    return c;
  }

  private ObjectNode generationConfigJson() {
    ObjectNode g = JSON.createObjectNode();
    g.put("_from_model_config", true);
    g.put("bos_token_id", preset.vocabSize() - 2);
    g.put("eos_token_id", preset.vocabSize() - 1);
    g.put("do_sample", false);
    return g;
  }
}
