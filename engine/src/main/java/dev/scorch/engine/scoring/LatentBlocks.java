package dev.scorch.engine.scoring;

import dev.scorch.engine.model.KvCache;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The latent KV cache of token prefixes, kept in blocks across batches: a tree whose root is the empty prefix and
 * whose every node is a block of tokens after its parent's, holding only its own tokens' rows ([layer][tokens × width],
 * latent after kv_a_layernorm then rotated k_pe). A prefix's cache is its blocks' rows laid end to end. The blocks of
 * least recent use are dropped, with the blocks under them, once the kept rows pass the byte budget.
 */
final class LatentBlocks {
    /** A block of tokens [start, end) after its parent's. */
    static final class Block {
        final Block parent;
        final int start;
        final int end;
        final int depth;
        private final Map<Segment, Block> children = new HashMap<>();
        private final Segment key; // its tokens, as its parent's children map holds it
        float[][] rows; // [layer][(end - start) * width]; null until computed
        long lastUse;

        private Block(Block parent, Segment key, int start, int end) {
            this.parent = parent;
            this.key = key;
            this.start = start;
            this.end = end;
            this.depth = parent == null ? -1 : parent.depth + 1;
        }

        /** Its tokens (not to be changed). */
        int[] tokens() {
            return key.tokens();
        }

        boolean isRoot() {
            return parent == null;
        }
    }

    /** A block's tokens as a map key: equal when the tokens are. */
    private record Segment(int[] tokens, int hash) {
        static Segment of(int[] all, int from, int to) {
            int[] t = Arrays.copyOfRange(all, from, to);
            return new Segment(t, Arrays.hashCode(t));
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Segment s && hash == s.hash && Arrays.equals(tokens, s.tokens);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    private final int layers;
    private final int width;
    private final long budgetBytes;
    private final Block root = new Block(null, null, 0, 0);
    private long keptBytes;
    private long clock;

    LatentBlocks(int layers, int width, long budgetBytes) {
        this.layers = layers;
        this.width = width;
        this.budgetBytes = budgetBytes;
    }

    Block root() {
        return root;
    }

    /** The child of parent holding tokens [parent.end, end) of all, made (not yet computed) when new. */
    Block child(Block parent, int[] all, int end) {
        Segment key = Segment.of(all, parent.end, end);
        Block b = parent.children.get(key);
        if (b == null) {
            b = new Block(parent, key, parent.end, end);
            parent.children.put(key, b);
        }
        return b;
    }

    /** Marks block and its ancestors as used now (the last to be dropped). */
    void touch(Block block) {
        long now = ++clock;
        for (Block b = block; b != null; b = b.parent) {
            b.lastUse = now;
        }
    }

    /** Appends the rows of block's ancestors and of block itself (root first) to cache, which must be empty. */
    void fill(KvCache cache, Block block) {
        List<Block> path = new ArrayList<>();
        for (Block b = block; !b.isRoot(); b = b.parent) {
            path.add(b);
        }
        cache.reserve(block.end);
        for (int i = path.size() - 1; i >= 0; i--) {
            Block b = path.get(i);
            for (int l = 0; l < layers; l++) {
                System.arraycopy(b.rows[l], 0, cache.rows(l), b.start * width, (b.end - b.start) * width);
            }
        }
        cache.advance(block.end);
    }

    /** Keeps block's own rows out of cache, which holds at least its end. */
    void keep(Block block, KvCache cache) {
        int n = block.end - block.start;
        float[][] rows = new float[layers][];
        for (int l = 0; l < layers; l++) {
            rows[l] = Arrays.copyOfRange(cache.rows(l), block.start * width, block.end * width);
        }
        block.rows = rows;
        keptBytes += (long) n * layers * width * Float.BYTES;
    }

    /** Drops blocks of least recent use, and everything under them, until the kept rows fit the budget. */
    void trim() {
        if (keptBytes <= budgetBytes) {
            return;
        }
        List<Block> all = new ArrayList<>();
        collect(root, all);
        all.sort((a, b) -> Long.compare(a.lastUse, b.lastUse));
        for (Block b : all) {
            if (keptBytes <= budgetBytes) {
                return;
            }
            if (b.parent.children.get(b.key) == b) { // not dropped already with an ancestor
                b.parent.children.remove(b.key);
                drop(b);
            }
        }
    }

    private static void collect(Block b, List<Block> into) {
        for (Block c : b.children.values()) {
            into.add(c);
            collect(c, into);
        }
    }

    private void drop(Block b) {
        if (b.rows != null) {
            keptBytes -= (long) (b.end - b.start) * layers * width * Float.BYTES;
            b.rows = null;
        }
        for (Block c : b.children.values()) {
            drop(c);
        }
        b.children.clear();
    }

    /** Bytes of rows kept now. */
    long keptBytes() {
        return keptBytes;
    }
}
