package dev.scorch.engine.gpu;

import dev.scorch.engine.runtime.PackedBatch;

/**
 * A batch as attention sees it, on the device: each token's position, and for the prefill form (over the batch's
 * own tokens) each query's key range (keyStart, keyLen) and the query tiles of the sequences that attend in it (all
 * of them without caches; with caches, those whose cache was empty: the others attend over their caches in the
 * absorbed form).
 */
record AttentionBatch(PackedBatch packed, Buf positions, Buf keyStart, Buf keyLen, Buf tiles, int numTiles) {}
