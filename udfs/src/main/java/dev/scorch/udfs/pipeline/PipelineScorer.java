package dev.scorch.udfs.pipeline;

import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.List;

/**
 * The last stage's scorer: each batch's token ids go round the ring to the first stage, its hidden states come back
 * through the other stages, and the last stage's layers, model.norm, lm_head and log-softmax score it here. Of the
 * batches given together ({@link #scoreAll}), up to inFlight are in the pipeline at once, the one this stage scores
 * included, so the stages work on different batches at the same time (inFlight = 1: one stage at a time); each batch
 * that comes back is checked against what was sent, in order, and once it is scored the next one is sent. With no
 * ring (a pipeline of one stage) it scores alone.
 */
final class PipelineScorer implements BatchScorer, AutoCloseable {
    private final StageRing ring; // null for a single stage
    private final StageEngine engine;
    private final int inFlight;
    private final Runnable afterBatch;
    private final StageSender sender; // the ring's down link: token frames to the first stage
    private final ArrayDeque<StageFrame> sent = new ArrayDeque<>(); // the token frames in the ring, oldest first
    private long seq; // the next batch's number

    /**
     * @param inFlight   the most batches in the pipeline at once, at least 1
     * @param afterBatch runs after each batch is scored (a test's failure hook)
     */
    PipelineScorer(StageRing ring, StageEngine engine, int inFlight, Runnable afterBatch) {
        if (inFlight < 1) {
            throw new IllegalArgumentException(inFlight + " batches in flight: at least 1");
        }
        this.ring = ring;
        this.engine = engine;
        this.inFlight = inFlight;
        this.afterBatch = afterBatch;
        this.sender = ring == null
                ? null
                : new StageSender(
                        ring.down(),
                        inFlight + 1,
                        "scorch-pipeline-send-to-" + ring.down().peer(),
                        ring::close);
    }

    @Override
    public void score(List<ScoreRequest> requests, BatchScores into) {
        scoreAll(List.of(requests), List.of(into));
    }

    @Override
    public void scoreAll(List<List<ScoreRequest>> batches, List<BatchScores> into) {
        int n = batches.size();
        try {
            for (int k = 0; k < Math.min(inFlight, n); k++) {
                send(batches.get(k));
            }
            for (int k = 0; k < n; k++) {
                StageFrame back = ring == null ? sent.poll() : receive();
                engine.score(batches.get(k), pack(back.seqLen(), back.tokens()), back.hidden(), into.get(k));
                if (k + inFlight < n) {
                    send(batches.get(k + inFlight));
                }
                afterBatch.run();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void send(List<ScoreRequest> requests) throws IOException {
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
        StageFrame f = StageFrame.tokens(seq++, seqLen, tokens);
        sent.add(f);
        if (sender != null) {
            sender.send(f);
        }
    }

    /** The oldest batch in the ring, back with its hidden states: the same batch, or the ring has gone wrong. */
    private StageFrame receive() throws IOException {
        StageFrame want = sent.poll();
        StageFrame back = sender.receive(ring.up());
        if (back.kind() != StageFrame.Kind.BATCH
                || back.seq() != want.seq()
                || back.hidden() == null
                || !Arrays.equals(back.seqLen(), want.seqLen())
                || !Arrays.equals(back.tokens(), want.tokens())) {
            throw new IOException("the last stage sent batch #" + want.seq() + " round and got " + back + " from "
                    + ring.up().peer() + ": not the same batch with hidden states");
        }
        return back;
    }

    /** Tells the other stages the stream has ended and waits for the end to come round: every stage is done. */
    void finish() {
        if (ring == null) {
            return;
        }
        try {
            sender.send(StageFrame.end(seq));
            sender.flush();
            StageFrame back = sender.receive(ring.up());
            if (back.kind() != StageFrame.Kind.END || back.seq() != seq) {
                throw new IOException("the last stage sent the end after " + seq + " batches and got " + back + " from "
                        + ring.up().peer());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        if (sender != null) {
            sender.close();
        }
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
