package dev.scorch.engine.device;

import dev.scorch.engine.runtime.PackedBatch;
import java.util.Arrays;

/**
 * Which rows of a forward pass are decode rows: tokens of a sequence that extends a non-empty KV cache. On the CPU a
 * decode row's GEMMs take {@code CpuOps.matmulDecode} and every other row (scoring, a prompt into an empty cache)
 * {@code CpuOps.matmul}, which round differently; the choice depends only on the row's own sequence, so a row's bits
 * never depend on its batch mates: a decode step gives the same bits alone, batched, or packed with another
 * sequence's prefill, and prefill keeps scoring's bits.
 */
public final class DecodeRows {
    /** Every row a prefill row: scoring, and prefill into empty caches. */
    public static final DecodeRows NONE = new DecodeRows(null, false);

    /** Every row a decode row. */
    public static final DecodeRows ALL = new DecodeRows(null, true);

    private final boolean[] decode; // [rows]; null when every row takes the same path
    private final boolean all;

    private DecodeRows(boolean[] decode, boolean all) {
        this.decode = decode;
        this.all = all;
    }

    /** The rows of batch: those of sequences whose cache held past[s] &gt; 0 tokens before this pass (past may be null). */
    public static DecodeRows of(PackedBatch batch, int[] past) {
        return of(batch, past, null);
    }

    /**
     * As {@link #of(PackedBatch, int[])}, but for the sequences whose cache {@link LatentCache#extendsAsPrefill}: their
     * rows are prefill rows (caches may be null).
     */
    public static DecodeRows of(PackedBatch batch, int[] past, LatentCache[] caches) {
        if (past == null) {
            return NONE;
        }
        int n = batch.numSequences();
        int cached = 0;
        for (int s = 0; s < n; s++) {
            cached += isDecode(s, past, caches) ? 1 : 0;
        }
        if (cached == 0 || cached == n) {
            return cached == 0 ? NONE : ALL;
        }
        boolean[] d = new boolean[batch.numTokens()];
        for (int s = 0; s < n; s++) {
            if (isDecode(s, past, caches)) {
                Arrays.fill(d, batch.seqStart()[s], batch.seqStart()[s] + batch.seqLen()[s], true);
            }
        }
        return new DecodeRows(d, false);
    }

    private static boolean isDecode(int s, int[] past, LatentCache[] caches) {
        return past[s] > 0 && (caches == null || !caches[s].extendsAsPrefill());
    }

    /** True when every row is a decode row. */
    public boolean allDecode() {
        return decode == null && all;
    }

    /** True when no row is a decode row. */
    public boolean noDecode() {
        return decode == null && !all;
    }

    /** Whether row i is a decode row. */
    public boolean decode(int i) {
        return decode == null ? all : decode[i];
    }

    /** The same choice for the rows [from, to) (a chunk of a long batch). */
    public DecodeRows range(int from, int to) {
        return decode == null
                ? this
                : rows(java.util.stream.IntStream.range(from, to).toArray(), to - from);
    }

    /** The same choice for the sub-batch of rows[0 .. n) (for example the tokens routed to one expert). */
    public DecodeRows rows(int[] rows, int n) {
        if (decode == null) {
            return this;
        }
        boolean[] d = new boolean[n];
        int count = 0;
        for (int j = 0; j < n; j++) {
            d[j] = decode[rows[j]];
            count += d[j] ? 1 : 0;
        }
        return count == 0 ? NONE : count == n ? ALL : new DecodeRows(d, false);
    }
}
