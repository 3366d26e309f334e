package dev.scorch.udfs.pipeline;

import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.List;

/**
 * The last stage's scorer: each batch's token ids go round the ring to the first stage, its hidden states come back
 * through the other stages, and the last stage's layers, model.norm, lm_head and log-softmax score it here. One
 * batch is in flight at a time. With no ring (a pipeline of one stage) it scores alone.
 */
final class PipelineScorer implements BatchScorer {
    private final StageRing ring; // null for a single stage
    private final StageEngine engine;
    private long seq;

    PipelineScorer(StageRing ring, StageEngine engine) {
        this.ring = ring;
        this.engine = engine;
    }

    @Override
    public void score(List<ScoreRequest> requests, BatchScores into) {
        int[] seqLen = new int[requests.size()];
        int total = 0;
        for (int s = 0; s < seqLen.length; s++) {
            seqLen[s] = requests.get(s).tokens().length;
            total += seqLen[s];
        }
        int[] tokens = new int[total];
        for (int s = 0, at = 0; s < seqLen.length; at += seqLen[s++]) {
            System.arraycopy(requests.get(s).tokens(), 0, tokens, at, seqLen[s]);
        }
        PackedBatch batch = pack(seqLen, tokens);
        float[] in = null;
        if (ring != null) {
            try {
                ring.down().send(StageFrame.tokens(seq, seqLen, tokens));
                StageFrame back = ring.up().receive();
                if (back.kind() != StageFrame.Kind.BATCH
                        || back.seq() != seq
                        || back.hidden() == null
                        || !Arrays.equals(back.seqLen(), seqLen)
                        || !Arrays.equals(back.tokens(), tokens)) {
                    throw new IOException("the last stage sent batch #" + seq + " round and got " + back + " from "
                            + ring.up().peer() + ": not the same batch with hidden states");
                }
                in = back.hidden();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        engine.score(requests, batch, in, into);
        seq++;
    }

    /** Tells the other stages the stream has ended and waits for the end to come round: every stage is done. */
    void finish() {
        if (ring == null) {
            return;
        }
        try {
            ring.down().send(StageFrame.end(seq));
            StageFrame back = ring.up().receive();
            if (back.kind() != StageFrame.Kind.END || back.seq() != seq) {
                throw new IOException("the last stage sent the end after " + seq + " batches and got " + back + " from "
                        + ring.up().peer());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Batches scored so far. */
    long batches() {
        return seq;
    }

    /** Sequences packed end to end, positions from 0 (as the scorers pack them). */
    static PackedBatch pack(int[] seqLen, int[] tokens) {
        int[] seqStart = new int[seqLen.length];
        int[] positions = new int[tokens.length];
        for (int s = 0, at = 0; s < seqLen.length; at += seqLen[s++]) {
            seqStart[s] = at;
            for (int i = 0; i < seqLen[s]; i++) {
                positions[at + i] = i;
            }
        }
        return new PackedBatch(tokens, positions, seqStart, seqLen);
    }
}
