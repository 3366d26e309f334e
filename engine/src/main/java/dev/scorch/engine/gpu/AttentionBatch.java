package dev.scorch.engine.gpu;

import dev.scorch.engine.runtime.PackedBatch;

/**
 * A batch as attention sees it, on the device: each token's position, each query's key range (keyStart, keyLen),
 * the query tiles, and where each sequence's keys start among all keys (the batch's own tokens, or every cached
 * token of each sequence).
 */
record AttentionBatch(
        PackedBatch packed,
        Buf positions,
        Buf keyStart,
        Buf keyLen,
        Buf tiles,
        int numTiles,
        int keys,
        int[] keyOffset) {}
