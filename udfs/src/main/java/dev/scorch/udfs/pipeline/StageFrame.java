package dev.scorch.udfs.pipeline;

import java.util.Arrays;

/**
 * One message between two pipeline stages: a batch's layout (each sequence's token ids, packed end to end) and,
 * from a stage that ran layers, the hidden states [T, hidden] in fp32 it hands on; or the end of the stream.
 * The last stage sends a batch's tokens round to the first (hidden null), which runs the first layers and sends
 * the batch on with its hidden states.
 *
 * @param seq     the batch's number in this stream, 0, 1, ...: a stage checks each frame is the next
 * @param seqLen  [B] tokens of each sequence
 * @param tokens  [T] token ids of all sequences, concatenated
 * @param hidden  [T, hidden] row-major, or null when the frame carries tokens only
 * @param width   hidden size (0 when hidden is null)
 */
public record StageFrame(Kind kind, long seq, int[] seqLen, int[] tokens, float[] hidden, int width) {
    /** A frame's kind, as its byte on the wire. */
    public enum Kind {
        /** A stage's first frame on a connection: who it is, and the ring it belongs to. */
        HELLO(1),
        BATCH(2),
        /** No more batches: each stage passes it on and stops. */
        END(3);

        final int code;

        Kind(int code) {
            this.code = code;
        }

        static Kind of(int code) {
            for (Kind k : values()) {
                if (k.code == code) {
                    return k;
                }
            }
            return null;
        }
    }

    public StageFrame {
        if (kind == Kind.BATCH) {
            long total = 0;
            for (int n : seqLen) {
                if (n < 1) {
                    throw new IllegalArgumentException("a sequence of " + n + " tokens");
                }
                total += n;
            }
            if (total != tokens.length) {
                throw new IllegalArgumentException(
                        "sequence lengths add up to " + total + " but the frame has " + tokens.length + " tokens");
            }
            if (hidden != null && (width < 1 || hidden.length != (long) tokens.length * width)) {
                throw new IllegalArgumentException("hidden states of " + hidden.length + " floats for " + tokens.length
                        + " tokens of width " + width);
            }
            if (hidden == null && width != 0) {
                throw new IllegalArgumentException("width " + width + " without hidden states");
            }
        }
    }

    /** A batch of token ids only (what the last stage sends round to the first). */
    public static StageFrame tokens(long seq, int[] seqLen, int[] tokens) {
        return new StageFrame(Kind.BATCH, seq, seqLen, tokens, null, 0);
    }

    /** A batch with the hidden states [T, width] a stage hands on. */
    public static StageFrame hidden(long seq, int[] seqLen, int[] tokens, float[] hidden, int width) {
        return new StageFrame(Kind.BATCH, seq, seqLen, tokens, hidden, width);
    }

    public static StageFrame end(long seq) {
        return new StageFrame(Kind.END, seq, new int[0], new int[0], null, 0);
    }

    /**
     * A connection's first frame: the sending stage's index (in seq), the ring's size (in width) and the receiving
     * stage's nonce from the address exchange (in tokens, as two ints), which ties the connection to this attempt of
     * the barrier stage.
     */
    public static StageFrame hello(int from, int stages, long nonce) {
        return new StageFrame(
                Kind.HELLO, from, new int[0], new int[] {(int) (nonce >>> 32), (int) nonce}, null, stages);
    }

    /** A HELLO frame's nonce. */
    public long nonce() {
        return ((long) tokens[0] << 32) | (tokens[1] & 0xffffffffL);
    }

    /** T, the batch's tokens. */
    public int numTokens() {
        return tokens.length;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof StageFrame f
                && kind == f.kind
                && seq == f.seq
                && width == f.width
                && Arrays.equals(seqLen, f.seqLen)
                && Arrays.equals(tokens, f.tokens)
                && Arrays.equals(hidden, f.hidden); // compares bits (floatToIntBits), as the wire carries them
    }

    @Override
    public int hashCode() {
        return Long.hashCode(seq) * 31 + Arrays.hashCode(tokens);
    }

    @Override
    public String toString() {
        return kind + " #" + seq + " (" + seqLen.length + " sequences, " + tokens.length + " tokens"
                + (hidden == null ? "" : ", hidden width " + width) + ")";
    }
}
