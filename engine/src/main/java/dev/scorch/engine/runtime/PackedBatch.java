package dev.scorch.engine.runtime;

import java.util.List;

/**
 * Sequences of different lengths packed end to end (varlen): no padding rows are computed, and attention
 * stays causal inside each sequence. Positions are numbered from each sequence's cached length.
 *
 * @param tokens    [T] token ids of all sequences, concatenated (the array may be longer: a kept buffer)
 * @param positions [T] position id of each token (likewise)
 * @param seqStart  first row of each sequence in tokens
 * @param seqLen    tokens of each sequence
 * @param numTokens T, the rows of tokens and positions that belong to the batch
 */
public record PackedBatch(int[] tokens, int[] positions, int[] seqStart, int[] seqLen, int numTokens) {
    private static final Workspace.Slot<Scratch> SCRATCH = new Workspace.Slot<>(Scratch::new);

    /** The arrays a workspace packs its batches into. */
    private static final class Scratch extends Workspace.Buffers {
        private int[] tokens; // [T]
        private int[] positions; // [T]
        private final Workspace.ByLength<int[]> seqStart = new Workspace.ByLength<>(int[]::new); // [B]
        private final Workspace.ByLength<int[]> seqLen = new Workspace.ByLength<>(int[]::new); // [B]

        Scratch(Workspace ws) {
            super(ws);
        }

        PackedBatch pack(List<int[]> sequences, int total) {
            tokens = ints(tokens, total);
            positions = ints(positions, total);
            int b = sequences.size();
            return PackedBatch.pack(sequences, tokens, positions, seqStart.get(b), seqLen.get(b));
        }
    }

    public PackedBatch {
        if (seqStart.length != seqLen.length) {
            throw new IllegalArgumentException(seqStart.length + " sequence starts but " + seqLen.length + " lengths");
        }
        if (numTokens < 0 || numTokens > tokens.length || numTokens > positions.length) {
            throw new IllegalArgumentException(numTokens + " tokens but arrays of " + tokens.length + " ids and "
                    + positions.length + " positions");
        }
    }

    /** A batch whose arrays are exactly as long as it is. */
    public PackedBatch(int[] tokens, int[] positions, int[] seqStart, int[] seqLen) {
        this(tokens, positions, seqStart, seqLen, tokens.length);
    }

    /** The sequences packed into new arrays, positions from 0. */
    public static PackedBatch of(List<int[]> sequences) {
        int b = sequences.size();
        int total = totalTokens(sequences);
        return pack(sequences, new int[total], new int[total], new int[b], new int[b]);
    }

    /**
     * The sequences packed into arrays kept in ws (the batch is valid until ws packs the next one), positions from 0:
     * steady scoring packs its batches without allocating.
     */
    public static PackedBatch of(List<int[]> sequences, Workspace ws) {
        return ws.get(SCRATCH).pack(sequences, totalTokens(sequences));
    }

    private static int totalTokens(List<int[]> sequences) {
        long total = 0;
        for (int s = 0; s < sequences.size(); s++) {
            if (sequences.get(s).length == 0) {
                throw new IllegalArgumentException("sequence " + s + " is empty");
            }
            total += sequences.get(s).length;
        }
        if (total > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(total + " tokens do not fit one batch");
        }
        return (int) total;
    }

    private static PackedBatch pack(List<int[]> sequences, int[] tokens, int[] positions, int[] start, int[] len) {
        int total = 0;
        for (int s = 0; s < sequences.size(); s++) {
            int[] seq = sequences.get(s);
            start[s] = total;
            len[s] = seq.length;
            System.arraycopy(seq, 0, tokens, total, seq.length);
            for (int i = 0; i < seq.length; i++) {
                positions[total + i] = i;
            }
            total += seq.length;
        }
        return new PackedBatch(tokens, positions, start, len, total);
    }

    public int numSequences() {
        return seqLen.length;
    }
}
