package dev.scorch.engine.kernels;

/**
 * Multi-head latent attention operands for a packed batch of sequences (prefill form, kv_b_proj applied).
 *
 * @param q     [T, heads, qk_nope + qk_rope] queries, rope part already rotated
 * @param kv    [rows, heads, qk_nope + v_head] kv_b_proj output: per-head k_nope then v, row 0 = packed row kvRow0
 * @param kPe   [T, qk_rope] the rotary key, one head shared by all heads, already rotated
 * @param seqStart first packed row of each sequence
 * @param seqLen   rows of each sequence; attention is causal inside a sequence and never crosses one
 * @param kvRow0   the packed row kv starts at: kv may hold only the rows of the sequences attended
 */
public record MlaInputs(
        float[] q,
        float[] kv,
        float[] kPe,
        int heads,
        int qkNope,
        int qkRope,
        int vHead,
        int[] seqStart,
        int[] seqLen,
        float scale,
        int kvRow0) {

    public int qHead() {
        return qkNope + qkRope;
    }

    public int kvHead() {
        return qkNope + vHead;
    }

    /** Where packed row's head h starts in kv: its k_nope, then (at + qk_nope) its v. */
    public int kvOffset(int row, int h) {
        return ((row - kvRow0) * heads + h) * kvHead();
    }
}
