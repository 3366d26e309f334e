package dev.scorch.engine.bench;

import dev.scorch.engine.config.ModelConfig;

/**
 * Multiply-add FLOPs one token costs in each part of a DeepseekV3 model, from config.json alone: 2 per weight of every
 * linear the token goes through (norms, biases, SwiGLU and softmax are left out: they are not matmuls), plus
 * attention's 2 × (qk_nope + qk_rope + v_head) per head per key the token attends over. A routed MoE layer costs its
 * top_k experts and shared experts, whatever the expert count; only its router gate [n_routed_experts, hidden] grows
 * with the experts. The benchmark's MFU and its full-model extrapolation are built on these figures.
 */
public final class LayerFlops {
    private LayerFlops() {}

    /** Attention's projections: q (q_a_proj and q_b_proj, or q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj. */
    public static double attentionProjections(ModelConfig c) {
        double hidden = c.hiddenSize();
        double qOut = (double) c.numAttentionHeads() * c.qHeadDim();
        double q = c.hasQLora() ? hidden * c.qLoraRank() + (double) c.qLoraRank() * qOut : hidden * qOut;
        double kvA = hidden * (c.kvLoraRank() + c.qkRopeHeadDim());
        double kvB = (double) c.kvLoraRank() * c.numAttentionHeads() * (c.qkNopeHeadDim() + c.vHeadDim());
        double o = (double) c.numAttentionHeads() * c.vHeadDim() * hidden;
        return 2 * (q + kvA + kvB + o);
    }

    /** Attention over one (query, key) pair: q·k over qk_nope + qk_rope, then p·v over v_head, every head. */
    public static double attentionPerKey(ModelConfig c) {
        return 2.0 * c.numAttentionHeads() * (c.qHeadDim() + c.vHeadDim());
    }

    /** The mean keys a token attends over in a causal prefill of seq tokens: (seq + 1) / 2. */
    public static double meanKeys(int seq) {
        return (seq + 1.0) / 2;
    }

    /** A dense layer's MLP: gate_proj, up_proj, down_proj. */
    public static double denseMlp(ModelConfig c) {
        return 2 * 3.0 * c.hiddenSize() * c.intermediateSize();
    }

    /** A MoE layer's router gate, [n_routed_experts, hidden]: the one part that grows with the expert count. */
    public static double router(ModelConfig c) {
        return 2.0 * c.hiddenSize() * c.nRoutedExperts();
    }

    /** A MoE layer's experts: top_k routed experts and the shared experts, 3 projections of [moe_intermediate, hidden] each. */
    public static double experts(ModelConfig c) {
        return 2 * 3.0 * c.hiddenSize() * c.moeIntermediateSize() * (c.numExpertsPerTok() + c.nSharedExperts());
    }

    /** Layer layer, for a token attending over keys keys. */
    public static double layer(ModelConfig c, int layer, double keys) {
        double attention = attentionProjections(c) + keys * attentionPerKey(c);
        return attention + (c.isMoeLayer(layer) ? router(c) + experts(c) : denseMlp(c));
    }

    /** lm_head for one token's logits (the embedding is a row lookup, the final norm no matmul). */
    public static double head(ModelConfig c) {
        return 2.0 * c.hiddenSize() * c.vocabSize();
    }

    /** The whole model for one prefill token attending over keys keys, its logits included. */
    public static double model(ModelConfig c, double keys) {
        double f = head(c);
        for (int l = 0; l < c.numHiddenLayers(); l++) {
            f += layer(c, l, keys);
        }
        return f;
    }
}
