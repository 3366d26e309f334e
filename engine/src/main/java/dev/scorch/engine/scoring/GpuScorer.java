package dev.scorch.engine.scoring;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.ArrayList;
import java.util.List;

/**
 * Log-prob scoring on a {@link GpuModel} or a {@link GpuPipeline}: packed prefills (one, or one per micro-batch of
 * consecutive sequences on a pipeline), then on the last stage lm_head and the log-softmax stats (log-sum-exp, target
 * logit, argmax) for the rows that need them, a chunk at a time. Only those stats come back to the host, plus whole
 * logits rows where top-k or logits were asked for.
 */
public final class GpuScorer implements BatchScorer {
    /** Logits computed at once are at most this many floats (256 MiB of device memory). */
    static final int LOGITS_CHUNK_FLOATS = 64 << 20;

    private final GpuStages stages;

    /** A scorer on a {@link GpuModel}, a {@link GpuPipeline} or another chain of stages. */
    public GpuScorer(GpuStages stages) {
        this.stages = stages;
    }

    /** The one-device model scored on, or null when this scorer runs a pipeline. */
    public GpuModel model() {
        return stages instanceof GpuModel m ? m : null;
    }

    /** What this scorer runs on. */
    public GpuStages stages() {
        return stages;
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
        int vocab = stages.config().vocabSize();
        out.reset(requests, vocab);
        int n = requests.size();
        if (n == 0) {
            if (routes != null) {
                java.util.Arrays.fill(routes, new int[0]);
            }
            return;
        }
        int[] lengths = new int[n];
        for (int s = 0; s < n; s++) {
            lengths[s] = requests.get(s).tokens().length;
        }
        int[] cut = GpuStages.cuts(lengths, stages.microBatches(n));
        int parts = cut.length - 1;
        List<GpuStages.Micro> micro = new ArrayList<>(parts);
        int[][][] microRoutes = new int[parts][][];
        for (int p = 0; p < parts; p++) {
            List<int[]> seqs = new ArrayList<>(cut[p + 1] - cut[p]);
            for (int s = cut[p]; s < cut[p + 1]; s++) {
                seqs.add(requests.get(s).tokens());
            }
            if (routes != null) {
                microRoutes[p] = parts == 1 ? routes : new int[routes.length][];
            }
            micro.add(new GpuStages.Micro(PackedBatch.of(seqs), null, microRoutes[p]));
        }
        int tokens = 0;
        for (int len : lengths) {
            tokens += len;
        }
        int[] neededSeq = new int[tokens];
        int[] neededPos = new int[tokens];
        int needed = out.neededRows(neededSeq, neededPos);
        // needed rows come in sequence order: micro-batch p's are [from[p], from[p + 1])
        int[] from = new int[parts + 1];
        for (int p = 0, j = 0; p < parts; p++) {
            from[p] = j;
            while (j < needed && neededSeq[j] < cut[p + 1]) {
                j++;
            }
            from[p + 1] = j;
        }
        stages.run(micro, (p, last, hidden) -> {
            acceptRows(out, micro.get(p).batch(), cut[p], neededSeq, neededPos, from[p], from[p + 1], last, hidden);
            return null;
        });
        if (routes != null && parts > 1) {
            for (int l = 0; l < routes.length; l++) {
                int len = 0;
                for (int[][] r : microRoutes) {
                    len += r[l].length;
                }
                routes[l] = new int[len];
                int at = 0;
                for (int[][] r : microRoutes) {
                    System.arraycopy(r[l], 0, routes[l], at, r[l].length);
                    at += r[l].length;
                }
            }
        }
    }

    /**
     * lm_head and the log-softmax stats of needed rows [j0, j1) (sequence neededSeq[j], position neededPos[j]) from
     * hidden, the last stage's output for batch, whose first sequence is sequence seq0 of out, a chunk at a time.
     */
    static void acceptRows(
            BatchScores out,
            PackedBatch batch,
            int seq0,
            int[] neededSeq,
            int[] neededPos,
            int j0,
            int j1,
            DecoderStage last,
            Buf hidden) {
        int vocab = out.vocab();
        int needed = j1 - j0;
        int chunk = Math.max(1, Math.min(needed, LOGITS_CHUNK_FLOATS / vocab));
        float[] stats = new float[3 * chunk];
        float[] rowsHost = null;
        for (int c0 = j0; c0 < j1; c0 += chunk) {
            int rows = Math.min(chunk, j1 - c0);
            int[] rowIds = new int[rows];
            int[] targets = new int[rows];
            boolean wholeRows = false;
            for (int j = 0; j < rows; j++) {
                int s = neededSeq[c0 + j];
                int pos = neededPos[c0 + j];
                rowIds[j] = batch.seqStart()[s - seq0] + pos;
                targets[j] = out.target(s, pos);
                wholeRows |= out.needsRow(s, pos);
            }
            long[] mark = last.markScratch();
            Buf[] ls = last.logits(hidden, rowIds, targets);
            last.device().read(ls[1], stats, 0, 3 * rows);
            if (wholeRows) {
                if (rowsHost == null) {
                    rowsHost = new float[chunk * vocab];
                }
                last.device().read(ls[0], rowsHost, 0, rows * vocab);
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
            last.releaseScratch(mark); // the next chunk reuses this one's scratch
        }
    }
}
