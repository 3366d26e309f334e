package dev.scorch.engine.gpu;

import dev.scorch.engine.runtime.PackedBatch;

/**
 * A batch as attention sees it, on the device: each token's position and the YaRN cos/sin table; for the prefill form
 * (over the batch's own tokens) each query's key range (keyStart, keyLen) and the query tiles of the sequences that
 * attend in it (all of them without caches; with caches, those whose cache was empty); the sequences that attend over
 * their caches in the absorbed form (cachedSeqs, each holding past[s] tokens before this pass; past null without
 * caches); and which rows are decode rows.
 */
record AttentionBatch(
        PackedBatch packed,
        Buf positions,
        Buf keyStart,
        Buf keyLen,
        Buf tiles,
        int numTiles,
        Buf cosSin,
        int[] cachedSeqs,
        int[] past,
        DecodeRows rows) {}
