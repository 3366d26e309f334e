package dev.scorch.engine.checkpoint;

import dev.scorch.engine.config.ModelConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * Every tensor a DeepseekV3ForCausalLM checkpoint holds for a given config, by its Hugging Face name and
 * shape. The validator checks a checkpoint against it, the demo-model maker writes it, inspect counts it.
 */
public final class WeightLayout {

    /** What a tensor is, which decides its dtype in a checkpoint: FP8 checkpoints quantise only LINEAR. */
    public enum Kind {
        EMBEDDING,
        NORM,
        LINEAR,
        ROUTER,
        ROUTER_BIAS,
        LM_HEAD
    }

    public record Spec(String name, long[] shape, Kind kind, int layer) {
        public long numel() {
            return TensorInfo.numel(shape);
        }

        /** For a LINEAR [out, in] weight: the name of its FP8 block-scale tensor (DeepSeek's weight_scale_inv). */
        public String scaleName() {
            return name + "_scale_inv";
        }

        /** The module this tensor is a parameter of (its name without ".weight"), as compressed-tensors matches it. */
        public String module() {
            return name.endsWith(".weight") ? name.substring(0, name.length() - ".weight".length()) : name;
        }

        /** Whether the module is an nn.Linear in the reference code (compressed-tensors' {@code Linear} target). */
        public boolean linearClass() {
            return kind == Kind.LINEAR || kind == Kind.LM_HEAD;
        }

        /** What inspect groups it under: embedding, attention, dense MLP, router, routed experts, shared experts, lm_head; null for norms and the router bias. */
        public String group() {
            return switch (kind) {
                case EMBEDDING -> "embedding";
                case LM_HEAD -> "lm_head";
                case ROUTER -> "router";
                case NORM, ROUTER_BIAS -> null;
                case LINEAR ->
                    name.contains(".self_attn.")
                            ? "attention"
                            : routedExpert()
                                    ? "routed experts"
                                    : name.contains(".mlp.shared_experts.") ? "shared experts" : "dense MLP";
            };
        }

        /** Whether this tensor belongs to one routed expert (counted once per chosen expert in active parameters). */
        public boolean routedExpert() {
            return name.contains(".mlp.experts.");
        }
    }

    private WeightLayout() {}

    public static String layer(int i) {
        return "model.layers." + i + ".";
    }

    public static List<Spec> of(ModelConfig c) {
        List<Spec> out = new ArrayList<>();
        long hidden = c.hiddenSize();
        out.add(new Spec("model.embed_tokens.weight", new long[] {c.vocabSize(), hidden}, Kind.EMBEDDING, -1));
        for (int i = 0; i < c.numHiddenLayers(); i++) {
            String p = layer(i);
            out.add(new Spec(p + "input_layernorm.weight", new long[] {hidden}, Kind.NORM, i));
            String a = p + "self_attn.";
            long qOut = (long) c.numAttentionHeads() * c.qHeadDim();
            if (c.hasQLora()) {
                out.add(new Spec(a + "q_a_proj.weight", new long[] {c.qLoraRank(), hidden}, Kind.LINEAR, i));
                out.add(new Spec(a + "q_a_layernorm.weight", new long[] {c.qLoraRank()}, Kind.NORM, i));
                out.add(new Spec(a + "q_b_proj.weight", new long[] {qOut, c.qLoraRank()}, Kind.LINEAR, i));
            } else {
                out.add(new Spec(a + "q_proj.weight", new long[] {qOut, hidden}, Kind.LINEAR, i));
            }
            out.add(new Spec(
                    a + "kv_a_proj_with_mqa.weight",
                    new long[] {c.kvLoraRank() + c.qkRopeHeadDim(), hidden},
                    Kind.LINEAR,
                    i));
            out.add(new Spec(a + "kv_a_layernorm.weight", new long[] {c.kvLoraRank()}, Kind.NORM, i));
            out.add(new Spec(
                    a + "kv_b_proj.weight",
                    new long[] {(long) c.numAttentionHeads() * (c.qkNopeHeadDim() + c.vHeadDim()), c.kvLoraRank()},
                    Kind.LINEAR,
                    i));
            out.add(new Spec(
                    a + "o_proj.weight",
                    new long[] {hidden, (long) c.numAttentionHeads() * c.vHeadDim()},
                    Kind.LINEAR,
                    i));
            out.add(new Spec(p + "post_attention_layernorm.weight", new long[] {hidden}, Kind.NORM, i));
            String m = p + "mlp.";
            if (c.isMoeLayer(i)) {
                out.add(new Spec(m + "gate.weight", new long[] {c.nRoutedExperts(), hidden}, Kind.ROUTER, i));
                out.add(new Spec(
                        m + "gate.e_score_correction_bias", new long[] {c.nRoutedExperts()}, Kind.ROUTER_BIAS, i));
                for (int e = 0; e < c.nRoutedExperts(); e++) {
                    mlp(out, m + "experts." + e + ".", hidden, c.moeIntermediateSize(), i);
                }
                if (c.nSharedExperts() > 0) {
                    mlp(out, m + "shared_experts.", hidden, (long) c.moeIntermediateSize() * c.nSharedExperts(), i);
                }
            } else {
                mlp(out, m, hidden, c.intermediateSize(), i);
            }
        }
        out.add(new Spec("model.norm.weight", new long[] {hidden}, Kind.NORM, -1));
        out.add(new Spec("lm_head.weight", new long[] {c.vocabSize(), hidden}, Kind.LM_HEAD, -1));
        return out;
    }

    private static void mlp(List<Spec> out, String prefix, long hidden, long inter, int layer) {
        out.add(new Spec(prefix + "gate_proj.weight", new long[] {inter, hidden}, Kind.LINEAR, layer));
        out.add(new Spec(prefix + "up_proj.weight", new long[] {inter, hidden}, Kind.LINEAR, layer));
        out.add(new Spec(prefix + "down_proj.weight", new long[] {hidden, inter}, Kind.LINEAR, layer));
    }

    /** compressed-tensors' INT4 triple: X.weight is stored as X.weight_packed, X.weight_scale and X.weight_shape. */
    public static final String PACKED = "_packed";

    public static final String SCALE = "_scale";
    public static final String SHAPE = "_shape";

    /** Tensors a checkpoint may carry that the model ignores: Kimi's rotary inv_freq buffers and DeepSeek-V3's MTP layers. */
    public static boolean ignored(String name, ModelConfig c) {
        if (name.endsWith(".rotary_emb.inv_freq")) {
            return true;
        }
        if (name.startsWith("model.layers.")) {
            int dot = name.indexOf('.', "model.layers.".length());
            if (dot > 0) {
                try {
                    int layer = Integer.parseInt(name.substring("model.layers.".length(), dot));
                    return layer >= c.numHiddenLayers();
                } catch (NumberFormatException e) {
                    return false;
                }
            }
        }
        return false;
    }

    /**
     * How many tensors {@link #of} lists for c, counted without listing them: a checkpoint must hold at least as many, so
     * the validator compares the two before it makes the list (a config can declare far more than any file holds).
     */
    public static long count(ModelConfig c) {
        long n = 3; // embed_tokens, norm, lm_head
        for (int i = 0; i < c.numHiddenLayers(); i++) {
            n += 2 + (c.hasQLora() ? 3 : 1) + 4; // the two norms, q, kv_a, kv_a_layernorm, kv_b, o
            n += c.isMoeLayer(i) ? 2 + 3L * c.nRoutedExperts() + (c.nSharedExperts() > 0 ? 3 : 0) : 3;
        }
        return n;
    }

    /** All parameters the forward pass uses (embedding and lm_head included; FP8 scales and ignored tensors not). */
    public static long parameters(ModelConfig c) {
        long n = 0;
        for (int i = 0; i < c.numHiddenLayers(); i++) {
            n += layerParameters(c, i) + routedParameters(c, i);
        }
        return n + outerParameters(c);
    }

    /** Parameters one token touches: all but the routed experts it is not sent to (num_experts_per_tok of n_routed_experts). */
    public static long activeParameters(ModelConfig c) {
        long total = outerParameters(c);
        long routed = 0;
        for (int i = 0; i < c.numHiddenLayers(); i++) {
            total += layerParameters(c, i);
            routed += routedParameters(c, i);
        }
        return c.nRoutedExperts() == 0 ? total : total + routed / c.nRoutedExperts() * c.numExpertsPerTok();
    }

    // Sums of the shapes {@link #of} lists, computed without listing them.

    /** embed_tokens, the final norm and lm_head. */
    private static long outerParameters(ModelConfig c) {
        return 2L * c.vocabSize() * c.hiddenSize() + c.hiddenSize();
    }

    /** Block i's tensors but its routed experts'. */
    private static long layerParameters(ModelConfig c, int i) {
        long hidden = c.hiddenSize();
        long heads = c.numAttentionHeads();
        long qOut = heads * c.qHeadDim();
        long n = 2 * hidden; // input_layernorm, post_attention_layernorm
        n += c.hasQLora() ? (long) c.qLoraRank() * hidden + c.qLoraRank() + qOut * c.qLoraRank() : qOut * hidden;
        n += (long) (c.kvLoraRank() + c.qkRopeHeadDim()) * hidden + c.kvLoraRank();
        n += heads * (c.qkNopeHeadDim() + c.vHeadDim()) * c.kvLoraRank() + hidden * heads * c.vHeadDim();
        if (!c.isMoeLayer(i)) {
            return n + 3 * hidden * c.intermediateSize();
        }
        n += (long) c.nRoutedExperts() * hidden + c.nRoutedExperts(); // gate weight and e_score_correction_bias
        return n + (c.nSharedExperts() > 0 ? 3 * hidden * c.moeIntermediateSize() * c.nSharedExperts() : 0);
    }

    /** Block i's routed experts. */
    private static long routedParameters(ModelConfig c, int i) {
        return c.isMoeLayer(i) ? 3L * c.nRoutedExperts() * c.moeIntermediateSize() * c.hiddenSize() : 0;
    }
}
