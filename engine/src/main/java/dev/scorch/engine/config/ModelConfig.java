package dev.scorch.engine.config;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;

/**
 * config.json of a {@code DeepseekV3ForCausalLM} checkpoint (DeepSeek-V3/R1, Kimi K2, Moonlight): every
 * field the forward pass reads, named as in the file. Optional fields take the Hugging Face
 * DeepseekV3Config defaults; a missing required field or an unsupported value fails naming the field.
 */
public record ModelConfig(
    String modelType,
    List<String> architectures,
    int vocabSize,
    int hiddenSize,
    int intermediateSize,
    int moeIntermediateSize,
    int numHiddenLayers,
    int numAttentionHeads,
    int numKeyValueHeads,
    int nSharedExperts,
    int nRoutedExperts,
    double routedScalingFactor,
    int kvLoraRank,
    Integer qLoraRank,
    int qkRopeHeadDim,
    int vHeadDim,
    int qkNopeHeadDim,
    String topkMethod,
    int nGroup,
    int topkGroup,
    int numExpertsPerTok,
    int moeLayerFreq,
    int firstKDenseReplace,
    boolean normTopkProb,
    String scoringFunc,
    String hiddenAct,
    int maxPositionEmbeddings,
    double rmsNormEps,
    double ropeTheta,
    RopeScaling ropeScaling,
    boolean tieWordEmbeddings,
    Integer bosTokenId,
    List<Integer> eosTokenIds,
    int numNextnPredictLayers,
    String torchDtype,
    QuantizationConfig quantization) {

  public static final String ARCHITECTURE = "DeepseekV3ForCausalLM";
  public static final Set<String> MODEL_TYPES = Set.of("deepseek_v3", "kimi_k2");

  /** q_a_layernorm and kv_a_layernorm use this eps whatever rms_norm_eps says (the reference code hard-codes it). */
  public static final double LORA_NORM_EPS = 1e-6;

  public static ModelConfig read(Path configJson) {
    return parse(JsonFields.read(configJson));
  }

  static ModelConfig parse(JsonFields f) {
    List<String> arch = f.stringList("architectures");
    String modelType = f.optString("model_type", null);
    if (!arch.contains(ARCHITECTURE)) {
      throw f.error("architectures", "is " + arch + "; Scorch runs " + ARCHITECTURE);
    }
    if (modelType == null || !MODEL_TYPES.contains(modelType)) {
      throw f.error("model_type", "is " + modelType + "; expected one of " + MODEL_TYPES);
    }
    String scoring = f.optString("scoring_func", "sigmoid");
    if (!scoring.equals("sigmoid")) {
      throw f.error("scoring_func", "is " + scoring + "; only sigmoid routing is supported");
    }
    String act = f.optString("hidden_act", "silu");
    if (!act.equals("silu")) {
      throw f.error("hidden_act", "is " + act + "; only silu is supported");
    }
    if (f.optBool("attention_bias", false)) {
      throw f.error("attention_bias", "is true; biased attention projections are not supported");
    }
    String topkMethod = f.optString("topk_method", "noaux_tc");
    if (!topkMethod.equals("noaux_tc")) {
      throw f.error("topk_method", "is " + topkMethod + "; only noaux_tc is supported");
    }
    int heads = f.positiveInt("num_attention_heads");
    int nRouted = f.optInt("n_routed_experts", 0);
    int nGroup = f.optInt("n_group", 1);
    int topkGroup = f.optInt("topk_group", 1);
    int topK = nRouted > 0 ? f.positiveInt("num_experts_per_tok") : f.optInt("num_experts_per_tok", 0);
    int numLayers = f.positiveInt("num_hidden_layers");
    int firstDense = f.optInt("first_k_dense_replace", 0);
    if (nRouted > 0) {
      if (nGroup <= 0 || nRouted % nGroup != 0) {
        throw f.error("n_group", "must divide n_routed_experts " + nRouted + ", got " + nGroup);
      }
      if (topkGroup <= 0 || topkGroup > nGroup) {
        throw f.error("topk_group", "must be in [1, n_group " + nGroup + "], got " + topkGroup);
      }
      if (topK > topkGroup * (nRouted / nGroup)) {
        throw f.error("num_experts_per_tok", "exceeds the experts in topk_group groups");
      }
    }
    Integer qLora = f.present("q_lora_rank") ? f.nullableInt("q_lora_rank") : Integer.valueOf(1536);
    if (qLora != null && qLora <= 0) {
      throw f.error("q_lora_rank", "must be positive or null, got " + qLora);
    }
    JsonFields rope = f.object("rope_scaling");
    JsonFields quant = f.object("quantization_config");
    boolean tie = f.optBool("tie_word_embeddings", false);
    if (tie) {
      throw f.error("tie_word_embeddings", "is true; this family has an untied lm_head");
    }
    return new ModelConfig(
        modelType,
        List.copyOf(arch),
        f.positiveInt("vocab_size"),
        f.positiveInt("hidden_size"),
        firstDense > 0 || nRouted == 0 ? f.positiveInt("intermediate_size") : f.optInt("intermediate_size", 0),
        nRouted > 0 ? f.positiveInt("moe_intermediate_size") : f.optInt("moe_intermediate_size", 0),
        numLayers,
        heads,
        f.optInt("num_key_value_heads", heads),
        f.optInt("n_shared_experts", 0),
        nRouted,
        f.optDouble("routed_scaling_factor", 1.0),
        f.positiveInt("kv_lora_rank"),
        qLora,
        f.positiveInt("qk_rope_head_dim"),
        f.positiveInt("v_head_dim"),
        f.positiveInt("qk_nope_head_dim"),
        topkMethod,
        nGroup,
        topkGroup,
        topK,
        Math.max(1, f.optInt("moe_layer_freq", 1)),
        firstDense,
        f.optBool("norm_topk_prob", false),
        scoring,
        act,
        f.positiveInt("max_position_embeddings"),
        f.requiredDouble("rms_norm_eps"),
        f.optDouble("rope_theta", 10000),
        rope == null ? null : RopeScaling.parse(rope),
        tie,
        f.nullableInt("bos_token_id"),
        List.copyOf(f.intOrIntList("eos_token_id")),
        f.optInt("num_nextn_predict_layers", 0),
        f.optString("torch_dtype", "bfloat16"),
        quant == null ? null : QuantizationConfig.parse(quant));
  }

  public boolean hasQLora() {
    return qLoraRank != null;
  }

  /** qk_nope_head_dim + qk_rope_head_dim: the per-head query/key width. */
  public int qHeadDim() {
    return qkNopeHeadDim + qkRopeHeadDim;
  }

  /** Whether block {@code layer} uses the MoE (else the dense SwiGLU MLP), as the reference code decides. */
  public boolean isMoeLayer(int layer) {
    return nRoutedExperts > 0 && layer >= firstKDenseReplace && layer % moeLayerFreq == 0;
  }

  public boolean isFp8() {
    return quantization != null;
  }
}
