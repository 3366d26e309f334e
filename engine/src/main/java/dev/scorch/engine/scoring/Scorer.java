package dev.scorch.engine.scoring;

import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

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

    private static final Workspace.Key NEEDED_SEQ = new Workspace.Key("scorer.needed_seq"); // [rows needing logits]
    private static final Workspace.Key NEEDED_POS = new Workspace.Key("scorer.needed_pos"); // [rows needing logits]
    private static final Workspace.Key X = new Workspace.Key("scorer.x"); // [chunk, hidden]
    private static final Workspace.Key LOGITS = new Workspace.Key("scorer.logits"); // [chunk, vocab]
    private static final Workspace.Key LSE = new Workspace.Key("scorer.lse"); // [chunk]
    private static final Workspace.Key BEST = new Workspace.Key("scorer.best"); // [chunk]
    private static final Workspace.Key SEQS =
            new Workspace.Key("scorer.seqs"); // the requests' token arrays, while packing

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
        List<int[]> seqs = ws.object(SEQS, ArrayList::new);
        seqs.clear();
        for (ScoreRequest r : requests) {
            seqs.add(r.tokens());
        }
        PackedBatch batch = PackedBatch.of(seqs, ws);
        seqs.clear();
        float[] hidden = model.forward(batch, ops, routes, ws); // [T, hidden]
        int hiddenSize = model.config().hiddenSize();

        // Rows whose logits are needed: (sequence, position) pairs, in packed order.
        int[] neededSeq = ws.ints(NEEDED_SEQ, batch.numTokens());
        int[] neededPos = ws.ints(NEEDED_POS, batch.numTokens());
        int needed = out.neededRows(neededSeq, neededPos);
        int chunk = Math.max(1, Math.min(needed, LOGITS_CHUNK_FLOATS / vocab));
        float[] x = ws.floats(X, chunk * hiddenSize);
        float[] logits = ws.floats(LOGITS, chunk * vocab);
        double[] lse = ws.doubles(LSE, chunk);
        int[] best = ws.ints(BEST, chunk);
        for (int c0 = 0; c0 < needed; c0 += chunk) {
            int rows = Math.min(chunk, needed - c0);
            for (int j = 0; j < rows; j++) {
                int row = batch.seqStart()[neededSeq[c0 + j]] + neededPos[c0 + j];
                System.arraycopy(hidden, row * hiddenSize, x, j * hiddenSize, hiddenSize);
            }
            model.logits(x, rows, ops, logits);
            // Each row's log-sum-exp and argmax, rows spread over the engine's threads.
            ops.forEachRow(rows, j -> {
                lse[j] = ops.logSumExp(logits, j * vocab, vocab);
                best[j] = LogSoftmax.argmax(logits, j * vocab, vocab);
            });
            for (int j = 0; j < rows; j++) {
                int s = neededSeq[c0 + j];
                int pos = neededPos[c0 + j];
                int target = out.target(s, pos);
                out.accept(s, pos, lse[j], best[j], target >= 0 ? logits[j * vocab + target] : 0f, logits, j * vocab);
            }
        }
    }
}
