package dev.scorch.engine.demo;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.tokenizer.BpeTrainer;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeMap;

/**
 * Writes a deterministic random-weight checkpoint in the Hugging Face layout of the real Kimi K2 files:
 * config.json (real key set), shards with model.safetensors.index.json, generation_config.json, and a small learned BPE
 * tokenizer. Weights: BF16; or DeepSeek's FP8 (F8_E4M3 + 128x128 weight_scale_inv); or Kimi-K2-Thinking's INT4 (routed
 * experts in compressed-tensors pack-quantized groups of 32: weight_packed I32, weight_scale BF16, weight_shape I64, the
 * rest BF16, under the quantization_config and ignore list Kimi publishes); or FP8 blocks in compressed-tensors
 * (float-quantized, weight + weight_scale, as llm-compressor's FP8_BLOCK exports of K2 are). Which linears are
 * quantized is what the written quantization_config says. With wrapK25 the same text model is wrapped as Kimi K2.5
 * publishes it: {@code KimiK25ForConditionalGeneration}, its config under text_config, its tensors under
 * {@code language_model.}, and a few small vision_tower / mm_projector tensors (random, never read) beside them. Each
 * tensor's values depend only on the seed and its text-model name, so sharding and wrapping never change them.
 */
public final class DemoModelWriter {
    public static final int FP8_BLOCK = 128;
    /** Kimi-K2-Thinking's INT4 group size. */
    public static final int INT4_GROUP = 32;

    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    /** How the linear weights are stored. */
    public enum Weights {
        BF16,
        /** DeepSeek's quant_method fp8: every linear F8_E4M3 with weight_scale_inv per 128x128 block. */
        FP8,
        /** compressed-tensors pack-quantized INT4, group 32, routed experts only (Kimi-K2-Thinking's ignore list). */
        INT4,
        /** compressed-tensors float-quantized FP8, 128x128 blocks, weight_scale (llm-compressor's FP8_BLOCK scheme). */
        FP8_CT
    }

    private final DemoPreset preset;
    private final Weights weights;
    private final boolean qLora;
    private final boolean wrapK25;
    private final long seed;

    public DemoModelWriter(DemoPreset preset, boolean fp8, boolean qLora, long seed) {
        this(preset, fp8 ? Weights.FP8 : Weights.BF16, qLora, false, seed);
    }

    public DemoModelWriter(DemoPreset preset, Weights weights, boolean qLora, boolean wrapK25, long seed) {
        this.preset = preset;
        this.weights = weights;
        this.qLora = qLora;
        this.wrapK25 = wrapK25;
        this.seed = seed;
    }

    /** Writes the folder; returns its config.json as Scorch reads it (the text model's, for a wrapper). */
    public ModelConfig write(Path dir) throws IOException {
        Files.createDirectories(dir);
        ObjectNode cfg = wrapK25 ? wrapperJson(configJson()) : configJson();
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
                withBuffers.add(new WeightLayout.Spec(
                        s.name().replace("kv_a_layernorm.weight", "rotary_emb.inv_freq"),
                        new long[] {config.qkRopeHeadDim() / 2},
                        WeightLayout.Kind.NORM,
                        s.layer()));
            }
        }
        if (wrapK25) {
            withBuffers.addAll(visionSpecs(config));
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
            Files.move(
                    tmp.resolve("shard-" + i),
                    dir.resolve(shardName(i, n)),
                    java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
        Files.delete(tmp);
        JSON.writeValue(dir.resolve(Checkpoint.INDEX).toFile(), index);
    }

    /**
     * A small byte-level BPE tokenizer learned from a built-in English text (so the demo model takes text
     * rows): the 256 bytes, the learned merges, and BOS/EOS at the ids config.json names.
     */
    void writeTokenizer(Path dir) throws IOException {
        String corpus;
        try (var in = DemoModelWriter.class.getResourceAsStream("corpus.txt")) {
            corpus = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        }
        int bos = preset.bosTokenId();
        List<String> merges = BpeTrainer.train(corpus, Math.min(bos - 256, 2000));
        BpeTrainer.write(dir, merges, bos, preset.eosTokenId(), "<|bos|>", "<|eos|>");
    }

    static String shardName(int i, int n) {
        return String.format("model-%05d-of-%05d.safetensors", i, n);
    }

    /**
     * The wrapper's vision tower and projector, a few small random tensors named as K2.5's (vision_tower.*, mm_projector.*):
     * Scorch must ignore them. Layer -2 marks them (they are written under their own names, never the text prefix).
     */
    private static List<WeightLayout.Spec> visionSpecs(ModelConfig c) {
        int vt = 32;
        return List.of(
                new WeightLayout.Spec(
                        "vision_tower.patch_embed.proj.weight",
                        new long[] {vt, 3, 14, 14},
                        WeightLayout.Kind.LINEAR,
                        -2),
                new WeightLayout.Spec(
                        "vision_tower.encoder.blocks.0.wqkv.weight",
                        new long[] {3 * vt, vt},
                        WeightLayout.Kind.LINEAR,
                        -2),
                new WeightLayout.Spec(
                        "vision_tower.encoder.blocks.0.wo.weight", new long[] {vt, vt}, WeightLayout.Kind.LINEAR, -2),
                new WeightLayout.Spec(
                        "vision_tower.encoder.final_layernorm.weight", new long[] {vt}, WeightLayout.Kind.NORM, -2),
                new WeightLayout.Spec("mm_projector.pre_norm.weight", new long[] {vt}, WeightLayout.Kind.NORM, -2),
                new WeightLayout.Spec(
                        "mm_projector.proj.0.weight", new long[] {4L * vt, 4L * vt}, WeightLayout.Kind.LINEAR, -2),
                new WeightLayout.Spec(
                        "mm_projector.proj.2.weight",
                        new long[] {c.hiddenSize(), 4L * vt},
                        WeightLayout.Kind.LINEAR,
                        -2));
    }

    /** Adds one tensor (and its FP8 scales, or its INT4 triple); returns the bytes added. */
    private long addTensor(SafetensorsWriter w, WeightLayout.Spec s, ModelConfig config) {
        long tensorSeed = seed * 0x9E3779B97F4A7C15L ^ s.name().hashCode() * 0xC2B2AE3D27D4EB4FL;
        long[] shape = s.shape();
        boolean vision = s.layer() == -2;
        String name = vision ? s.name() : config.checkpointName(s.name());
        if (s.numel() > STREAMED_ELEMENTS
                && (s.kind() == WeightLayout.Kind.EMBEDDING || s.kind() == WeightLayout.Kind.LM_HEAD)) {
            return addStreamed(
                    w,
                    name,
                    shape,
                    s.numel(),
                    tensorSeed,
                    s.kind() == WeightLayout.Kind.EMBEDDING ? 1.0 : 2.5 / Math.sqrt(shape[1]));
        }
        SplittableRandom rnd = new SplittableRandom(tensorSeed);
        float[] v = new float[Math.toIntExact(s.numel())];
        if (s.name().endsWith("rotary_emb.inv_freq")) {
            int half = v.length;
            for (int i = 0; i < half; i++) {
                v[i] = (float) (1.0 / Math.pow(config.ropeTheta(), 2.0 * i / (2 * half)));
            }
            w.addFloats(name, DType.BF16, shape, v);
            return v.length * 2L;
        }
        double std = switch (s.kind()) {
            case EMBEDDING -> 1.0;
            case NORM -> 0.1;
            case LINEAR, ROUTER -> 1.0 / Math.sqrt(shape[shape.length - 1]);
            case ROUTER_BIAS -> 0.05;
            case LM_HEAD -> 2.5 / Math.sqrt(shape[1]);
        };
        double mean = s.kind() == WeightLayout.Kind.NORM ? 1.0 : 0.0;
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) (mean + std * rnd.nextGaussian());
        }
        if (s.kind() == WeightLayout.Kind.ROUTER_BIAS) {
            w.addFloats(name, DType.F32, shape, v);
            return v.length * 4L;
        }
        QuantizationConfig q = config.quantization();
        boolean ctQuantized = !vision && q != null && q.quantizes(config.checkpointName(s.module()), s.linearClass());
        int rows = (int) shape[0];
        int cols = shape.length == 2 ? (int) shape[1] : 0;
        if (weights == Weights.FP8 && s.kind() == WeightLayout.Kind.LINEAR && !vision) {
            Fp8Blocks b = Fp8Blocks.quantize(v, rows, cols, FP8_BLOCK, FP8_BLOCK);
            w.add(name, DType.F8_E4M3, shape, b.codes());
            w.addFloats(name + "_scale_inv", DType.F32, new long[] {b.scaleRows(), b.scaleCols()}, b.scaleInv());
            return v.length + b.scaleInv().length * 4L;
        }
        if (weights == Weights.FP8_CT && ctQuantized) {
            Fp8Blocks b = Fp8Blocks.quantize(v, rows, cols, FP8_BLOCK, FP8_BLOCK);
            w.add(name, DType.F8_E4M3, shape, b.codes());
            w.addFloats(name + WeightLayout.SCALE, DType.BF16, new long[] {b.scaleRows(), b.scaleCols()}, b.scaleInv());
            return v.length + b.scaleInv().length * 2L;
        }
        if (weights == Weights.INT4 && ctQuantized) {
            Int4Groups g = Int4Groups.quantize(v, rows, cols, INT4_GROUP);
            byte[] packed = g.packedBytes();
            w.add(name + WeightLayout.PACKED, DType.I32, new long[] {rows, (cols + 7) / 8}, packed);
            w.addFloats(
                    name + WeightLayout.SCALE,
                    DType.BF16,
                    new long[] {rows, (cols + INT4_GROUP - 1) / INT4_GROUP},
                    g.scales());
            ByteBuffer dims = ByteBuffer.allocate(16)
                    .order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(rows)
                    .putLong(cols);
            w.add(name + WeightLayout.SHAPE, DType.I64, new long[] {2}, dims.array());
            return packed.length + g.scales().length * 2L + 16;
        }
        w.addFloats(name, DType.BF16, shape, v);
        return v.length * 2L;
    }

    /**
     * Tables above this many elements (the k2-layers embedding and lm_head, 1.17 G each; never a tiny or small tensor, so
     * their bytes stay as they were) are made in chunks while their shard is written, several chunks at a time across
     * the cores, each chunk from its own seed: the same seed still writes the same bytes.
     */
    static final long STREAMED_ELEMENTS = 1L << 26;

    private static final int STREAM_CHUNK = 1 << 22; // elements

    /** A BF16 table of N(0, std²) values written in chunks as its shard is written; returns its bytes. */
    private static long addStreamed(
            SafetensorsWriter w, String name, long[] shape, long numel, long tensorSeed, double std) {
        long chunks = (numel + STREAM_CHUNK - 1) / STREAM_CHUNK;
        int parallel = Math.max(1, Runtime.getRuntime().availableProcessors());
        w.addStreamed(name, DType.BF16, shape, out -> {
            for (long c0 = 0; c0 < chunks; c0 += parallel) {
                long first = c0;
                List<byte[]> made = java.util.stream.LongStream.range(first, Math.min(chunks, first + parallel))
                        .parallel()
                        .mapToObj(c -> {
                            SplittableRandom r = new SplittableRandom(tensorSeed + c * 0xD1B54A32D192ED03L);
                            float[] v = new float[(int) Math.min(STREAM_CHUNK, numel - c * STREAM_CHUNK)];
                            for (int i = 0; i < v.length; i++) {
                                v[i] = (float) (std * r.nextGaussian());
                            }
                            return SafetensorsWriter.encode(DType.BF16, v);
                        })
                        .toList();
                for (byte[] b : made) {
                    out.write(b);
                }
            }
        });
        return numel * 2;
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
        c.put("bos_token_id", p.bosTokenId());
        c.put("eos_token_id", p.eosTokenId());
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
        switch (weights) {
            case FP8 -> {
                ObjectNode q = c.putObject("quantization_config");
                q.put("activation_scheme", "dynamic");
                q.put("fmt", "e4m3");
                q.put("quant_method", "fp8");
                q.putArray("weight_block_size").add(FP8_BLOCK).add(FP8_BLOCK);
            }
            case INT4 -> c.set("quantization_config", int4QuantizationConfig());
            case FP8_CT -> c.set("quantization_config", fp8CtQuantizationConfig());
            case BF16 -> {}
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

    /**
     * Kimi-K2-Thinking's quantization_config as published (a transcription of its config.json; K2.5 nests the same under
     * text_config with lm_head, vision_tower and mm_projector in its ignore list, written here for wrapK25).
     */
    private ObjectNode int4QuantizationConfig() {
        ObjectNode q = JSON.createObjectNode();
        ObjectNode g = q.putObject("config_groups").putObject("group_0");
        g.putNull("input_activations");
        g.putNull("output_activations");
        g.putArray("targets").add("Linear");
        ObjectNode wt = g.putObject("weights");
        wt.putNull("actorder");
        wt.putNull("block_structure");
        wt.put("dynamic", false);
        wt.put("group_size", INT4_GROUP);
        wt.put("num_bits", 4);
        wt.put("observer", "minmax");
        wt.putObject("observer_kwargs");
        wt.put("strategy", "group");
        wt.put("symmetric", true);
        wt.put("type", "int");
        q.put("format", QuantizationConfig.PACK_QUANTIZED);
        ArrayNode ignore = q.putArray("ignore");
        if (wrapK25) {
            ignore.add("re:.*self_attn.*")
                    .add("re:.*shared_experts.*")
                    .add("re:.*mlp\\.(gate|up|gate_up|down)_proj.*")
                    .add("re:.*lm_head.*")
                    .add("re:vision_tower.*")
                    .add("re:mm_projector.*");
        } else {
            ignore.add("lm_head")
                    .add("re:.*self_attn.*")
                    .add("re:.*shared_experts.*")
                    .add("re:.*mlp\\.(gate|up|gate_up|down)_proj.*");
        }
        q.putNull("kv_cache_scheme");
        q.put("quant_method", QuantizationConfig.COMPRESSED_TENSORS);
        q.put("quantization_status", "compressed");
        return q;
    }

    /**
     * llm-compressor's FP8_BLOCK scheme (128x128 weight blocks, dynamic per-group FP8 activations) with the ignore list of
     * its Kimi-K2-Thinking example (for wrapK25: of RedHatAI's Kimi-K2.6-FP8-BLOCK script).
     */
    private ObjectNode fp8CtQuantizationConfig() {
        ObjectNode q = JSON.createObjectNode();
        ObjectNode g = q.putObject("config_groups").putObject("group_0");
        g.put("format", QuantizationConfig.FLOAT_QUANTIZED);
        ObjectNode in = g.putObject("input_activations");
        in.putNull("actorder");
        in.putNull("block_structure");
        in.put("dynamic", true);
        in.put("group_size", FP8_BLOCK);
        in.put("num_bits", 8);
        in.putNull("observer");
        in.putObject("observer_kwargs");
        in.put("strategy", "group");
        in.put("symmetric", true);
        in.put("type", "float");
        g.putNull("output_activations");
        g.putArray("targets").add("Linear");
        ObjectNode wt = g.putObject("weights");
        wt.putNull("actorder");
        wt.putArray("block_structure").add(FP8_BLOCK).add(FP8_BLOCK);
        wt.put("dynamic", false);
        wt.putNull("group_size");
        wt.put("num_bits", 8);
        wt.put("observer", "static_minmax");
        wt.putObject("observer_kwargs");
        wt.put("strategy", "block");
        wt.put("symmetric", true);
        wt.put("type", "float");
        q.put("format", QuantizationConfig.FLOAT_QUANTIZED);
        ArrayNode ignore = q.putArray("ignore");
        if (wrapK25) {
            ignore.add("re:.*mlp.gate$")
                    .add("re:.*lm_head")
                    .add("re:.*kv_a_proj_with_mqa$")
                    .add("re:.*q_a_proj$")
                    .add("re:.*vision_tower.*")
                    .add("re:.*embed_tokens$")
                    .add("re:.*norm$")
                    .add("re:.*mm_projector.*")
                    .add("re:.*vision.*");
        } else {
            ignore.add("re:.*gate$")
                    .add("lm_head")
                    .add("re:.*kv_a_proj_with_mqa$")
                    .add("re:.*q_a_proj$")
                    .add("model.embed_tokens");
        }
        q.putNull("kv_cache_scheme");
        q.put("quant_method", QuantizationConfig.COMPRESSED_TENSORS);
        q.put("quantization_status", "compressed");
        return q;
    }

    /**
     * K2.5's config.json around the text model's: KimiK25ForConditionalGeneration, the text config (and its
     * quantization_config) under text_config, a vision_config Scorch never reads (small made-up sizes).
     */
    private ObjectNode wrapperJson(ObjectNode text) {
        DemoPreset p = preset;
        ObjectNode c = JSON.createObjectNode();
        c.putArray("architectures").add(ModelConfig.K25_ARCHITECTURE);
        ObjectNode autoMap = c.putObject("auto_map");
        autoMap.put("AutoConfig", "configuration_kimi_k25.KimiK25Config");
        autoMap.put("AutoModel", "modeling_kimi_k25.KimiK25ForConditionalGeneration");
        autoMap.put("AutoModelForCausalLM", "modeling_kimi_k25.KimiK25ForConditionalGeneration");
        c.put("bos_token_id", p.bosTokenId());
        c.put("eos_token_id", p.eosTokenId());
        c.put("ignore_index", -100);
        c.put("media_placeholder_token_id", p.vocabSize() - 3);
        c.put("model_type", ModelConfig.K25_MODEL_TYPE);
        c.put("pad_token_id", 0);
        text.remove("auto_map");
        text.remove("architectures");
        c.set("text_config", text);
        c.put("tie_word_embeddings", false);
        c.put("transformers_version", "4.57.1");
        c.put("use_unified_vision_chunk", true);
        c.put("video_placeholder", "<|kimi_k25_video_placeholder|>");
        ObjectNode v = c.putObject("vision_config");
        v.put("init_pos_emb_height", 64);
        v.put("init_pos_emb_width", 64);
        v.put("merge_kernel_size", 2);
        v.put("mm_hidden_size", 32);
        v.put("mm_projector_type", "patchmerger");
        v.put("patch_size", 14);
        v.put("text_hidden_size", p.hiddenSize());
        v.put("vt_hidden_size", 32);
        v.put("vt_intermediate_size", 64);
        v.put("vt_num_attention_heads", 2);
        v.put("vt_num_hidden_layers", 1);
        return c;
    }

    private ObjectNode generationConfigJson() {
        ObjectNode g = JSON.createObjectNode();
        g.put("_from_model_config", true);
        g.put("bos_token_id", preset.bosTokenId());
        g.put("eos_token_id", preset.eosTokenId());
        g.put("do_sample", false);
        return g;
    }
}
