package dev.scorch.engine.device;

/**
 * A pass's queries in the prefill form ({@link Device#mlaAttention}): query i of t attends keys keyStart[i] ..
 * keyStart[i] + keyLen[i] - 1, and numTiles tiles (first query, queries) say which queries are computed. Built once
 * per pass ({@code Pass.keys}); a pass of the same buffers reuses it.
 *
 * @param t        queries: rows of q [t, heads, q_head_dim] and out [t, heads, v_head]
 * @param keyStart [t] I32
 * @param keyLen   [t] I32
 * @param tiles    [2 · numTiles] I32: in ascending order and apart, at most {@link Device#ATTENTION_TILE} queries each,
 *                 every tile inside one sequence
 * @param numTiles tiles
 */
public record KeyTiles(int t, Buf keyStart, Buf keyLen, Buf tiles, int numTiles) {
    /** Whether k (may be null) holds these very buffers and counts. */
    public static boolean holds(KeyTiles k, int t, Buf keyStart, Buf keyLen, Buf tiles, int numTiles) {
        return k != null
                && k.t == t
                && k.keyStart == keyStart
                && k.keyLen == keyLen
                && k.tiles == tiles
                && k.numTiles == numTiles;
    }
}
