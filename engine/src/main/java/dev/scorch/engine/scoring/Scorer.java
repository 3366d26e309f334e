package dev.scorch.engine.scoring;

import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntConsumer;

/**
 * Log-prob scoring of a batch of sequences in one packed prefill. Logits are computed only for the rows
 * that need them, a chunk of rows at a time, so a [tokens × vocab] tensor never exists for the batch. Activations
 * live in a workspace kept from batch to batch, and results go to a caller's {@link BatchScores}: steady scoring into a
 * kept one allocates nothing per token.
 */
public final class Scorer implements BatchScorer {
    /**
     * Logits computed at once are at most this many floats (32 MiB): 256 rows at vocab 32768, one row block of the
     * packed GEMM, which decodes each lm_head weight row once per block of up to 256 rows, so larger chunks only add
     * memory (51 rows at Kimi's 163840).
     */
    static final int LOGITS_CHUNK_FLOATS = 8 << 20;

    private static final Workspace.Slot<Scratch> SCRATCH = new Workspace.Slot<>(Scratch::new);

    /** A workspace's buffers for scoring, beside the model's activations. */
    private static final class Scratch extends Workspace.Buffers {
        private final List<int[]> seqs = new ArrayList<>(); // the requests' token arrays, while packing
        private int[] neededSeq; // [rows needing logits]
        private int[] neededPos; // [rows needing logits]
        private float[] x; // [chunk, hidden]
        private float[] logits; // [chunk, vocab]
        private double[] lse; // [chunk]
        private int[] best; // [chunk]
        // Each row's log-sum-exp and argmax, the body of a pass over a chunk's rows (made once: no lambda per chunk).
        private Ops ops;
        private int vocab;
        private final IntConsumer lseAndArgmax = j -> {
            lse[j] = ops.logSumExp(logits, j * vocab, vocab);
            best[j] = LogSoftmax.argmax(logits, j * vocab, vocab);
        };

        Scratch(Workspace ws) {
            super(ws);
        }
    }

    private final DeepseekV3Model model;
    private final Ops ops;
    // The workspace between calls; a call that finds it taken (another thread scoring) uses a fresh one.
    private final AtomicReference<Workspace> idle = new AtomicReference<>(new Workspace());

    public Scorer(DeepseekV3Model model, Ops ops) {
        this.model = model;
        this.ops = ops;
    }

    /** Bytes the workspace kept between calls holds: what activations cost at the largest batch scored so far. */
    public long workspaceBytes() {
        Workspace ws = idle.get();
        return ws == null ? 0 : ws.bytes();
    }

    @Override
    public void score(List<ScoreRequest> requests, BatchScores into) {
        score(requests, null, into);
    }

    /** As {@link #score(List)}; routes ([moe layer][T * top_k]) receives the experts of every packed token when not null. */
    public List<SequenceScore> score(List<ScoreRequest> requests, int[][] routes) {
        BatchScores scores = new BatchScores();
        score(requests, routes, scores);
        return scores.toList();
    }

    /** As {@link #score(List, BatchScores)}, with routes as in {@link #score(List, int[][])}. */
    public void score(List<ScoreRequest> requests, int[][] routes, BatchScores into) {
        Workspace ws = idle.getAndSet(null);
        if (ws == null) {
            ws = new Workspace();
        }
        try {
            score(requests, routes, ws, into);
        } catch (InternalError e) {
            throw model.readFault(e);
        } finally {
            idle.set(ws);
        }
    }

    private void score(List<ScoreRequest> requests, int[][] routes, Workspace ws, BatchScores out) {
        int vocab = model.vocabSize();
        out.reset(requests, vocab);
        Scratch s = ws.get(SCRATCH);
        List<int[]> seqs = s.seqs;
        seqs.clear();
        for (ScoreRequest r : requests) {
            seqs.add(r.tokens());
        }
        PackedBatch batch = PackedBatch.of(seqs, ws);
        seqs.clear();
        float[] hidden = model.forward(batch, ops, routes, ws); // [T, hidden]
        logits(model, ops, hidden, batch, null, ws, out);
    }

    /**
     * Scores out's needed positions from the final hidden states [T, hidden] of batch, whose sequence s holds the
     * positions from[s] .. of out's sequence s (from null: all of them, from 0). Logits are computed a chunk of rows at a
     * time through {@link DeepseekV3Model#logits}, with the scratch in ws.
     */
    static void logits(
            DeepseekV3Model model,
            Ops ops,
            float[] hidden,
            PackedBatch batch,
            int[] from,
            Workspace ws,
            BatchScores out) {
        int vocab = model.vocabSize();
        int hiddenSize = model.config().hiddenSize();
        Scratch s = ws.get(SCRATCH);
        // Rows whose logits are needed: (sequence, position) pairs, in packed order.
        int tokens = out.tokenStart(out.sequences());
        int[] neededSeq = s.neededSeq = s.ints(s.neededSeq, tokens);
        int[] neededPos = s.neededPos = s.ints(s.neededPos, tokens);
        int needed = out.neededRows(neededSeq, neededPos);
        int chunk = Math.max(1, Math.min(needed, LOGITS_CHUNK_FLOATS / vocab));
        float[] x = s.x = s.floats(s.x, chunk * hiddenSize);
        float[] logits = s.logits = s.floats(s.logits, chunk * vocab);
        double[] lse = s.lse = s.doubles(s.lse, chunk);
        int[] best = s.best = s.ints(s.best, chunk);
        s.ops = ops;
        s.vocab = vocab;
        for (int c0 = 0; c0 < needed; c0 += chunk) {
            int rows = Math.min(chunk, needed - c0);
            for (int j = 0; j < rows; j++) {
                int seq = neededSeq[c0 + j];
                int offset = neededPos[c0 + j] - (from == null ? 0 : from[seq]);
                if (offset < 0) {
                    throw new IllegalStateException("position " + neededPos[c0 + j] + " of sequence " + seq
                            + " needs logits but the batch holds it from " + from[seq]);
                }
                System.arraycopy(hidden, (batch.seqStart()[seq] + offset) * hiddenSize, x, j * hiddenSize, hiddenSize);
            }
            model.logits(x, rows, ops, logits);
            ops.forEachRow(rows, s.lseAndArgmax); // rows spread over the engine's threads
            for (int j = 0; j < rows; j++) {
                int seq = neededSeq[c0 + j];
                int pos = neededPos[c0 + j];
                int target = out.target(seq, pos);
                out.accept(seq, pos, lse[j], best[j], target >= 0 ? logits[j * vocab + target] : 0f, logits, j * vocab);
            }
        }
    }
}
