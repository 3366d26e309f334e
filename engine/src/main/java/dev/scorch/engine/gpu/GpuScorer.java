package dev.scorch.engine.gpu;

import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.SequenceScore;
import java.util.ArrayList;
import java.util.List;

/**
 * Log-prob scoring on a {@link GpuModel}: one packed prefill on the device, then lm_head and the log-softmax
 * stats (log-sum-exp, target logit, argmax) for the rows that need them, a chunk at a time. Only those stats
 * come back to the host, plus whole logits rows where top-k or logits were asked for.
 */
public final class GpuScorer implements BatchScorer {
    /** Logits computed at once are at most this many floats (256 MiB of device memory). */
    static final int LOGITS_CHUNK_FLOATS = 64 << 20;

    private final GpuModel model;

    public GpuScorer(GpuModel model) {
        this.model = model;
    }

    public GpuModel model() {
        return model;
    }

    @Override
    public void score(List<ScoreRequest> requests, BatchScores into) {
        score(requests, null, into);
    }

    /** As {@link #score(List)}; routes ([moe layer][T * top_k]) receives every packed token's experts when not null. */
    public List<SequenceScore> score(List<ScoreRequest> requests, int[][] routes) {
        BatchScores scores = new BatchScores();
        score(requests, routes, scores);
        return scores.toList();
    }

    /** As {@link #score(List, BatchScores)}, with routes as in {@link #score(List, int[][])}. */
    public void score(List<ScoreRequest> requests, int[][] routes, BatchScores out) {
        int vocab = model.config().vocabSize();
        out.reset(requests, vocab);
        List<int[]> seqs = new ArrayList<>(requests.size());
        for (ScoreRequest r : requests) {
            seqs.add(r.tokens());
        }
        PackedBatch batch = PackedBatch.of(seqs);
        int[] neededSeq = new int[batch.numTokens()];
        int[] neededPos = new int[batch.numTokens()];
        int needed = out.neededRows(neededSeq, neededPos);
        model.forward(batch, null, routes, hidden -> {
            int chunk = Math.max(1, Math.min(needed, LOGITS_CHUNK_FLOATS / vocab));
            float[] stats = new float[3 * chunk];
            float[] rowsHost = null;
            for (int c0 = 0; c0 < needed; c0 += chunk) {
                int rows = Math.min(chunk, needed - c0);
                int[] rowIds = new int[rows];
                int[] targets = new int[rows];
                boolean wholeRows = false;
                for (int j = 0; j < rows; j++) {
                    int s = neededSeq[c0 + j];
                    int pos = neededPos[c0 + j];
                    rowIds[j] = batch.seqStart()[s] + pos;
                    targets[j] = out.target(s, pos);
                    wholeRows |= out.needsRow(s, pos);
                }
                long[] mark = model.stage().markScratch();
                Buf[] ls = model.stage().logits(hidden, rowIds, targets);
                model.device().read(ls[1], stats, 0, 3 * rows);
                if (wholeRows) {
                    if (rowsHost == null) {
                        rowsHost = new float[chunk * vocab];
                    }
                    model.device().read(ls[0], rowsHost, 0, rows * vocab);
                }
                for (int j = 0; j < rows; j++) {
                    out.accept(
                            neededSeq[c0 + j],
                            neededPos[c0 + j],
                            stats[3 * j],
                            (int) stats[3 * j + 2],
                            stats[3 * j + 1],
                            rowsHost,
                            j * vocab);
                }
                model.stage().releaseScratch(mark); // the next chunk reuses this one's scratch
            }
            return null;
        });
    }
}
