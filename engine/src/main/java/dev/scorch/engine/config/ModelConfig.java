package dev.scorch.engine.config;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;

/**
 * config.json of a {@code DeepseekV3ForCausalLM} checkpoint (DeepSeek-V3/R1, Kimi K2, Moonlight): every
 * field the forward pass reads, named as in the file. Optional fields take the Hugging Face
 * DeepseekV3Config defaults; a missing required field, an unsupported value or one outside its range (sizes capped by
 * the MAX_ constants, every real number finite and bounded) fails naming the file and the field.
 *
 * <p>A {@code KimiK25ForConditionalGeneration} folder (Kimi K2.5, K2.6: {@code model_type kimi_k25}) wraps the same text
 * model with a vision tower: its fields are read from {@code text_config}, its weights are the checkpoint's under
 * {@link #weightPrefix} ({@code language_model.}), and its quantization_config is the top level's, else text_config's.
 * Scorch runs the text model only; the rest of the engine sees DeepSeek-V3 names.
 *
 * @param architecture the checkpoint's architecture: {@link #ARCHITECTURE} or {@link #K25_ARCHITECTURE}
 * @param weightPrefix what the checkpoint puts before each DeepSeek-V3 tensor name ("" or "language_model.")
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
        QuantizationConfig quantization,
        String architecture,
        String weightPrefix) {

    public static final String ARCHITECTURE = "DeepseekV3ForCausalLM";
    public static final Set<String> MODEL_TYPES = Set.of("deepseek_v3", "kimi_k2");
    /** Kimi K2.5 / K2.6's multimodal wrapper around a DeepSeek-V3 text model. */
    public static final String K25_ARCHITECTURE = "KimiK25ForConditionalGeneration";

    public static final String K25_MODEL_TYPE = "kimi_k25";
    /** Where K2.5's text weights lie in its checkpoint (language_model.model.layers..., language_model.lm_head). */
    public static final String K25_WEIGHT_PREFIX = "language_model.";
    /** The wrapper's other top-level weights, which Scorch ignores (K2.5 scores and generates text only). */
    public static final List<String> K25_IGNORED_PREFIXES = List.of("vision_tower.", "mm_projector.");

    /** q_a_layernorm and kv_a_layernorm use this eps whatever rms_norm_eps says (the reference code hard-codes it). */
    public static final double LORA_NORM_EPS = 1e-6;

    // The largest sizes a config may declare: far above every checkpoint of the family (Kimi K2: 61 layers, 384
    // experts,
    // vocab 163840, hidden 7168, 64 heads; DeepSeek-V3: 128 heads, 163840 positions), and low enough that what the
    // driver
    // and the executors size by them before reading any weight (the expected-tensor list, RoPE tables) stays bounded.
    public static final int MAX_LAYERS = 1024;
    public static final int MAX_EXPERTS = 4096;
    public static final int MAX_SHARED_EXPERTS = 64;
    public static final int MAX_VOCAB = 1 << 21;
    public static final int MAX_HIDDEN = 1 << 16;
    public static final int MAX_INTERMEDIATE = 1 << 18;
    public static final int MAX_HEADS = 1024;
    public static final int MAX_HEAD_DIM = 1024;
    public static final int MAX_LORA_RANK = 1 << 16;
    public static final int MAX_POSITIONS = 1 << 22;
    /** Tensors a config may declare, counted as num_hidden_layers × (16 + 3 n_routed_experts): Kimi K2's count 71,248. */
    public static final long MAX_TENSORS = 1 << 20;

    public static ModelConfig read(Path configJson) {
        return parse(JsonFields.read(configJson));
    }

    static ModelConfig parse(JsonFields top) {
        List<String> topArch = top.stringList("architectures");
        String topType = top.optString("model_type", null);
        if (topArch.contains(K25_ARCHITECTURE) || K25_MODEL_TYPE.equals(topType)) {
            if (!topArch.contains(K25_ARCHITECTURE) || !K25_MODEL_TYPE.equals(topType)) {
                throw top.error(
                        topArch.contains(K25_ARCHITECTURE) ? "model_type" : "architectures",
                        "is "
                                + (topArch.contains(K25_ARCHITECTURE) ? topType : topArch) + "; a " + K25_ARCHITECTURE
                                + " checkpoint has model_type "
                                + K25_MODEL_TYPE);
            }
            if (top.optBool("tie_word_embeddings", false)) {
                throw top.error("tie_word_embeddings", "is true; this family has an untied lm_head");
            }
            JsonFields text = top.object("text_config");
            if (text == null) {
                throw top.error(
                        "text_config",
                        "is required: a " + K25_ARCHITECTURE + " checkpoint's text model is read from it");
            }
            JsonFields quant = top.object("quantization_config");
            return parse(
                    text,
                    quant != null ? quant : text.object("quantization_config"),
                    K25_ARCHITECTURE,
                    K25_MODEL_TYPE,
                    K25_WEIGHT_PREFIX);
        }
        return parse(top, top.object("quantization_config"), ARCHITECTURE, null, "");
    }

    /**
     * The text model's fields in f; for a wrapper (wrapperType not null) f is its text_config, whose architectures and
     * model_type may be absent.
     */
    private static ModelConfig parse(
            JsonFields f, JsonFields quant, String architecture, String wrapperType, String prefix) {
        List<String> arch = f.stringList("architectures");
        String modelType = f.optString("model_type", wrapperType);
        if (!arch.contains(ARCHITECTURE) && !(wrapperType != null && arch.isEmpty())) {
            throw f.error(
                    "architectures",
                    "is " + arch + "; Scorch runs " + ARCHITECTURE + (wrapperType == null ? "" : " text models"));
        }
        if (modelType == null || !MODEL_TYPES.contains(modelType) && !modelType.equals(wrapperType)) {
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
        int vocab = f.intIn("vocab_size", 1, MAX_VOCAB);
        int heads = f.intIn("num_attention_heads", 1, MAX_HEADS);
        int numLayers = f.intIn("num_hidden_layers", 1, MAX_LAYERS);
        int nRouted = f.optIntIn("n_routed_experts", 0, 0, MAX_EXPERTS);
        if ((long) numLayers * (16 + 3L * nRouted) > MAX_TENSORS) {
            throw f.error(
                    nRouted > 0 ? "n_routed_experts" : "num_hidden_layers",
                    "is " + (nRouted > 0 ? nRouted : numLayers)
                            + ": num_hidden_layers " + numLayers + " x n_routed_experts " + nRouted + " declare up to "
                            + (long) numLayers * (16 + 3L * nRouted) + " tensors, more than the " + MAX_TENSORS
                            + " Scorch reads");
        }
        int nGroup = f.optInt("n_group", 1);
        int topkGroup = f.optInt("topk_group", 1);
        int topK = nRouted > 0
                ? f.intIn("num_experts_per_tok", 1, nRouted)
                : f.optIntIn("num_experts_per_tok", 0, 0, MAX_EXPERTS);
        int firstDense = f.optIntIn("first_k_dense_replace", 0, 0, numLayers);
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
        if (qLora != null) {
            f.checkInt("q_lora_rank", qLora, 1, MAX_LORA_RANK);
        }
        boolean moeAnywhere = nRouted > 0;
        int inter = firstDense > 0 || !moeAnywhere
                ? f.intIn("intermediate_size", 1, MAX_INTERMEDIATE)
                : f.optIntIn("intermediate_size", 0, 0, MAX_INTERMEDIATE);
        int moeInter = moeAnywhere
                ? f.intIn("moe_intermediate_size", 1, MAX_INTERMEDIATE)
                : f.optIntIn("moe_intermediate_size", 0, 0, MAX_INTERMEDIATE);
        int nShared = f.optIntIn("n_shared_experts", 0, 0, MAX_SHARED_EXPERTS);
        if ((long) moeInter * nShared > MAX_INTERMEDIATE) {
            throw f.error(
                    "n_shared_experts",
                    "is " + nShared + ": the fused shared experts' width moe_intermediate_size " + moeInter + " x "
                            + nShared + " exceeds " + MAX_INTERMEDIATE);
        }
        int qkRope = f.intIn("qk_rope_head_dim", 1, MAX_HEAD_DIM);
        if (qkRope % 2 != 0) {
            throw f.error("qk_rope_head_dim", "must be even (RoPE rotates pairs of dims), got " + qkRope);
        }
        int maxPositions = f.intIn("max_position_embeddings", 1, MAX_POSITIONS);
        Integer bos = f.nullableInt("bos_token_id");
        if (bos != null) {
            f.checkInt("bos_token_id", bos, 0, vocab - 1);
        }
        List<Integer> eos = f.intOrIntList("eos_token_id");
        for (int id : eos) {
            f.checkInt("eos_token_id", id, 0, vocab - 1);
        }
        JsonFields rope = f.object("rope_scaling");
        boolean tie = f.optBool("tie_word_embeddings", false);
        if (tie) {
            throw f.error("tie_word_embeddings", "is true; this family has an untied lm_head");
        }
        return new ModelConfig(
                modelType,
                List.copyOf(arch),
                vocab,
                f.intIn("hidden_size", 1, MAX_HIDDEN),
                inter,
                moeInter,
                numLayers,
                heads,
                f.optIntIn("num_key_value_heads", heads, 1, MAX_HEADS),
                nShared,
                nRouted,
                f.optDoubleIn("routed_scaling_factor", 1.0, 0, true, 1000, false),
                f.intIn("kv_lora_rank", 1, MAX_LORA_RANK),
                qLora,
                qkRope,
                f.intIn("v_head_dim", 1, MAX_HEAD_DIM),
                f.intIn("qk_nope_head_dim", 1, MAX_HEAD_DIM),
                topkMethod,
                nGroup,
                topkGroup,
                topK,
                f.optIntIn("moe_layer_freq", 1, 1, MAX_LAYERS),
                firstDense,
                f.optBool("norm_topk_prob", false),
                scoring,
                act,
                maxPositions,
                f.doubleIn("rms_norm_eps", 0, true, 1, true),
                f.optDoubleIn("rope_theta", 10000, 1, false, 1e12, false),
                rope == null ? null : RopeScaling.parse(rope),
                tie,
                bos,
                List.copyOf(eos),
                f.optIntIn("num_nextn_predict_layers", 0, 0, MAX_LAYERS),
                f.optString("torch_dtype", "bfloat16"),
                quant == null ? null : QuantizationConfig.parse(quant),
                architecture,
                prefix);
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

    /** Whether linear weights may be F8_E4M3 with block scales (DeepSeek's fp8, or compressed-tensors' FP8 blocks). */
    public boolean isFp8() {
        return quantization != null && quantization.scheme() == QuantizationConfig.Scheme.FP8_BLOCK;
    }

    /** Whether config.json declares compressed-tensors INT4 groups (pack-quantized). */
    public boolean isInt4() {
        return quantization != null && quantization.scheme() == QuantizationConfig.Scheme.INT4_GROUP;
    }

    /** Whether this is K2.5's multimodal wrapper (text weights under {@link #weightPrefix}). */
    public boolean isWrapped() {
        return !weightPrefix.isEmpty();
    }

    /** The checkpoint's name for the text model's tensor {@code name} (its DeepSeek-V3 name). */
    public String checkpointName(String name) {
        return weightPrefix.isEmpty() ? name : weightPrefix + name;
    }
}
