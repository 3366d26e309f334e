package dev.scorch.engine.device;

/**
 * Where a pass's rows sit and the RoPE angles there ({@link Device#rope}, {@link Device#rmsNormRope}): row r rotates by
 * the angles of position positions[r]. Built once per pass ({@code Pass.positions});
 * a pass of the same buffers reuses it.
 *
 * @param positions [rows] I32
 * @param cosSin    [positions, qk_rope_head_dim], cos and sin interleaved ({@code Rope.table})
 */
public record Rotary(Buf positions, Buf cosSin) {
    /** Whether r (may be null) holds these very buffers. */
    public static boolean holds(Rotary r, Buf positions, Buf cosSin) {
        return r != null && r.positions == positions && r.cosSin == cosSin;
    }
}
