package dev.scorch.engine.device;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Rope;

/**
 * The shape of multi-head latent attention, as config.json names it: the same in every layer, built once per layer
 * ({@code MlaAttention}) and passed to the attention kernels whole.
 *
 * @param heads      num_attention_heads
 * @param qLoraRank  q_lora_rank; 0 where it is null (q_proj in place of q_a_proj and q_b_proj)
 * @param qkNope     qk_nope_head_dim
 * @param qkRope     qk_rope_head_dim
 * @param vHead      v_head_dim
 * @param kvLoraRank kv_lora_rank
 * @param scale      the softmax scale ({@link Rope#softmaxScale})
 */
public record MlaShape(int heads, int qLoraRank, int qkNope, int qkRope, int vHead, int kvLoraRank, float scale) {
    public static MlaShape of(ModelConfig c) {
        return new MlaShape(
                c.numAttentionHeads(),
                c.hasQLora() ? c.qLoraRank() : 0,
                c.qkNopeHeadDim(),
                c.qkRopeHeadDim(),
                c.vHeadDim(),
                c.kvLoraRank(),
                Rope.softmaxScale(c));
    }

    /** q_head_dim: a query head [q_nope | q_pe]. */
    public int qHead() {
        return qkNope + qkRope;
    }

    /** A head of kv_b_proj's output [k_nope | v]. */
    public int kvHead() {
        return qkNope + vHead;
    }

    /** kv_a_proj_with_mqa's output [latent | k_pe]: a row of the latent cache. */
    public int kvAWidth() {
        return kvLoraRank + qkRope;
    }

    /** The query's low-rank projection ahead of kv_a's in the stacked projection: q_lora_rank, or q_proj's heads · q_head_dim. */
    public int qOut() {
        return qLoraRank > 0 ? qLoraRank : heads * qHead();
    }
}
