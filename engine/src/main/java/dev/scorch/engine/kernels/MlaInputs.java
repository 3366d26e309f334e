package dev.scorch.engine.kernels;

/**
 * Multi-head latent attention operands for a packed batch of sequences (prefill form, kv_b_proj applied).
 *
 * @param q     [T, heads, qk_nope + qk_rope] queries, rope part already rotated
 * @param kv    [T, heads, qk_nope + v_head] kv_b_proj output: per-head k_nope then v
 * @param kPe   [T, qk_rope] the rotary key, one head shared by all heads, already rotated
 * @param seqStart first packed row of each sequence
 * @param seqLen   rows of each sequence; attention is causal inside a sequence and never crosses one
 */
public record MlaInputs(
    float[] q, float[] kv, float[] kPe, int heads, int qkNope, int qkRope, int vHead, int[] seqStart, int[] seqLen, float scale) {

  public int qHead() {
    return qkNope + qkRope;
  }

  public int kvHead() {
    return qkNope + vHead;
  }
}
